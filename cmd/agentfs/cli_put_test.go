package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// holdingProxy forwards to the server, except the first request that hold
// matches: that one never reaches the server. Its body is read or not
// (readBody), held is closed, and it is kept until its client goes away or
// the test ends.
type holdingProxy struct {
	URL     string
	held    chan struct{}
	release chan struct{}
}

func newHoldingProxy(t *testing.T, target string, hold func(*http.Request) bool, readBody bool) *holdingProxy {
	t.Helper()
	u, _ := url.Parse(target)
	forward := httputil.NewSingleHostReverseProxy(u)
	p := &holdingProxy{held: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		if hold(r) {
			once.Do(func() { first = true })
		}
		if !first {
			forward.ServeHTTP(w, r)
			return
		}
		if readBody {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		close(p.held)
		// A client that goes away is noticed only once the body was
		// read; release ends the request otherwise.
		select {
		case <-r.Context().Done():
		case <-p.release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.release) }) // runs first: srv.Close waits for the request
	p.URL = srv.URL
	return p
}

// runUntilHeld runs the command and cancels it, as Ctrl-C does, once the
// proxy holds its request.
func runUntilHeld(env cliEnv, p *holdingProxy, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.held
		cancel()
	}()
	var out, errOut bytes.Buffer
	err = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func expectInterrupted(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil || !errors.Is(err, context.Canceled) || exitCode(err) != 130 {
		t.Fatalf("error %v (exit %d), want an interruption", err, exitCode(err))
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "put interrupted; ") || strings.Contains(msg, "context canceled") {
		t.Fatalf("error %q, want it to say put was interrupted, in the API's words", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("error %q, want it to mention %q", msg, w)
		}
	}
}

// TestCLIPutInterrupted: Ctrl-C during put says what the server kept and
// how to finish, and following that advice finishes the upload.
func TestCLIPutInterrupted(t *testing.T) {
	t.Parallel()
	srv, env := servedCLI(t, "cli-int")
	isPost := func(r *http.Request) bool { return r.Method == "POST" && r.URL.Path == "/v1/files" }

	t.Run("WholeBodySentOutcomeUnknown", func(t *testing.T) {
		local := writeLocal(t, "w.txt", "whole body")
		p := newHoldingProxy(t, srv.URL, isPost, true)
		_, _, err := runUntilHeld(env.with("AGENTFS_URL", p.URL), p, "put", local, "int/w.txt")
		expectInterrupted(t, err, "may have stored it", "GET /v1/operations/")
		key := regexp.MustCompile(`--key (afs-[0-9a-f]+)`).FindStringSubmatch(err.Error())
		if key == nil {
			t.Fatalf("error %q names no generated key", err)
		}
		// The advice: the same command with that key.
		f := env.file(t, "put", local, "int/w.txt", "--key", key[1])
		if f.Path != "int/w.txt" || f.SizeBytes != int64(len("whole body")) {
			t.Fatalf("put after the interruption: %+v", f)
		}
	})
	t.Run("BodyNotSentNothingStored", func(t *testing.T) {
		// More than the connection's buffers hold while nobody reads.
		local, _, _ := randomLocal(t, "n.bin", 24<<20, 3)
		p := newHoldingProxy(t, srv.URL, isPost, false)
		_, _, err := runUntilHeld(env.with("AGENTFS_URL", p.URL), p, "put", local, "int/n.bin", "--key", "int-n-1")
		expectInterrupted(t, err, "nothing was stored", "run the same command again")
		if files := env.list(t, "--path", "int/n.bin"); len(files) != 0 {
			t.Fatalf("files %+v after an upload said to have stored nothing", files)
		}
	})
	t.Run("SessionKept", func(t *testing.T) {
		local, _, sum := randomLocal(t, "s.bin", 6<<20, 4)
		isPart := func(r *http.Request) bool { return r.Method == "PUT" && strings.Contains(r.URL.Path, "/parts/") }
		p := newHoldingProxy(t, srv.URL, isPart, false)
		_, _, err := runUntilHeld(env.with("AGENTFS_URL", p.URL), p, "put", local, "int/s.bin", "--threshold", "5MiB")
		expectInterrupted(t, err, "the upload session upl_", "run the same command again to resume it")
		f := env.file(t, "put", local, "int/s.bin", "--threshold", "5MiB")
		if f.SHA256 != sum {
			t.Fatalf("resumed put: %+v", f)
		}
	})
}

// TestCLIUnreachableServer: with no server, every wait is announced on
// stderr, and the error says where it looked and what to do.
func TestCLIUnreachableServer(t *testing.T) {
	t.Parallel()
	base := "http://" + freeAddr(t)
	env := cliEnv{"AGENTFS_URL": base, "AGENTFS_TOKEN": "afs_x", "AGENTFS_MAX_ATTEMPTS": "2"}
	_, stderr, err := env.run("ls")
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("ls without a server: %v", err)
	}
	if n := strings.Count(stderr, "agentfs: connection refused; retrying in "); n != 1 || !strings.Contains(stderr, "(attempt 2 of 2)") {
		t.Fatalf("stderr %q, want one announced wait before attempt 2 of 2", stderr)
	}
	want := "ls: cannot reach AgentFS at " + base + " (connection refused, 2 attempts); is it running?"
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "make run") {
		t.Fatalf("error %q, want %q and how to start one", msg, want)
	}

	// A plain put of a small file is never sent whole: nothing was stored.
	_, _, err = env.run("put", writeLocal(t, "u.txt", "u"), "u.txt")
	if msg := err.Error(); !strings.Contains(msg, "cannot reach AgentFS") || !strings.Contains(msg, "nothing was stored") {
		t.Fatalf("put without a server: %q", msg)
	}
}

// TestCLIProgressBar: on a terminal, a small put shows no bar; a large one
// shows its phases, labelled.
func TestCLIProgressBar(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-bar")
	put := func(args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		c, err := newCLIClient(func(k string) string { return env[k] }, false)
		if err != nil {
			t.Fatal(err)
		}
		cli := &cliRun{name: "put", client: c, stdout: io.Discard, stderr: &stderr, stderrTTY: true, maxAttempts: 8}
		fs := flag.NewFlagSet("put", flag.ContinueOnError)
		runPut := putFlags(fs)
		pos, err := parseInterleaved(fs, args)
		if err == nil {
			err = runPut(context.Background(), cli, pos)
		}
		if err != nil {
			t.Fatalf("put %v: %v\nstderr: %q", args, err, stderr.String())
		}
		return stderr.String()
	}
	if got := put(writeLocal(t, "small.txt", strings.Repeat("s", 100<<10)), "bar/small.txt"); got != "" {
		t.Fatalf("a 100 KiB put drew %q", got)
	}
	one, _, _ := randomLocal(t, "one.bin", 2<<20, 5)
	if got := put(one, "bar/one.bin"); !strings.Contains(got, "\ruploading [") || strings.Contains(got, "hashing") ||
		!strings.Contains(got, "100% 2.0/2.0 MiB") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("a 2 MiB put drew %q, want an uploading bar only", got)
	}
	big, _, _ := randomLocal(t, "big.bin", 6<<20, 6)
	got := put(big, "bar/big.bin", "--threshold", "5MiB")
	hashing, uploading := strings.Index(got, "\rhashing   ["), strings.Index(got, "\ruploading [")
	if hashing < 0 || uploading < hashing || !strings.Contains(got, "hashing   [==============================] 100% 6.0/6.0 MiB") ||
		!strings.Contains(got, "uploading [==============================] 100% 6.0/6.0 MiB") {
		t.Fatalf("a session put drew %q, want hashing, then uploading, each to 100%%", got)
	}
}

// TestTransferFailed: what a failed put or upload says the server kept,
// for every state it can be in.
func TestTransferFailed(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	lost := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		t    *transfer
		err  error
		want []string // in the advice; none: err comes back as it was
	}{
		{"PathExists", &transfer{remote: "a.txt"}, &client.Problem{Status: 409, Code: "PATH_EXISTS", ExistingFileID: "file_x"},
			[]string{"file_x already holds a.txt", "--replace"}},
		{"OtherAnswer", &transfer{remote: "a.txt", whole: true, key: "k"}, &client.Problem{Status: 422, Code: "INVALID_PATH"}, nil},
		{"SessionKept", &transfer{session: &client.Upload{ID: "upl_1", ExpiresAt: expires}, viaSession: true}, lost,
			[]string{"upload session upl_1 is kept until", "run the same command again to resume it"}},
		{"RetryableAnswerSessionKept", &transfer{session: &client.Upload{ID: "upl_2", ExpiresAt: expires}},
			&client.Problem{Status: 503, Code: "STORAGE_UNAVAILABLE", Retryable: true}, []string{"upl_2"}},
		{"NoSessionYet", &transfer{viaSession: true, whole: true, key: "k"}, context.Canceled,
			[]string{"nothing was stored (no upload session had started)"}},
		{"SentWhole", &transfer{whole: true, key: "afs-1"}, context.Canceled,
			[]string{"may have stored it", "--key afs-1", "GET /v1/operations/afs-1"}},
		{"SentWholeWithoutKey", &transfer{whole: true, remote: "e.txt"}, lost, []string{"agentfs ls --path e.txt"}},
		{"NotSentWhole", &transfer{key: "afs-2"}, lost, []string{"nothing was stored (the file was not sent whole)"}},
	} {
		err := tc.t.failed(tc.err)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap %v", tc.name, err, tc.err)
		}
		var ns *nextStep
		if len(tc.want) == 0 {
			if errors.As(err, &ns) {
				t.Errorf("%s: advice %q for a definite answer", tc.name, ns.next)
			}
			continue
		}
		if !errors.As(err, &ns) {
			t.Errorf("%s: no advice in %v", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(ns.next, w) {
				t.Errorf("%s: advice %q, want %q", tc.name, ns.next, w)
			}
		}
	}
}
