package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// The MCP clients nobody in this project wrote, against two `agentfs
// serve` processes on one database and bucket (as behind a load
// balancer): the official TypeScript SDK's client, the Inspector CLI and
// the conformance suite. scripts/test.sh installs them (ensure_deps node
// npm) and exports them as AGENTFS_TEST_NODE and AGENTFS_TEST_NODE_TOOLS.

// nodeTools is Node 24 and the folder of the pinned npm tools.
func nodeTools(t *testing.T) (node, dir string) {
	t.Helper()
	return testkit.NodeTools(t)
}

// runNode runs a Node program with env, failing the test with its output
// when it fails; it returns what it printed.
func runNode(t *testing.T, node, dir string, env []string, args ...string) string {
	t.Helper()
	out, code := runNodeStatus(t, node, dir, env, args...)
	if code != 0 {
		t.Fatalf("node %s: exit status %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// runNodeStatus is runNode that returns the exit status too.
func runNodeStatus(t *testing.T, node, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "HOME="+t.TempDir(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0
}

func TestOfficialMCPClients(t *testing.T) {
	node, dir := nodeTools(t)
	bin := buildBinary(t)
	cfg := storagetest.Config(t)
	out, err := runBinary(t, bin, cfg, "token", "create", "--subject", "mcp-clients")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	a, b := startServe(t, bin, cfg), startServe(t, bin, cfg)
	a.waitReady(t)
	b.waitReady(t)

	t.Run("TypeScriptSDK", func(t *testing.T) {
		out := runNode(t, node, dir, []string{"AGENTFS_A=" + a.url, "AGENTFS_B=" + b.url, "AGENTFS_TOKEN=" + token},
			"tests/mcp-sdk.mjs")
		t.Logf("TypeScript SDK client:\n%s", out)
		if !strings.Contains(out, "notifications/resources/updated") {
			t.Fatalf("the script did not reach its subscription check:\n%s", out)
		}
	})

	// The session of docs/mcp.md's points and forks section: checkpoint, a
	// bad edit, diff, restore; fork, changes on both sides, a merge with a
	// conflict resolved. The script asserts each answer; this checks it ran
	// to its last call.
	t.Run("PointsSession", func(t *testing.T) {
		out := runNode(t, node, dir, []string{"AGENTFS_A=" + a.url, "AGENTFS_TOKEN=" + token}, "tests/mcp-points-session.mjs")
		t.Logf("points session:\n%s", out)
		if !strings.Contains(out, "conflict ") || !strings.Contains(out, "No changes between") ||
			!strings.Contains(out, "> read_text_file") {
			t.Fatalf("the session did not reach its end:\n%s", out)
		}
	})

	inspector := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		base := []string{"node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"}
		return runNodeStatus(t, node, dir, nil, append(append(base, "--cli", a.url+"/mcp", "--transport", "http",
			"--header", "Authorization: Bearer "+token), args...)...)
	}
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		out, code := inspector(t, args...)
		if code != 0 {
			t.Fatalf("inspector %s: exit status %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	t.Run("InspectorCLI", func(t *testing.T) {
		list := ok(t, "--method", "tools/list")
		if strings.Contains(strings.ToLower(list), "warn") || !strings.Contains(list, `"write_file"`) {
			t.Fatalf("tools/list:\n%s", list)
		}
		ok(t, "--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path=inspector/taken.txt", "--tool-arg", "content=one")
		failed, code := inspector(t, "--method", "tools/call", "--tool-name", "write_file",
			"--tool-arg", "path=inspector/taken.txt", "--tool-arg", "content=two", "--tool-arg", "if_exists=error")
		t.Logf("Inspector CLI, a failed write_file:\n%s", failed)
		if code == 0 || !strings.Contains(failed, "PATH_EXISTS: inspector/taken.txt already exists") ||
			strings.Contains(failed, "data must") || !strings.Contains(failed, `"isError": true`) {
			t.Fatalf("a failed write_file through the Inspector:\n%s", failed)
		}
		read := ok(t, "--method", "resources/read", "--uri", "agentfs:///inspector/taken.txt")
		if !strings.Contains(read, `"text": "one"`) {
			t.Fatalf("resources/read through the Inspector:\n%s", read)
		}
	})

	t.Run("Conformance", func(t *testing.T) {
		proxy := tokenProxy(t, a.url, token)
		for _, scenario := range []string{"server-initialize", "ping", "tools-list", "logging-set-level", "dns-rebinding-protection"} {
			out := runNode(t, node, dir, nil, "node_modules/@modelcontextprotocol/conformance/dist/index.js",
				"server", "--url", proxy+"/mcp", "--scenario", scenario, "-o", t.TempDir())
			t.Logf("conformance %s:\n%s", scenario, out)
			if !strings.Contains(out, ", 0 failed, 0 warnings") || strings.Contains(out, "FAILURE") {
				t.Errorf("conformance %s failed:\n%s", scenario, out)
			}
		}
	})
}

// tokenProxy forwards to target adding the token, passing Host and Origin
// through as the client sent them (the conformance suite sends no
// Authorization, and its DNS-rebinding scenario sends a foreign Host).
func tokenProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
