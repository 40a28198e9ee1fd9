package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// directClient is a client of the test server as env's subject, to set
// the scene and check what the CLI did.
func (e cliEnv) directClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(e["AGENTFS_URL"], e["AGENTFS_TOKEN"], opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCLIUploadsBatches(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "hist-ledger")
	c := env.directClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pending, err := c.CreateUpload(ctx, "notes/big.bin", 100, client.CreateUploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aborted, err := c.CreateUpload(ctx, "notes/gone.bin", 100, client.CreateUploadOptions{})
	if err == nil {
		_, err = c.AbortUpload(ctx, aborted.ID, client.AbortOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	uploads := func(args ...string) []client.Upload {
		t.Helper()
		stdout, stderr, err := env.run(append([]string{"uploads"}, args...)...)
		var out []client.Upload
		if err != nil || json.Unmarshal([]byte(stdout), &out) != nil {
			t.Fatalf("uploads %v: %q, %v\n%s", args, stdout, err, stderr)
		}
		return out
	}
	if all := uploads(); len(all) != 2 || all[0].ID != aborted.ID || all[1].ID != pending.ID {
		t.Fatalf("uploads %+v", all)
	}
	if p := uploads("--status", "pending"); len(p) != 1 || p[0].ID != pending.ID {
		t.Fatalf("uploads --status pending: %+v", p)
	}
	if p := uploads("--path", "notes/gone.bin", "--limit", "1"); len(p) != 1 || p[0].ID != aborted.ID {
		t.Fatalf("uploads --path: %+v", p)
	}
	if none := uploads("--status", "completed"); len(none) != 0 {
		t.Fatalf("uploads --status completed: %+v", none)
	}
	env.expectFailure(t, "VALIDATION_FAILED", "uploads", "--status", "sleeping")

	// A batch whose first item waits for a key another request holds: the
	// items after it cannot run before the cancel.
	finish := holdKey(t, env, "notes/held.txt", "hist-held")
	held := client.BatchPut("notes/held.txt", []byte("held"))
	held.IdempotencyKey = "hist-held"
	b, err := c.CreateBatch(ctx, []client.BatchOp{held, client.BatchPut("notes/never.txt", []byte("n"))}, client.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := env.run("batch", "cancel", b.ID)
	var canceled client.Batch
	if err != nil || json.Unmarshal([]byte(stdout), &canceled) != nil || canceled.ID != b.ID ||
		canceled.Items[1].Status != client.BatchItemCanceled {
		t.Fatalf("batch cancel: %q, %v\n%s", stdout, err, stderr)
	}
	finish()
	if ended, err := c.WaitBatch(ctx, b.ID); err != nil || ended.Status != client.BatchCanceled {
		t.Fatalf("the canceled batch ended %+v, %v", ended, err)
	}
	env.expectFailure(t, "NOT_FOUND", "batch", "cancel", "batch_nope")
	_, _, err = env.run("batch", "cancel", "batch_nope")
	expectNext(t, err, "agentfs batches")

	stdout, stderr, err = env.run("batches")
	var batches []client.Batch
	if err != nil || json.Unmarshal([]byte(stdout), &batches) != nil || len(batches) != 1 || batches[0].ID != b.ID ||
		batches[0].Status != client.BatchCanceled || batches[0].Counts.Canceled < 1 {
		t.Fatalf("batches: %q, %v\n%s", stdout, err, stderr)
	}
	if stdout, _, err := env.run("batches", "--status", "running"); err != nil || strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("batches --status running: %q, %v", stdout, err)
	}
}

// holdKey starts a keyed upload whose body stalls, so that its key stays
// in progress until finish is called.
func holdKey(t *testing.T, env cliEnv, path, key string) (finish func()) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", env["AGENTFS_URL"]+"/v1/files?path="+url.QueryEscape(path), pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env["AGENTFS_TOKEN"])
	req.Header.Set("Idempotency-Key", key)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	if _, err := pw.Write([]byte("held ")); err != nil {
		t.Fatal(err)
	}
	c := env.directClient(t)
	storagetest.Eventually(t, 20*time.Second, "the held upload to claim its key", func() bool {
		op, err := c.Operation(context.Background(), key)
		return err == nil && op.Status == client.OperationInProgress
	})
	return func() {
		_, _ = pw.Write([]byte("body"))
		pw.Close()
		<-done
	}
}

// awaitEvents follows the feed until n events of run are visible, so that
// a command run after it sees them all: the feed hands an event out once
// every older transaction has ended, which on a shared database may be a
// moment after the write returned.
func awaitEvents(t *testing.T, c *client.Client, run string, n int) []client.Event {
	t.Helper()
	var got []client.Event
	after := ""
	for tries := 0; len(got) < n; tries++ {
		if tries == 20 {
			t.Fatalf("only %d of %d events of %s", len(got), n, run)
		}
		l, err := c.Events(context.Background(), client.EventOptions{RunID: run, After: after, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got, after = append(got, l.Data...), l.NextCursor
	}
	return got
}

// eventLines decodes JSON lines of events.
func eventLines(t *testing.T, out string) []client.Event {
	t.Helper()
	var events []client.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e client.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.ID == "" {
			t.Fatalf("line %q is not an event: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}

func paths(events []client.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type+" "+e.Path)
	}
	return strings.Join(out, ", ")
}

var resumeCursor = regexp.MustCompile(`--after (\S+)`)

func TestCLIEventsAndRun(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "hist/run-1")
	f := env.file(t, "put", writeLocal(t, "e.txt", "1"), "notes/e.txt")
	env.file(t, "put", writeLocal(t, "e.txt", "22"), "notes/e.txt", "--replace")
	env.file(t, "mv", f.ID, "notes/e2.txt")
	env.with("AGENTFS_RUN_ID", "hist-other").file(t, "put", writeLocal(t, "o.txt", "o"), "notes/o.txt")
	c := env.directClient(t)
	awaitEvents(t, c, "hist/run-1", 3)
	awaitEvents(t, c, "hist-other", 1)

	stdout, stderr, err := env.run("events", "--run", "hist/run-1")
	if err != nil {
		t.Fatalf("events: %v\n%s", err, stderr)
	}
	if got := paths(eventLines(t, stdout)); got != "file.created notes/e.txt, file.replaced notes/e.txt, file.moved notes/e2.txt" {
		t.Fatalf("events --run: %s", got)
	}
	m := resumeCursor.FindStringSubmatch(stderr)
	if m == nil || !strings.HasPrefix(stderr, "next cursor "+m[1]) || !strings.Contains(stderr, "agentfs events --run hist/run-1 --after") {
		t.Fatalf("stderr %q, want the cursor and the command that goes on", stderr)
	}
	if stdout, _, err := env.run("events", "--run", "hist/run-1", "--after", m[1]); err != nil || stdout != "" {
		t.Fatalf("events after the last cursor: %q, %v", stdout, err)
	}
	stdout, _, err = env.run("events", "--type", "file.moved,file.created")
	if got := paths(eventLines(t, stdout)); err != nil || got != "file.created notes/e.txt, file.moved notes/e2.txt, file.created notes/o.txt" {
		t.Fatalf("events --type: %s, %v", got, err)
	}
	env.expectFailure(t, "VALIDATION_FAILED", "events", "--type", "file.exploded")
	env.expectFailure(t, "INVALID_REQUEST", "events", "--after", "bm90LWEtY3Vyc29y")

	t.Run("RunShow", func(t *testing.T) {
		stdout, stderr, err := env.run("run", "show", "hist/run-1")
		var r client.Run
		if err != nil || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("run show: %q, %v\n%s", stdout, err, stderr)
		}
		if r.RunID != "hist/run-1" || r.Counts != (client.RunCounts{Created: 1, Replaced: 1, Moved: 1}) || r.BytesWritten != 3 ||
			r.LiveFiles != 1 || len(r.AgentIDs) != 1 || r.AgentIDs[0] != "cli-agent" {
			t.Fatalf("run show printed %+v", r)
		}
		env.expectFailure(t, "NOT_FOUND", "run", "show", "hist-nobody")
		_, _, err = env.run("run", "show", "hist-nobody")
		expectNext(t, err, "hist-nobody", "AGENTFS_RUN_ID")
	})
}

// cuttingProxy forwards to the server and records the after parameter of
// every event poll; the poll numbered cut (from 1) is forwarded, answered
// by the server, and then its connection is cut, so its events are lost
// on the way.
type cuttingProxy struct {
	URL string

	mu     sync.Mutex
	afters []string
}

func newCuttingProxy(t *testing.T, target string, cut int) *cuttingProxy {
	t.Helper()
	p := &cuttingProxy{}
	p.URL = newRelay(t, target, func(r *http.Request) relayAnswer {
		n := 0
		if r.URL.Path == "/v1/events" {
			p.mu.Lock()
			p.afters = append(p.afters, r.URL.Query().Get("after"))
			n = len(p.afters)
			p.mu.Unlock()
		}
		return func(w http.ResponseWriter, res *http.Response, body []byte) {
			if n == cut {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			copyHeader(w, res)
			w.WriteHeader(res.StatusCode)
			_, _ = w.Write(body)
		}
	})
	return p
}

// relayAnswer writes to the client what the server answered.
type relayAnswer func(w http.ResponseWriter, res *http.Response, body []byte)

// newRelay is a proxy to target: for every request it asks seen (before
// forwarding it) how to answer, forwards it, reads the whole answer and
// hands it on. It returns the proxy's URL.
func newRelay(t *testing.T, target string, seen func(r *http.Request) relayAnswer) string {
	t.Helper()
	transport := &http.Transport{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := seen(r)
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
		if err != nil {
			panic(err)
		}
		out.Header = r.Header.Clone()
		out.ContentLength = r.ContentLength
		res, err := transport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		answer(w, res, body)
	}))
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return srv.URL
}

// copyHeader copies the server's answer headers to the client's.
func copyHeader(w http.ResponseWriter, res *http.Response) {
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
}

func (p *cuttingProxy) polls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.afters...)
}

// following is agentfs events --follow running in the background.
type following struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan error
}

func startFollowing(env cliEnv, args ...string) *following {
	ctx, cancel := context.WithCancel(context.Background())
	fw := &following{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		fw.done <- run(ctx, append([]string{"events", "--follow"}, args...), func(k string) string { return env[k] }, fw.stdout, fw.stderr)
	}()
	return fw
}

// lines waits until the follower has printed n lines.
func (fw *following) lines(t *testing.T, n int) {
	t.Helper()
	storagetest.Eventually(t, 30*time.Second, "events on stdout", func() bool {
		return strings.Count(fw.stdout.String(), "\n") >= n
	})
}

// stop interrupts the follower, as Ctrl-C does, and returns its error.
func (fw *following) stop(t *testing.T) error {
	t.Helper()
	fw.cancel()
	select {
	case err := <-fw.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("events --follow did not stop")
	}
	return nil
}

// TestCLIEventsFollow: --follow prints events as they are written; a poll
// cut on the way back is asked again from the same cursor, so nothing is
// lost or printed twice; Ctrl-C says how to resume, and resuming prints
// exactly what came after.
func TestCLIEventsFollow(t *testing.T) {
	t.Parallel()
	srv, env := servedCLI(t, "hist-follow")
	proxy := newCuttingProxy(t, srv.URL, 2)
	writer := env.directClient(t, client.WithRunID("hist-follow"))
	put := func(path string) {
		t.Helper()
		if _, err := writer.PutFile(context.Background(), path, strings.NewReader(path), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fw := startFollowing(env.with("AGENTFS_URL", proxy.URL), "--run", "hist-follow", "--after", "now")
	storagetest.Eventually(t, 30*time.Second, "the first poll", func() bool { return len(proxy.polls()) >= 1 })
	put("notes/f1.txt")
	fw.lines(t, 1)
	storagetest.Eventually(t, 30*time.Second, "the second poll", func() bool { return len(proxy.polls()) >= 2 })
	put("notes/f2.txt") // answers the second poll, whose answer is cut
	fw.lines(t, 2)
	put("notes/f3.txt")
	fw.lines(t, 3)
	err := fw.stop(t)

	if got := paths(eventLines(t, fw.stdout.String())); got != "file.created notes/f1.txt, file.created notes/f2.txt, file.created notes/f3.txt" {
		t.Fatalf("followed %s", got)
	}
	polls := proxy.polls()
	if len(polls) < 3 || polls[0] != "now" || polls[2] != polls[1] {
		t.Fatalf("polls asked after %q: the one after the cut must ask from the same cursor", polls)
	}
	if !errors.Is(err, context.Canceled) || exitCode(err) != 130 {
		t.Fatalf("interrupted follow: %v (exit %d)", err, exitCode(err))
	}
	m := resumeCursor.FindStringSubmatch(err.Error())
	if m == nil || !strings.Contains(err.Error(), "agentfs events --run hist-follow --after "+m[1]+" --follow") ||
		!strings.HasPrefix(err.Error(), "events interrupted") {
		t.Fatalf("error %q, want the command that resumes", err)
	}

	put("notes/f4.txt")
	again := startFollowing(env, "--run", "hist-follow", "--after", m[1])
	again.lines(t, 1)
	_ = again.stop(t)
	if got := paths(eventLines(t, again.stdout.String())); got != "file.created notes/f4.txt" {
		t.Fatalf("resumed with %s, want only notes/f4.txt", got)
	}
}

// TestRetryNoteBeyondMaxAttempts: a follower that has connected retries
// without limit, so its waits past AGENTFS_MAX_ATTEMPTS are announced
// without an "of N" they would contradict.
func TestRetryNoteBeyondMaxAttempts(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	cli := &cliRun{stderr: &stderr, maxAttempts: 3}
	p := &client.Problem{Status: 503, Code: "STORAGE_UNAVAILABLE"}
	cli.retrying(1, 2*time.Second, p)
	cli.retrying(5, 30*time.Second, p)
	want := "agentfs: 503 STORAGE_UNAVAILABLE; retrying in 2s (attempt 2 of 3)\n" +
		"agentfs: 503 STORAGE_UNAVAILABLE; retrying in 30s (attempt 6)\n"
	if stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}
