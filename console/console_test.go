package console_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/console"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
)

// TestConsoleServesItsPage: /console/ is the page, with the policy that
// keeps every request on the origin; its assets are served; an unknown
// name is a 404 problem; HEAD answers like GET; /console redirects.
func TestConsoleServesItsPage(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/console/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/console/", 200, "text/html; charset=utf-8"},
		{"GET", "/console/index.html", 200, "text/html; charset=utf-8"},
		{"GET", "/console/console.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/console/console.css", 200, "text/css; charset=utf-8"},
		{"GET", "/console/nope.js", 404, "application/problem+json"},
		{"HEAD", "/console/nope.js", 404, "application/problem+json"},
		{"GET", "/console", 301, ""},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status || c.ctype != "" && res.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, res.StatusCode, res.Header.Get("Content-Type"), c.status, c.ctype)
		}
		if c.status == 200 && res.Header.Get("Content-Security-Policy") != console.Policy {
			t.Errorf("%s %s: CSP %q", c.method, c.path, res.Header.Get("Content-Security-Policy"))
		}
		if c.status == 301 && res.Header.Get("Location") != "/console/" {
			t.Errorf("/console redirects to %q", res.Header.Get("Location"))
		}
	}
	if !strings.HasPrefix(console.Policy, "default-src 'self'") {
		t.Fatalf("the policy %q does not start with default-src 'self'", console.Policy)
	}
}

// TestConsoleInABrowser runs tools/node/tests/console.mjs: the console in
// Debian's Chromium, driven by playwright-core, against a server with a
// run that replaced a text file and a run that made one. It takes the
// screenshots of docs/console.md (into docs/console/ with
// AGENTFS_CONSOLE_SHOTS=docs/console).
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	node, tools := testkit.NodeTools(t, "chromium")
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "console", "read", "write", "share")
	c := apitest.NewClient(t, srv.URL, token)
	put := func(path, body, run string, status int) apitest.File {
		return c.Do("POST", "/v1/files?if_exists=replace&path="+path, body, "X-Run-ID", run, "X-Agent-ID", "planner").Expect(t, status).File(t)
	}
	f := put("notes/plan.md", "step one\nstep two\nstep three\n", "run-setup", 201)
	put("notes/plan.md", "step one\nstep two, done\nstep three\nstep four\n", "run-demo", 200)
	put("notes/readme.txt", "hello\n", "run-demo", 201)
	put("undo/made.txt", "made by a run to undo\n", "run-undo", 201)

	// The screenshots go to a temporary folder, so a test run leaves the
	// tree as it found it; AGENTFS_CONSOLE_SHOTS=docs/console (from the
	// repository's root) refreshes those of docs/console.md.
	shots := t.TempDir()
	if dir := os.Getenv("AGENTFS_CONSOLE_SHOTS"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", dir) // the test runs in console/
		}
		shots = dir
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tests/console.mjs")
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+token, "FILE_ID="+f.ID,
		"RUN_ID=run-demo", "UNDO_RUN=run-undo", "SHOTS="+shots, "HOME="+t.TempDir(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("console.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("console.mjs: %v", err)
	}
	for _, want := range []string{"signed in", "appeared on the run's timeline", "a diff between two versions", "a file reverted",
		"planned items before it runs", "the run reverted", "filtered events page", "no request left the origin"} {
		if !strings.Contains(string(out), "ok: ") || !strings.Contains(string(out), want) {
			t.Errorf("console.mjs did not report %q", want)
		}
	}
	for _, name := range []string{"runs.png", "run-timeline.png", "version-diff.png", "run-revert-plan.png", "phone-file.png"} {
		if info, err := os.Stat(filepath.Join(shots, name)); err != nil || info.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
