// Package testkit holds the few helpers the tests of several packages
// share: reading a body to its end, reading the answer on a raw
// connection, reading a run's archive (zip or tar) into its files, and
// finding the Node tools scripts/test.sh installs.
// It is imported by tests only.
package testkit

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
)

// NodeTools is Node 24 and the folder of the pinned npm tools (tools/node),
// which scripts/test.sh installs (ensure_deps node npm) and exports as
// AGENTFS_TEST_NODE and AGENTFS_TEST_NODE_TOOLS. also names the further
// dependencies the test needs (as "chromium"), each exported as its
// upper-case name with _BIN. The test fails, saying how to set them up,
// when they are not set.
func NodeTools(t testing.TB, also ...string) (node, dir string) {
	t.Helper()
	node, dir = os.Getenv("AGENTFS_TEST_NODE"), os.Getenv("AGENTFS_TEST_NODE_TOOLS")
	if node == "" || dir == "" {
		deps, exports := "node npm", "AGENTFS_TEST_NODE=$NODE24 AGENTFS_TEST_NODE_TOOLS=$NODE_TOOLS_DIR"
		for _, d := range also {
			deps += " " + d
			exports += " " + strings.ToUpper(d) + "_BIN"
		}
		t.Fatalf("AGENTFS_TEST_NODE and AGENTFS_TEST_NODE_TOOLS are not set: run the tests with scripts/test.sh (or `make test`), "+
			"or `source scripts/lib.sh && ensure_deps %s && export %s` first", deps, exports)
	}
	return node, dir
}

// ReadAll reads r to its end and closes it. err is the error of the call
// that returned r, so that a test writes the two lines
//
//	r, err := store.OpenBlob(ctx, key, 0, size)
//	data := testkit.ReadAll(t, r, err)
//
// and fails, saying why, when either the call or the read does.
func ReadAll(t testing.TB, r io.ReadCloser, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RawAnswer reads the HTTP answer to a request written by hand on conn
// (a test that needs what no client sends: a body cut short, a malformed
// chunk), and returns its status and body; it fails when none comes.
func RawAnswer(t testing.TB, conn net.Conn) (int, string) {
	t.Helper()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// FuzzSeeds is the fuzz target of a table test whose cases are strings:
// it seeds f with each case and fuzzes check over any bytes.
func FuzzSeeds(f *testing.F, cases []string, check func(t *testing.T, data []byte)) {
	for _, tc := range cases {
		f.Add([]byte(tc))
	}
	f.Fuzz(check)
}

// Unzip reads a zip archive into its files, name to content.
func Unzip(t testing.TB, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip (%d bytes): %v", len(data), err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		r, err := f.Open()
		b := ReadAll(t, r, err)
		out[f.Name] = string(b)
	}
	return out
}

// Untar reads a tar archive into its files, name to content.
func Untar(t testing.TB, r io.Reader) map[string]string {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		b := ReadAll(t, io.NopCloser(tr), nil)
		out[h.Name] = string(b)
	}
}
