package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// cliEnv is the environment of the client verbs against a test server.
type cliEnv map[string]string

func newCLIEnv(t *testing.T, srv *apitest.Server, runID string) cliEnv {
	t.Helper()
	return cliEnv{
		"AGENTFS_URL":      srv.URL,
		"AGENTFS_TOKEN":    srv.Token(t, "cli"),
		"AGENTFS_AGENT_ID": "cli-agent",
		"AGENTFS_RUN_ID":   runID,
	}
}

// servedCLI starts a test server with default options and returns it with
// the environment the CLI reads to talk to it as run runID.
func servedCLI(t *testing.T, runID string) (*apitest.Server, cliEnv) {
	t.Helper()
	srv := apitest.NewServer(t, apitest.Options{})
	return srv, newCLIEnv(t, srv, runID)
}

func (e cliEnv) with(k, v string) cliEnv {
	out := cliEnv{k: v}
	for key, val := range e {
		if key != k {
			out[key] = val
		}
	}
	return out
}

// run runs the agentfs command line with this environment.
func (e cliEnv) run(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return e[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// runJSON runs a verb and decodes the JSON it prints, failing the test when
// the verb fails or prints something else.
func runJSON[T any](t *testing.T, e cliEnv, args ...string) T {
	t.Helper()
	stdout, stderr, err := e.run(args...)
	if err != nil {
		t.Fatalf("agentfs %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
	}
	var out T
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("agentfs %s printed %q: %v", strings.Join(args, " "), stdout, err)
	}
	return out
}

// file runs a verb that prints one file and decodes it.
func (e cliEnv) file(t *testing.T, args ...string) client.File {
	t.Helper()
	f := runJSON[client.File](t, e, args...)
	if f.ID == "" {
		t.Fatalf("agentfs %s printed a file without an id", strings.Join(args, " "))
	}
	return f
}

// list runs ls and decodes the array it prints.
func (e cliEnv) list(t *testing.T, args ...string) []client.File {
	t.Helper()
	return runJSON[[]client.File](t, e, append([]string{"ls"}, args...)...)
}

// expectFailure checks that a verb failed with a problem of this code,
// printed on stderr, and printed nothing on stdout.
func (e cliEnv) expectFailure(t *testing.T, code string, args ...string) {
	t.Helper()
	stdout, stderr, err := e.run(args...)
	var p *client.Problem
	if err == nil || !errors.As(err, &p) || p.Code != code || !strings.Contains(err.Error(), code) {
		t.Fatalf("agentfs %s: error %v, want problem %s", strings.Join(args, " "), err, code)
	}
	var printed client.Problem
	if json.Unmarshal([]byte(stderr), &printed) != nil || printed.Code != code || printed.RequestID == "" {
		t.Fatalf("stderr %q, want the %s problem document", stderr, code)
	}
	if stdout != "" {
		t.Fatalf("stdout %q on failure", stdout)
	}
	if exitCode(err) == 0 {
		t.Fatal("exit code 0 on failure")
	}
}

func writeLocal(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIFiles(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-run")
	local := writeLocal(t, "data.json", `{"n":1}`)

	f := env.file(t, "put", local, "reports/data.json")
	if f.Path != "reports/data.json" || f.SizeBytes != 7 || f.ContentType != "application/json" || f.Version != 1 ||
		f.RunID == nil || *f.RunID != "cli-run" || f.AgentID == nil || *f.AgentID != "cli-agent" {
		t.Fatalf("put printed %+v", f)
	}
	t.Run("PutExistingPathSuggestsReplace", func(t *testing.T) {
		env.expectFailure(t, "PATH_EXISTS", "put", local, "reports/data.json")
		_, _, err := env.run("put", local, "reports/data.json")
		if msg := err.Error(); !strings.Contains(msg, "--replace") || !strings.Contains(msg, f.ID) ||
			!strings.Contains(msg, "reports/data.json") || strings.HasPrefix(msg, "agentfs") {
			t.Fatalf("error %q, want the existing file id and --replace", msg)
		}
	})
	t.Run("PutReplace", func(t *testing.T) {
		changed := writeLocal(t, "data.json", `{"n":2}`)
		r := env.file(t, "put", changed, "reports/data.json", "--replace", "--content-type", "application/vnd.test+json")
		if r.ID != f.ID || r.Version != 2 || r.ContentType != "application/vnd.test+json" {
			t.Fatalf("replace printed %+v", r)
		}
		f = r
	})
	t.Run("GetToFile", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out.json")
		g := env.file(t, "get", f.ID, dest)
		got, err := os.ReadFile(dest)
		if err != nil || string(got) != `{"n":2}` || g.ID != f.ID {
			t.Fatalf("get wrote %q (%v), printed %+v", got, err, g)
		}
		leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".*"))
		if len(leftovers) != 0 {
			t.Fatalf("temporary files left: %v", leftovers)
		}
	})
	t.Run("GetToStdout", func(t *testing.T) {
		stdout, stderr, err := env.run("get", f.ID)
		if err != nil || stdout != `{"n":2}` {
			t.Fatalf("get to stdout: %q, %v\n%s", stdout, err, stderr)
		}
	})
	t.Run("GetByPathIntoDirectory", func(t *testing.T) {
		dir := t.TempDir()
		env.file(t, "get", "--path", "reports/data.json", dir)
		if got, err := os.ReadFile(filepath.Join(dir, "data.json")); err != nil || string(got) != `{"n":2}` {
			t.Fatalf("get --path wrote %q, %v", got, err)
		}
		_, _, err := env.run("get", "--path", "reports/none.json")
		if err == nil || !strings.Contains(err.Error(), "no live file") {
			t.Fatalf("get of a missing path: %v", err)
		}
	})
	t.Run("GetUnknownID", func(t *testing.T) {
		env.expectFailure(t, "NOT_FOUND", "get", noSuchID, filepath.Join(t.TempDir(), "x"))
	})
	t.Run("GetPathOfNoFile", func(t *testing.T) {
		// Spelled almost like an id, file_nope is a path: it names no file.
		stdout, _, err := env.run("get", "file_nope")
		if err == nil || !strings.Contains(err.Error(), `no live file holds path "file_nope"`) ||
			!strings.Contains(err.Error(), "a file id is file_ and 26 characters") || stdout != "" || exitCode(err) != 1 {
			t.Fatalf("get of a path no file holds: %v, stdout %q", err, stdout)
		}
	})
}

// noSuchID is spelled as a file id and names no file.
const noSuchID = "file_00000000000000000000000000"

func TestCLIListDeleteRestore(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "run-a")
	other := env.with("AGENTFS_RUN_ID", "run-b")
	local := writeLocal(t, "x.txt", "x")
	a1 := env.file(t, "put", local, "a/1.txt")
	a2 := env.file(t, "put", local, "a/2.txt")
	b1 := other.file(t, "put", local, "b/1.txt")

	ids := func(files []client.File) string {
		var out []string
		for _, f := range files {
			out = append(out, f.ID)
		}
		return strings.Join(out, ",")
	}
	if got, want := ids(env.list(t, "--run", "run-a")), a2.ID+","+a1.ID; got != want {
		t.Fatalf("ls --run run-a: %s, want %s", got, want)
	}
	if got := ids(env.list(t, "--prefix", "b/")); got != b1.ID {
		t.Fatalf("ls --prefix b/: %s", got)
	}
	if got := ids(env.list(t, "--agent", "cli-agent", "--limit", "1")); got != b1.ID {
		t.Fatalf("ls --limit 1: %s", got)
	}
	if got := ids(env.list(t, "--run", "nobody")); got != "" {
		t.Fatalf("ls of an unknown run: %s", got)
	}

	d := env.file(t, "rm", a1.ID)
	if d.ID != a1.ID || d.DeletedAt == nil {
		t.Fatalf("rm printed %+v", d)
	}
	if got := ids(env.list(t, "--run", "run-a")); got != a2.ID {
		t.Fatalf("ls after rm: %s", got)
	}
	if got := ids(env.list(t, "--run", "run-a", "--deleted")); got != a2.ID+","+a1.ID {
		t.Fatalf("ls --deleted: %s", got)
	}
	r := env.file(t, "restore", a1.ID)
	if r.ID != a1.ID || r.DeletedAt != nil {
		t.Fatalf("restore printed %+v", r)
	}
	env.expectFailure(t, "NOT_FOUND", "rm", noSuchID)
	env.expectFailure(t, "PRECONDITION_FAILED", "rm", a2.ID, "--if-match", `"0000000000000000000000000000000000000000000000000000000000000000"`)
	env.with("AGENTFS_TOKEN", "not-a-token").expectFailure(t, "UNAUTHENTICATED", "ls")

	// Human output: a table with the paths.
	c, err := newCLIClient(func(k string) string { return env[k] }, false)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	err = lsFlags(fs)(context.Background(), &cliRun{name: "ls", client: c, stdout: &table, stderr: io.Discard, human: true}, nil)
	if err != nil || !strings.HasPrefix(table.String(), "ID ") || !strings.Contains(table.String(), "a/2.txt") {
		t.Fatalf("table %q, %v", table.String(), err)
	}
}

func TestCLIProtocolNeedsNoToken(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	stdout, stderr, err := cliEnv{"AGENTFS_URL": srv.URL}.run("protocol")
	if err != nil {
		t.Fatalf("protocol: %v\n%s", err, stderr)
	}
	var p client.Protocol
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || p.APIVersion != "v1" || p.Retry.MaxAttempts != 8 {
		t.Fatalf("protocol printed %q: %v", stdout, err)
	}
}

// TestCLIPutRetries: put sends a local file again after a 503, whole,
// with the same Idempotency-Key.
func TestCLIPutRetries(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	target, _ := url.Parse(srv.URL)
	forward := httputil.NewSingleHostReverseProxy(target)
	var (
		mu           sync.Mutex
		keys, bodies []string
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			keys, bodies = append(keys, r.Header.Get("Idempotency-Key")), append(bodies, string(body))
			n := len(keys)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `{"type":"/problems/STORAGE_UNAVAILABLE","title":"Storage unavailable","status":503,"code":"STORAGE_UNAVAILABLE","retryable":true,"request_id":"req_test"}`)
				return
			}
		}
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	env := newCLIEnv(t, srv, "cli-run").with("AGENTFS_URL", proxy.URL)
	stdout, stderr, err := env.run("put", writeLocal(t, "r.txt", "retried bytes"), "r.txt")
	var f client.File
	if err != nil || json.Unmarshal([]byte(stdout), &f) != nil {
		t.Fatalf("put: %v, %q\n%s", err, stdout, stderr)
	}
	// The wait is announced: Retry-After: 1 is its floor, the first
	// delay (1s) its ceiling.
	if stderr != "agentfs: 503 STORAGE_UNAVAILABLE; retrying in 1s (attempt 2 of 8)\n" {
		t.Fatalf("stderr %q, want the wait announced", stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || bodies[0] != "retried bytes" || bodies[1] != "retried bytes" {
		t.Fatalf("uploads with keys %q and bodies %q, want two alike", keys, bodies)
	}
	if f.SizeBytes != int64(len("retried bytes")) {
		t.Fatalf("put printed %+v", f)
	}
}

func TestCLIUsage(t *testing.T) {
	t.Parallel()
	env := offlineEnv()
	for _, tc := range []struct {
		name string
		env  cliEnv
		args []string
		want string
	}{
		{"PutOneArgument", env, []string{"put", "a.txt"}, "LOCAL and REMOTE_PATH"},
		{"GetNothing", env, []string{"get"}, "get needs FILE"},
		{"GetIDAndPath", env, []string{"get", "file_x", "--path", "p", "local"}, "get needs FILE"},
		{"LsTwoPrefixes", env, []string{"ls", "x/", "y/"}, "one PREFIX at most"},
		{"RmNoID", env, []string{"rm"}, "one FILE"},
		{"UnknownFlag", env, []string{"ls", "--colour"}, "colour"},
		{"NoToken", cliEnv{}, []string{"ls"}, "AGENTFS_TOKEN"},
		{"BadRunID", env.with("AGENTFS_RUN_ID", "has space"), []string{"ls"}, "run id"},
		{"BadMaxAttempts", env.with("AGENTFS_MAX_ATTEMPTS", "0"), []string{"ls"}, "AGENTFS_MAX_ATTEMPTS"},
		{"BadURL", env.with("AGENTFS_URL", "ftp://example.com"), []string{"ls"}, "base URL"},
		{"MissingLocal", env, []string{"put", "/does/not/exist", "p"}, "no such file"},
		{"MountWriteBackNoCacheDir", env, []string{"mount", "/mnt/x", "--write-back"}, "--write-back needs --cache-dir"},
		{"MountNoWorkers", env, []string{"mount", "/mnt/x", "--write-back", "--cache-dir", "/tmp/x", "--write-back-workers", "0"}, "--write-back-workers"},
		{"MountNoMetadataTTL", env, []string{"mount", "/mnt/x", "--metadata-ttl", "0s"}, "--metadata-ttl must be a positive duration"},
		{"MountBadMetadataTTL", env, []string{"mount", "/mnt/x", "--metadata-ttl", "soon"}, "invalid value \"soon\" for flag -metadata-ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := tc.env.run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || stdout != "" {
				t.Fatalf("error %v, want it to mention %q (stdout %q)", err, tc.want, stdout)
			}
			// main prefixes every error with "agentfs: " once; no layer
			// below it names the program again.
			if strings.HasPrefix(err.Error(), "agentfs") {
				t.Fatalf("error %q names the program itself", err)
			}
		})
	}
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"help"}, func(string) string { return "" }, &stdout, io.Discard); err != nil ||
		!strings.Contains(stdout.String(), "put ") || !strings.Contains(stdout.String(), "upload a file") {
		t.Fatalf("help: %v %q", err, stdout.String())
	}
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	replace := fs.Bool("replace", false, "")
	pos, err := parseInterleaved(fs, []string{"a", "--replace", "b", "--", "--c", "-"})
	if err != nil || !*replace || strings.Join(pos, " ") != "a b --c -" {
		t.Fatalf("%q %v %v", pos, *replace, err)
	}
}

// TestCLIGetRejectsCorruptContent: bytes that do not match the server's
// Repr-Digest fail the download, and nothing appears at LOCAL.
func TestCLIGetRejectsCorruptContent(t *testing.T) {
	t.Parallel()
	srv, env := servedCLI(t, "cli-run")
	f := env.file(t, "put", writeLocal(t, "c.txt", "original"), "c.txt")

	target, _ := url.Parse(srv.URL)
	corrupt := httputil.NewSingleHostReverseProxy(target)
	corrupt.ModifyResponse = func(res *http.Response) error {
		if strings.HasSuffix(res.Request.URL.Path, "/content") {
			res.Body = io.NopCloser(strings.NewReader("0riginal"))
		}
		return nil
	}
	proxy := httptest.NewServer(corrupt)
	defer proxy.Close()
	dest := filepath.Join(t.TempDir(), "c.txt")
	_, _, err := env.with("AGENTFS_URL", proxy.URL).run("get", f.ID, dest)
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("corrupt download: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dest)); len(entries) != 0 {
		t.Fatalf("a failed download left %v", entries)
	}
}
