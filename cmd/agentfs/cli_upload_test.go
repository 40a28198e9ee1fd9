package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// countingProxy forwards to the server and records each request's method
// and path.
type countingProxy struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

// countedCLI starts a default test server behind a counting proxy and
// returns the proxy with the CLI's environment (run runID) pointed at it.
func countedCLI(t *testing.T, runID string) (*countingProxy, cliEnv) {
	t.Helper()
	srv := apitest.NewServer(t, apitest.Options{})
	proxy := newCountingProxy(t, srv.URL)
	return proxy, newCLIEnv(t, srv, runID).with("AGENTFS_URL", proxy.URL)
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, _ := url.Parse(target)
	forward := httputil.NewSingleHostReverseProxy(u)
	p := &countingProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// count returns how many requests had this method and a path with this
// suffix, and forgets them.
func (p *countingProxy) count(method, suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.HasPrefix(s, method+" ") && strings.HasSuffix(s, suffix) {
			n++
		}
	}
	return n
}

func (p *countingProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = nil
}

// randomLocal writes size reproducible random bytes to dir/name.
func randomLocal(t *testing.T, name string, size int, seed byte) (string, []byte, string) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(data)
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return p, data, hex.EncodeToString(sum[:])
}

// interruptedUpload is what an interrupted upload of data to path left: a
// session, made with the client of env, holding its first parts parts of
// part bytes each.
func interruptedUpload(t *testing.T, env cliEnv, path string, data []byte, sum string, part, parts int) (*client.Client, *client.Upload) {
	t.Helper()
	c, err := newCLIClient(func(k string) string { return env[k] }, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	u, err := c.CreateUpload(ctx, path, int64(len(data)), client.CreateUploadOptions{SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= parts; n++ {
		if _, err := c.PutPart(ctx, u.ID, n, bytes.NewReader(data[(n-1)*part:n*part]), int64(part), client.PartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c, u
}

// TestCLIUpload resumes an interrupted upload (one part already in a live
// session) with agentfs upload, and lets put switch to a session above its
// threshold.
func TestCLIUpload(t *testing.T) {
	t.Parallel()
	proxy, env := countedCLI(t, "cli-up")
	const size, part = 12 << 20, 5 << 20
	local, data, sum := randomLocal(t, "big", size, 1)

	// What an interrupted run left: the session and its first part.
	_, u := interruptedUpload(t, env, "datasets/big", data, sum, part, 1)
	proxy.reset()

	stdout, stderr, err := env.run("upload", local, "datasets/big", "--parallel", "2")
	if err != nil {
		t.Fatalf("upload: %v\nstderr: %s", err, stderr)
	}
	var f client.File
	if err := json.Unmarshal([]byte(stdout), &f); err != nil || f.SHA256 != sum || f.SizeBytes != size ||
		f.Path != "datasets/big" || f.RunID == nil || *f.RunID != "cli-up" {
		t.Fatalf("upload printed %q: %v", stdout, err)
	}
	if stderr != "" {
		t.Fatalf("stderr %q, want nothing off a terminal", stderr)
	}
	if p1, p2, p3 := proxy.count("PUT", "/parts/1"), proxy.count("PUT", "/parts/2"), proxy.count("PUT", "/parts/3"); p1 != 0 || p2 != 1 || p3 != 1 {
		t.Fatalf("parts sent: %d, %d, %d; want only 2 and 3", p1, p2, p3)
	}
	if n := proxy.count("POST", "/v1/uploads/"+u.ID+"/complete"); n != 1 {
		t.Fatalf("%d completes of the resumed session %s", n, u.ID)
	}

	t.Run("PutAboveThreshold", func(t *testing.T) {
		mid, _, midSum := randomLocal(t, "mid.bin", 6<<20, 2)
		proxy.reset()
		g := env.file(t, "put", mid, "datasets/mid.bin", "--threshold", "5MiB")
		if g.SHA256 != midSum || proxy.count("POST", "/v1/uploads") != 1 || proxy.count("POST", "/v1/files") != 0 {
			t.Fatalf("put above the threshold: %+v; requests %v", g, proxy.seen)
		}
		proxy.reset()
		h := env.file(t, "put", mid, "datasets/mid2.bin")
		if h.SHA256 != midSum || proxy.count("POST", "/v1/uploads") != 0 || proxy.count("POST", "/v1/files") != 1 {
			t.Fatalf("put below the threshold: %+v; requests %v", h, proxy.seen)
		}
		env.expectFailure(t, "PATH_EXISTS", "put", mid, "datasets/mid.bin", "--threshold", "1MiB")
	})
}

// TestCLIBatch runs a batch with one failing item: the batch is printed,
// the failed item's code goes to stderr, and the exit code is 1.
func TestCLIBatch(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-batch")
	taken := env.file(t, "put", writeLocal(t, "t.txt", "mine"), "taken.txt")
	ops := filepath.Join(t.TempDir(), "ops.json")
	if err := os.WriteFile(ops, []byte(`{"operations":[
		{"op":"put","path":"b/a.txt","content":"hello","content_type":"text/plain"},
		{"op":"put","path":"taken.txt","content":"theirs"},
		{"op":"copy","file_id":"`+taken.ID+`","path":"b/copy.txt"}
	]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, attempt := range []string{"first", "repeat"} {
		stdout, stderr, err := env.run("batch", ops, "--wait", "--key", "cli-batch-1")
		var b client.Batch
		if jerr := json.Unmarshal([]byte(stdout), &b); jerr != nil {
			t.Fatalf("%s: batch printed %q: %v", attempt, stdout, jerr)
		}
		if b.Status != client.BatchPartiallySucceeded || b.Counts.Failed != 1 || b.Items[1].Error == nil ||
			b.Items[1].Error.Code != "PATH_EXISTS" || b.Items[0].File == nil || b.Items[2].File == nil {
			t.Fatalf("%s: batch %+v", attempt, b)
		}
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "partially_succeeded") {
			t.Fatalf("%s: error %v, want exit 1 naming the status", attempt, err)
		}
		if !strings.Contains(stderr, "item 1 (put taken.txt) failed: 409 PATH_EXISTS") || !strings.Contains(stderr, taken.ID) {
			t.Fatalf("%s: stderr %q", attempt, stderr)
		}
	}
	if files := env.list(t, "--path", "b/a.txt"); len(files) != 1 {
		t.Fatalf("the repeated batch made %d files at b/a.txt", len(files))
	}

	t.Run("WithoutWait", func(t *testing.T) {
		ok := filepath.Join(t.TempDir(), "ok.json")
		if err := os.WriteFile(ok, []byte(`{"operations":[{"op":"delete","file_id":"`+taken.ID+`"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := env.run("batch", ok)
		var b client.Batch
		if err != nil || json.Unmarshal([]byte(stdout), &b) != nil || b.ID == "" || b.Counts.Total != 1 {
			t.Fatalf("batch without --wait: %q, %v\n%s", stdout, err, stderr)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte(`{"operations":[{"op":"move","file_id":"x"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		env.expectFailure(t, "VALIDATION_FAILED", "batch", bad)
	})
}

func TestReadBatchFile(t *testing.T) {
	t.Parallel()
	ops, err := readBatchFile("-", strings.NewReader(`{"operations":[{"op":"put","path":"a","content":""},{"op":"restore","file_id":"f"}]}`))
	if err != nil || len(ops) != 2 || ops[0] != client.BatchPut("a", nil) || ops[1] != client.BatchRestore("f") {
		t.Fatalf("%+v, %v", ops, err)
	}
	for in, want := range map[string]string{
		`{"ops":[]}`:        "unknown field",
		`{"operations":[]}`: "no operations",
		`{"operations":[{"op":"put","path":"a"}]}`:     "needs content",
		`{"operations":[{"op":"put","colour":"red"}]}`: "operations[0]",
		`[1]`: "operations",
		`{"operations":[{"op":"delete","file_id":"f"}]} {}`: "more than one",
	} {
		if _, err := readBatchFile("-", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to mention %q", in, err, want)
		}
	}
}

func TestCLIUploadUsage(t *testing.T) {
	t.Parallel()
	env := offlineEnv()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"upload", "a"}, "LOCAL and REMOTE_PATH"},
		{[]string{"upload", "-", "r"}, "not stdin"},
		{[]string{"upload", "a", "r", "--parallel", "0"}, "--parallel"},
		{[]string{"upload", "/does/not/exist", "r"}, "no such file"},
		{[]string{"batch"}, "one FILE.json"},
		{[]string{"batch", "/does/not/exist.json"}, "no such file"},
		{[]string{"put", "a", "r", "--threshold", "lots"}, "KiB, MiB or GiB"},
	} {
		stdout, _, err := env.run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || stdout != "" {
			t.Errorf("%v: %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		phase       string
		sent, total int64
		rate        float64
		want        string
	}{
		{phaseUploading, 120 << 20, 256 << 20, 40 << 20, "uploading [=============>                ]  46% 120.0/256.0 MiB 40.0 MiB/s"},
		{phaseHashing, 0, 10 << 30, -1, "hashing   [                              ]   0% 0.0/10.0 GiB"},
		{phaseUploading, 2048, 2048, 2048, "uploading [==============================] 100% 2.0/2.0 KiB 2.0 KiB/s"},
		{phaseUploading, 0, 0, 0, "uploading [==============================] 100% 0.0/0.0 B 0.0 B/s"},
		{phaseDownloading, 3 << 20, -1, 1 << 20, "downloading 3.0 MiB 1.0 MiB/s"},
		{phaseDownloading, 512, -1, -1, "downloading 512.0 B"},
	} {
		if got := progressLine(tc.phase, tc.sent, tc.total, tc.rate); got != tc.want {
			t.Errorf("progressLine(%s, %d, %d, %v)\n got %q\nwant %q", tc.phase, tc.sent, tc.total, tc.rate, got, tc.want)
		}
	}
}

// TestProgressPhases: the bar redraws at most ten times a second, at once
// when the phase changes, measures each phase's rate from its own start,
// and keeps a note apart from the bar.
func TestProgressPhases(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p := &progress{w: &out, now: func() time.Time { return clock }}
	p.update(phaseHashing, 1, 100)
	clock = clock.Add(50 * time.Millisecond)
	p.update(phaseHashing, 2, 100) // 50 ms after the last: not drawn
	clock = clock.Add(50 * time.Millisecond)
	p.update(phaseHashing, 3, 100) // 2 bytes in 100 ms
	if !strings.Contains(out.String(), "hashing   [") || !strings.Contains(out.String(), "20.0 B/s") {
		t.Fatalf("drawn %q, want the hashing rate since the phase began", out.String())
	}
	p.update(phaseHashing, 100, 100) // the end of a phase is always drawn
	clock = clock.Add(10 * time.Millisecond)
	p.update(phaseUploading, 0, 100) // a new phase is drawn at once
	p.interject("agentfs: 503 STORAGE_UNAVAILABLE; retrying in 1s (attempt 2 of 8)")
	clock = clock.Add(10 * time.Millisecond)
	p.update(phaseUploading, 100, 100)
	p.end()
	got := out.String()
	for _, want := range []string{
		"\rhashing   [==============================] 100% 100.0/100.0 B",
		"\ruploading [                              ]   0% 0.0/100.0 B",
		"\ragentfs: 503 STORAGE_UNAVAILABLE; retrying in 1s (attempt 2 of 8)\x1b[K\nuploading [",
		"\ruploading [==============================] 100% 100.0/100.0 B 9.8 KiB/s\x1b[K\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("drawn %q\nwant it to contain %q", got, want)
		}
	}
	if strings.Contains(got, " 2% ") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("drawn %q", got)
	}
}

func TestSizeFlag(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	v := sizeFlag(fs, "size", 64<<20, "")
	if got := fs.Lookup("size").DefValue; got != "64MiB" {
		t.Fatalf("default shown as %q", got)
	}
	for in, want := range map[string]int64{"1": 1, "5MiB": 5 << 20, "2 GiB": 2 << 30, "3KiB": 3 << 10} {
		if err := fs.Set("size", in); err != nil || *v != want {
			t.Errorf("%q: %d, %v; want %d", in, *v, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "1.5MiB", "5MB", "9999999999GiB"} {
		if err := fs.Set("size", in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
