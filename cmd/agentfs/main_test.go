package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/telemetry/logtest"
)

func TestRunUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"NoCommand", nil, nil, "no command"},
		{"UnknownCommand", []string{"frobnicate"}, nil, "unknown command"},
		{"TokenWithoutVerb", []string{"token"}, nil, "create, list or revoke"},
		{"TokenUnknownVerb", []string{"token", "mint"}, nil, `unknown token command "mint"`},
		{"AdminWithoutVerb", []string{"admin"}, nil, "block, unblock or token"},
		{"HelpOfNothing", []string{"help", "frobnicate"}, nil, "no such command"},
		{"HelpOfUnknownSubcommand", []string{"help", "token", "mint"}, nil, "no such command"},
		{"ServeWithArguments", []string{"serve", "now"}, nil, "no arguments"},
		{"TokenRevokeTwoArguments", []string{"token", "revoke", "a", "b"}, nil, "the token or its id"},
		{"TokenCreateWithoutSubject", []string{"token", "create"}, nil, "--subject"},
		{"TokenCreateBadScope", []string{"token", "create", "--subject", "a", "--scopes", "admin"}, nil, "--scopes"},
		{"ServeWithoutDatabase", []string{"serve"}, nil, "AGENTFS_DATABASE_URL is required"},
		{"BadDuration", []string{"migrate"}, map[string]string{"AGENTFS_DELETED_RETENTION": "soon"}, "AGENTFS_DELETED_RETENTION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q on failure", stdout.String())
			}
			if strings.HasPrefix(err.Error(), "agentfs") {
				t.Fatalf("error %q names the program itself; main adds the prefix", err)
			}
		})
	}
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"help"}, func(string) string { return "" }, &stdout, &stdout); err != nil ||
		!strings.Contains(stdout.String(), "token ") || !strings.Contains(stdout.String(), "healthcheck") {
		t.Fatalf("help: %v %q", err, stdout.String())
	}
}

// process is an agentfs binary started by a test.
type process struct {
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
}

// syncBuffer is a buffer safe for a process's output and the test.
type syncBuffer = logtest.Buffer

func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "agentfs")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// testRecordKey is the AGENTFS_RECORD_KEY of the servers the tests start.
const testRecordKey = "dGVzdC1yZWNvcmQta2V5LW9mLTMyLWJ5dGVzLWxvbmc="

func environ(cfg storage.Config, extra ...string) []string {
	return append(append(os.Environ(),
		"AGENTFS_DATABASE_URL="+cfg.DatabaseURL,
		"AGENTFS_S3_ENDPOINT="+cfg.S3Endpoint,
		"AGENTFS_S3_ACCESS_KEY="+cfg.S3AccessKey,
		"AGENTFS_S3_SECRET_KEY="+cfg.S3SecretKey,
		"AGENTFS_S3_BUCKET="+cfg.S3Bucket,
		fmt.Sprintf("AGENTFS_S3_USE_SSL=%v", cfg.S3UseSSL),
		"AGENTFS_S3_REGION="+cfg.S3Region,
		"AGENTFS_RECORD_KEY="+testRecordKey,
	), extra...)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe starts `agentfs serve` on a free port and returns once it
// listens there (or exited, or a minute passed: waitReady says more). A
// port found free can be taken by another program before the server binds
// it, and then waitReady would hear that program: a server that lost its
// port that way starts again on another one.
func startServe(t *testing.T, bin string, cfg storage.Config, env ...string) *process {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := launchServe(t, bin, cfg, env...)
		if !p.lostItsPort() || attempt == 5 {
			return p
		}
		t.Logf("%s was taken before the server bound it; starting it on another port", p.url)
	}
}

// lostItsPort waits until the server logs that it listens (false) or that
// its address was in use (true, and the process is reaped).
func (p *process) lostItsPort() bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		logs := p.logs.String()
		switch {
		case strings.Contains(logs, "agentfs listening"):
			return false
		case strings.Contains(logs, "address already in use"):
			_ = p.cmd.Wait()
			return true
		}
	}
	return false
}

// serveAddr picks the address a server the tests start listens on.
var serveAddr = freeAddr

func launchServe(t *testing.T, bin string, cfg storage.Config, env ...string) *process {
	t.Helper()
	addr := serveAddr(t)
	p := &process{cmd: exec.Command(bin, "serve"), url: "http://" + addr, logs: &syncBuffer{}}
	p.cmd.Env = environ(cfg, append([]string{"AGENTFS_LISTEN_ADDR=" + addr}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("server %s logs:\n%s", p.url, p.logs)
		}
	})
	return p
}

func (p *process) waitReady(t *testing.T) {
	t.Helper()
	ready := false
	defer func() {
		if !ready {
			t.Logf("%s logs:\n%s", p.url, p.logs)
		}
	}()
	storagetest.Eventually(t, 60*time.Second, p.url+" to become ready", func() bool {
		res, err := http.Get(p.url + "/readyz")
		if err == nil {
			res.Body.Close()
		}
		ready = err == nil && res.StatusCode == http.StatusOK
		return ready
	})
}

func (p *process) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM; logs:\n%s", err, p.logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

func runBinary(t *testing.T, bin string, cfg storage.Config, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = environ(cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return string(out), nil
}

// createToken makes a token with the binary's own "token create" and the
// flags given, as an operator would, and returns it.
func createToken(t *testing.T, bin string, cfg storage.Config, flags ...string) string {
	t.Helper()
	out, err := runBinary(t, bin, cfg, append([]string{"token", "create"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestServeProcess runs the real binary the way the README does: two
// instances migrating one fresh database at once, a token made by the CLI,
// the curl tour over HTTP, and a clean stop on SIGTERM.
func TestServeProcess(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	cfg := storagetest.Config(t)
	a, b := startServe(t, bin, cfg), startServe(t, bin, cfg)
	a.waitReady(t)
	b.waitReady(t)

	out, err := runBinary(t, bin, cfg, "token", "create", "--subject", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSuffix(out, "\n")
	if strings.ContainsAny(token, " \n") || !strings.HasPrefix(token, "afs_") {
		t.Fatalf("token create printed %q, want the token alone on one line", out)
	}
	c := apitest.NewClient(t, a.url, token)
	c.Header.Set("X-Run-ID", "run-42")
	f := c.Do("POST", "/v1/files?path=notes/hello.txt", "hello", "Content-Type", "text/plain").Expect(t, 201).File(t)
	if f.URL != a.url+"/v1/files/"+f.ID+"/content" {
		t.Fatalf("url %q", f.URL)
	}
	// The other instance sees the same state.
	other := apitest.NewClient(t, b.url, token)
	other.Do("POST", "/v1/files?path=notes/hello.txt&if_exists=replace", "hello again").Expect(t, 200)
	var l apitest.FileList
	c.Do("GET", "/v1/files?run_id=run-42", nil).Expect(t, 200).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].Version != 2 {
		t.Fatalf("list by run: %+v", l.Data)
	}
	c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
	c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).Expect(t, 200)
	got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
	if string(got.Body) != "hello again" {
		t.Fatalf("content %q", got.Body)
	}
	c.Do("POST", "/v1/files?path=notes/hello.txt", "dup").ExpectProblem(t, 409, "PATH_EXISTS")

	if _, err := runBinary(t, bin, cfg, "token", "revoke", token); err != nil {
		t.Fatal(err)
	}
	// Both servers cache the token and forget it when the revocation's
	// notification reaches them, milliseconds after it commits.
	for _, c := range []*apitest.Client{c, other} {
		storagetest.Eventually(t, time.Second, "the revoked token to be refused", func() bool {
			return c.Do("GET", "/v1/files", nil).Status == http.StatusUnauthorized
		})
		c.Do("GET", "/v1/files", nil).ExpectProblem(t, 401, "UNAUTHENTICATED")
	}
	if _, err := runBinary(t, bin, cfg, "token", "revoke", "tok_nope"); err == nil || !strings.Contains(err.Error(), "no such token") {
		t.Fatalf("revoking an unknown token: %v", err)
	}
	a.stop(t)
	b.stop(t)
}

// TestMissingServersFailClearly proves that without Postgres the binary says
// what is wrong instead of hanging or crashing.
func TestMissingServersFailClearly(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	env := map[string]string{
		"AGENTFS_DATABASE_URL": "postgres://nobody@" + freeAddr(t) + "/none?sslmode=disable&connect_timeout=2",
		"AGENTFS_S3_ENDPOINT":  freeAddr(t),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"migrate"}, func(k string) string { return env[k] }, &stderr, &stderr)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("migrate without servers: %v", err)
	}
}

// TestAdminBlock blocks a file through the CLI: its content and a replace
// answer 451 with the reason; unblocking restores both.
func TestAdminBlock(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	f := c.Do("POST", "/v1/files?path=b.txt", "body").Expect(t, 201).File(t)
	env := map[string]string{
		"AGENTFS_DATABASE_URL": srv.Config.DatabaseURL, "AGENTFS_S3_ENDPOINT": srv.Config.S3Endpoint,
		"AGENTFS_S3_ACCESS_KEY": srv.Config.S3AccessKey, "AGENTFS_S3_SECRET_KEY": srv.Config.S3SecretKey,
		"AGENTFS_S3_BUCKET": srv.Config.S3Bucket,
	}
	admin := func(args ...string) error {
		var out bytes.Buffer
		return run(context.Background(), append([]string{"admin"}, args...), func(k string) string { return env[k] }, &out, &out)
	}
	if err := admin("block", f.ID); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("block without a reason: %v", err)
	}
	if err := admin("block", f.ID, "--reason", "under legal review"); err != nil {
		t.Fatal(err)
	}
	p := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).ExpectProblem(t, 451, "CONTENT_BLOCKED")
	if !strings.Contains(p.Detail, "under legal review") {
		t.Fatalf("451 detail %q", p.Detail)
	}
	c.Do("POST", "/v1/files?path=b.txt&if_exists=replace", "new").ExpectProblem(t, 451, "CONTENT_BLOCKED")
	if meta := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); !meta.Blocked {
		t.Fatal("metadata does not show the block")
	}
	if err := admin("unblock", f.ID); err != nil {
		t.Fatal(err)
	}
	c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
	c.Do("POST", "/v1/files?path=b.txt&if_exists=replace", "new").Expect(t, 200)
	if err := admin("unblock", "file_nope"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("unknown file: %v", err)
	}
}

// TestTokenList lists tokens with their ids, subjects, scopes and times,
// revoked ones included, and never a token or its hash.
func TestTokenList(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	env := cliEnv{
		"AGENTFS_DATABASE_URL": cfg.DatabaseURL, "AGENTFS_S3_ENDPOINT": cfg.S3Endpoint,
		"AGENTFS_S3_ACCESS_KEY": cfg.S3AccessKey, "AGENTFS_S3_SECRET_KEY": cfg.S3SecretKey,
		"AGENTFS_S3_BUCKET": cfg.S3Bucket,
	}
	mustRun := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := env.run(args...)
		if err != nil {
			t.Fatalf("agentfs %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return stdout
	}
	list := func(args ...string) []storage.TokenInfo {
		t.Helper()
		out := mustRun(append([]string{"token", "list"}, args...)...)
		var tokens []storage.TokenInfo
		if err := json.Unmarshal([]byte(out), &tokens); err != nil {
			t.Fatalf("token list printed %q: %v", out, err)
		}
		for _, secret := range []string{"afs_", "hash"} {
			if strings.Contains(out, secret) {
				t.Fatalf("token list printed %q, which shows %q", out, secret)
			}
		}
		return tokens
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("tokens of a fresh database: %+v", got)
	}
	alice1 := strings.TrimSpace(mustRun("token", "create", "--subject", "alice"))
	mustRun("token", "create", "--subject", "alice", "--scopes", "read")
	mustRun("token", "create", "--subject", "bob")
	mustRun("token", "revoke", alice1)

	all := list()
	if len(all) != 3 || all[0].Subject != "alice" || all[2].Subject != "bob" {
		t.Fatalf("tokens %+v, want alice's two then bob's, oldest first", all)
	}
	if all[0].RevokedAt == nil || all[1].RevokedAt != nil || all[0].CreatedAt.IsZero() ||
		strings.Join(all[0].Scopes, ",") != "read,share,write" || // a root token with read and write may share strings.Join(all[1].Scopes, ",") != "read" ||
		!strings.HasPrefix(all[0].ID, "tok_") {
		t.Fatalf("tokens %+v", all)
	}
	if bob := list("--subject", "bob"); len(bob) != 1 || bob[0].ID != all[2].ID {
		t.Fatalf("bob's tokens: %+v", bob)
	}
	// The id from the list is what revoke takes.
	mustRun("token", "revoke", all[1].ID)
	if again := list("--subject", "alice"); len(again) != 2 || again[1].RevokedAt == nil {
		t.Fatalf("after revoking %s by id: %+v", all[1].ID, again)
	}
	var table bytes.Buffer
	if err := tokenTable(&table, all); err != nil || !strings.HasPrefix(table.String(), "ID ") ||
		!strings.Contains(table.String(), "read,share,write") || !strings.Contains(table.String(), all[2].ID) {
		t.Fatalf("table %q, %v", table.String(), err)
	}
}

// TestShutdownAnswersLongPolls: a follower's poll held by serve (wait=30)
// is answered, empty and with its cursor, as soon as serve is told to stop,
// and serve then exits cleanly: a held poll does not hold the shutdown.
func TestShutdownAnswersLongPolls(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	cfg := storagetest.Config(t)
	// serve's connections carry a name of their own, to find its listener.
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", "drain-"+cfg.S3Bucket)
	u.RawQuery = q.Encode()
	named := cfg
	named.DatabaseURL = u.String()
	p := startServe(t, bin, named)
	p.waitReady(t)
	conn, err := pgx.Connect(context.Background(), cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	c := apitest.NewClient(t, p.url, createToken(t, bin, cfg, "--subject", "follower"))
	type answer struct {
		res  *apitest.Response
		took time.Duration
	}
	answered := make(chan answer, 1)
	go func() {
		began := time.Now()
		res := c.Do("GET", "/v1/events?after=now&wait=30", nil)
		answered <- answer{res, time.Since(began)}
	}()
	// The poll is held once the server's listener for events is in place.
	storagetest.Eventually(t, time.Minute, "the poll to be held", func() bool {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE query = 'LISTEN "agentfs_events"' AND application_name = $1`, "drain-"+cfg.S3Bucket).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	p.stop(t)
	a := <-answered
	var l struct {
		Data       []any  `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	a.res.Expect(t, 200).JSON(t, &l)
	if len(l.Data) != 0 || l.NextCursor == "" {
		t.Fatalf("the drained poll answered %s", a.res.Body)
	}
	if a.took >= 30*time.Second {
		t.Fatalf("the poll was held its whole wait (%v): the shutdown did not answer it", a.took)
	}
}

// A port found free and taken by another program before the server binds
// it: the server starts again on another port, and the test talks to the
// server, not to the program that took the port (which answers /readyz
// too).
func TestStartServeLeavesATakenPort(t *testing.T) {
	bin := buildBinary(t)
	cfg := storagetest.Config(t)
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer other.Close()
	picks := 0
	serveAddr = func(t *testing.T) string {
		if picks++; picks == 1 {
			return strings.TrimPrefix(other.URL, "http://")
		}
		return freeAddr(t)
	}
	defer func() { serveAddr = freeAddr }()
	p := startServe(t, bin, cfg)
	if picks != 2 || p.url == other.URL {
		t.Fatalf("server at %s after %d picks, want it on a second address, not the taken %s", p.url, picks, other.URL)
	}
	p.waitReady(t)
	res, err := http.Get(p.url + "/v1/files")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("GET /v1/files without a token: %d %s, want agentfs's 401 problem", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
