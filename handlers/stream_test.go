package handlers_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// downloadServer is a server whose S3 is reached through a proxy, to
// count the S3 connections it holds, with a short write idle limit, and a
// 48 MiB file: more than every socket buffer on the way holds.
func downloadServer(t *testing.T) (*apitest.Server, *storagetest.Proxy, string, string) {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	proxy := storagetest.NewProxy(t, cfg.S3Endpoint)
	cfg.S3Endpoint = proxy.Addr()
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg, Limits: handlers.Limits{WriteIdleTimeout: time.Second}})
	token := srv.Token(t, "alice")
	c := apitest.NewClient(t, srv.URL, token)
	f := c.Do("POST", "/v1/files?path=big.bin", bytes.Repeat([]byte("0123456789abcdef"), 3<<20),
		"X-Run-ID", "run-big").Expect(t, http.StatusCreated).File(t)
	return srv, proxy, token, f.ID
}

// rawDownload sends a GET of target on a connection whose receive buffer
// is as small as the kernel allows, and reads the response head; the body
// is left to the caller.
func rawDownload(t *testing.T, srv *apitest.Server, token, target string) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", target, token)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("download: %d", res.StatusCode)
	}
	return conn.(*net.TCPConn), br
}

// expectClientGone checks that the server logged the cut download as a
// client gone, never as a failure, and counted it as 499.
func expectClientGone(t *testing.T, srv *apitest.Server, route string) {
	t.Helper()
	storagetest.Eventually(t, time.Minute, `the server to log "client gone"`, func() bool {
		return strings.Contains(srv.Logs.String(), "client gone")
	})
	if logs := srv.Logs.String(); regexp.MustCompile(`level=(ERROR|WARN)|storage unavailable`).MatchString(logs) {
		t.Fatalf("a client that went away was logged as a failure:\n%s", logs)
	}
	metrics := string(apitest.NewClient(t, srv.URL, "").Do("GET", "/metrics", nil).Body)
	if !strings.Contains(metrics, `route="`+route+`",status="499"`) {
		t.Fatalf("a download whose client went away must be counted as 499:\n%s", metrics)
	}
}

// downloads are the two ways bytes reach a client: a file's content,
// spliced from a connection of its own to S3 to the client's (a large read
// on Linux), and a run's archive, copied through the process.
var downloads = []struct {
	name, route string
	target      func(id string) string
}{
	{"Spliced", "/v1/files/:id/content", func(id string) string { return "/v1/files/" + id + "/content" }},
	{"Copied", "/v1/runs/:run_id/archive", func(string) string { return "/v1/runs/run-big/archive?format=tar" }},
}

// TestStalledDownloadsAreCut: a client that asks for content and then
// reads nothing is cut once the write idle limit passes, and the S3
// connection of its download is closed; the client gets a short body. The
// cut is a client gone (499), not an outage.
func TestStalledDownloadsAreCut(t *testing.T) {
	for _, d := range downloads {
		t.Run(d.name, func(t *testing.T) {
			srv, proxy, token, id := downloadServer(t)
			conn, br := rawDownload(t, srv, token, d.target(id))
			held := proxy.Open() // the download's S3 connection among them
			storagetest.Eventually(t, time.Minute, "the stalled download's S3 connection to close", func() bool {
				return proxy.Open() < held
			})
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			n, _ := io.Copy(io.Discard, br)
			if n >= 48<<20 {
				t.Fatalf("the stalled client got %d bytes: the download was not cut", n)
			}
			expectClientGone(t, srv, d.route)
		})
	}
}

// TestClientResetMidDownloadIsNotAnOutage: a client that reads part of a
// download and resets the connection is a client gone, logged at debug
// level and counted as 499, never "storage unavailable".
func TestClientResetMidDownloadIsNotAnOutage(t *testing.T) {
	for _, d := range downloads {
		t.Run(d.name, func(t *testing.T) {
			srv, _, token, id := downloadServer(t)
			conn, br := rawDownload(t, srv, token, d.target(id))
			if _, err := io.ReadFull(br, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetLinger(0) // close sends a reset
			conn.Close()
			expectClientGone(t, srv, d.route)
		})
	}
}
