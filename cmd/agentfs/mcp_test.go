package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/mcpserver/mcptest"
)

// TestMCPStdio runs `agentfs mcp` as an MCP client runs it: the real binary
// as a subprocess, spoken to over stdin/stdout by the SDK's own client,
// forwarding to the real API (apitest) on the test Postgres and S3. The
// binary is built once for all the subtests.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "desk")

	t.Run("HelpShowsTheDesktopConfig", func(t *testing.T) {
		cmd := exec.Command(bin, "mcp", "--help")
		var stderr bytes.Buffer // holds the help: it is printed on stdout, like every command's
		cmd.Stdout = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentfs mcp --help: %v (help exits 0)", err)
		}
		for _, want := range []string{`"mcpServers"`, `"command": "agentfs"`, `"args": ["mcp"]`, "AGENTFS_URL", "AGENTFS_TOKEN",
			"AGENTFS_AGENT_ID", "AGENTFS_RUN_ID", "AGENTFS_MCP_MAX_READ_BYTES", "AGENTFS_MCP_MAX_MEDIA_BYTES", "AGENTFS_MCP_MAX_WRITE_BYTES"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("help lacks %s:\n%s", want, stderr.String())
			}
		}
		for _, tool := range mcpserver.ToolNames() {
			if !strings.Contains(stderr.String(), tool) {
				t.Errorf("help does not list the tool %s", tool)
			}
		}
		var cfg map[string]any
		js := stderr.String()[strings.Index(stderr.String(), "  {\n"):strings.Index(stderr.String(), "\nLogs go")]
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			t.Fatalf("the config in the help is not JSON: %v\n%s", err, js)
		}
	})

	t.Run("RefusesToStartWithoutAToken", func(t *testing.T) {
		cmd := exec.Command(bin, "mcp")
		cmd.Env = append(os.Environ(), "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "AGENTFS_TOKEN is not set") {
			t.Fatalf("exit %v: %s", err, out)
		}
		cmd = exec.Command(bin, "mcp")
		cmd.Env = append(os.Environ(), "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN=x", "AGENTFS_MCP_MAX_READ_BYTES=lots")
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "AGENTFS_MCP_MAX_READ_BYTES must be a positive number of bytes") {
			t.Fatalf("exit %v: %s", err, out)
		}
	})

	t.Run("Session", func(t *testing.T) {
		s := startMCP(t, bin, "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+token, "AGENTFS_AGENT_ID=desk-agent", "AGENTFS_RUN_ID=run-desk-1")
		tools, err := s.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tools.Tools) != len(mcpserver.ToolNames()) {
			t.Fatalf("%d tools", len(tools.Tools))
		}
		var f mcpserver.File
		s.ok(t, "write_file", map[string]any{"path": "notes/plan.md", "content": "# Plan\n\n- step one\n- step two\n"}, &f)
		if f.AgentID == nil || *f.AgentID != "desk-agent" || f.RunID == nil || *f.RunID != "run-desk-1" {
			t.Fatalf("attribution %+v", f)
		}
		var e mcpserver.EditResult
		s.ok(t, "edit_file", map[string]any{"path": "notes/plan.md", "edits": []any{map[string]any{"oldText": "- step two\n", "newText": "- step two\n- step three\n"}}}, &e)
		if !strings.Contains(e.Diff, "+- step three\n") || e.File == nil || e.File.Version != 2 {
			t.Fatalf("edit %+v", e)
		}
		if got := text(s.ok(t, "read_text_file", map[string]any{"path": "notes/plan.md"}, nil)); got != "# Plan\n\n- step one\n- step two\n- step three\n" {
			t.Fatalf("read %q", got)
		}
		var run mcpserver.RunFiles
		s.ok(t, "list_run_files", map[string]any{}, &run)
		if run.RunID != "run-desk-1" || len(run.Files) != 1 || run.Files[0].ID != f.ID {
			t.Fatalf("run files %+v", run)
		}
		var summary mcpserver.Run
		s.ok(t, "run_summary", map[string]any{}, &summary)
		if summary.RunID != "run-desk-1" || summary.Counts.Created != 1 || summary.Counts.Replaced != 1 ||
			len(summary.AgentIDs) != 1 || summary.AgentIDs[0] != "desk-agent" {
			t.Fatalf("run summary %+v", summary)
		}
		res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "notes/plan.md", "content": "x"}})
		if err != nil || !res.IsError || !strings.HasPrefix(text(res), "PATH_EXISTS: notes/plan.md already exists") {
			t.Fatalf("second create: %v %v", err, res)
		}
		// Arguments outside the input schema: a tool error naming the
		// argument, so a model can correct itself.
		res, err = s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": 1}})
		if err != nil || !res.IsError || !strings.HasPrefix(text(res), "VALIDATION_FAILED") || !strings.Contains(text(res), "path") {
			t.Fatalf("malformed call: %v %v", err, res)
		}
		if err := s.cs.Close(); err != nil {
			t.Fatalf("agentfs mcp did not exit cleanly when its stdin closed: %v\n%s", err, s.stderr)
		}
	})

	t.Run("KeyedWriteAfterADroppedConnectionMakesOneFile", func(t *testing.T) {
		env := []string{"AGENTFS_URL=" + srv.URL, "AGENTFS_TOKEN=" + token}
		args := map[string]any{"path": "dropped/result.json", "content": `{"ok":true}`, "idempotency_key": "result-json-1"}
		// The process dies while the call is in flight: it may or may not
		// have reached the server.
		first := startMCP(t, bin, env...)
		done := make(chan error, 1)
		go func() {
			_, err := first.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: args})
			done <- err
		}()
		if err := first.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done // an error, or the answer if it raced the kill
		// A new process repeats the call with the same key, twice.
		second := startMCP(t, bin, env...)
		var a, b mcpserver.File
		second.ok(t, "write_file", args, &a)
		third := startMCP(t, bin, env...)
		third.ok(t, "write_file", args, &b)
		if a.ID != b.ID || a.Version != 1 || b.Version != 1 {
			t.Fatalf("repeats made %+v and %+v", a, b)
		}
		var l mcpserver.DirectoryListing
		third.ok(t, "list_directory", map[string]any{"path": "dropped"}, &l)
		if len(l.Entries) != 1 || l.Entries[0].Name != "result.json" {
			t.Fatalf("listing %+v", l)
		}
		if got := text(third.ok(t, "read_text_file", map[string]any{"path": "dropped/result.json"}, nil)); got != `{"ok":true}` {
			t.Fatalf("content %q", got)
		}
	})

	t.Run("ReadOnlyAndBadTokens", func(t *testing.T) {
		ro := startMCP(t, bin, "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+srv.Token(t, "desk", "read"))
		ro.ok(t, "list_directory", map[string]any{"path": "/"}, nil)
		if msg := ro.fail(t, "write_file", map[string]any{"path": "ro.txt", "content": "x"}); !strings.HasPrefix(msg, "FORBIDDEN: ") {
			t.Fatalf("read-only write: %s", msg)
		}
		bad := startMCP(t, bin, "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN=not-a-token")
		if msg := bad.fail(t, "list_directory", map[string]any{"path": "/"}); !strings.HasPrefix(msg, "UNAUTHENTICATED: ") {
			t.Fatalf("bad token: %s", msg)
		}
	})

	t.Run("LimitsFromTheEnvironment", func(t *testing.T) {
		s := startMCP(t, bin, "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+token, "AGENTFS_MCP_MAX_WRITE_BYTES=10", "AGENTFS_MCP_MAX_READ_BYTES=1024")
		if msg := s.fail(t, "write_file", map[string]any{"path": "limits/big.txt", "content": "eleven byte"}); !strings.HasPrefix(msg, "PAYLOAD_TOO_LARGE: ") {
			t.Fatalf("big write: %s", msg)
		}
		var tf mcpserver.TextFile
		s.ok(t, "write_file", map[string]any{"path": "limits/ok.txt", "content": "ten bytes!"}, nil)
		s.ok(t, "read_text_file", map[string]any{"path": "limits/ok.txt"}, &tf)
		if tf.Content != "ten bytes!" {
			t.Fatalf("read %+v", tf)
		}
	})
}

// mcpProcess is one `agentfs mcp` subprocess and the client session on it.
type mcpProcess struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *syncBuffer
}

func startMCP(t *testing.T, bin string, env ...string) *mcpProcess {
	t.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(os.Environ(), env...)
	p := &mcpProcess{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to agentfs mcp: %v\n%s", err, p.stderr)
	}
	p.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return p
}

func (p *mcpProcess) ok(t *testing.T, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %s\nstderr: %s", name, err, resultText(res), p.stderr)
	}
	if out != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// fail calls a tool that must answer a tool error, and returns its text.
func (p *mcpProcess) fail(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	res, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("%s: %v %s, want a tool error", name, err, resultText(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string { return mcptest.Text(res) }

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return text(res)
}

// TestMCPStdioScopes walks every tool through `agentfs mcp` with a token of
// each kind: each answers, or is refused FORBIDDEN naming the missing
// scope, exactly as the operation table says (the server's answer counts:
// the stdio door forwards).
func TestMCPStdioScopes(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := apitest.NewServer(t, apitest.Options{})
	for _, scopes := range [][]string{{"read"}, {"write"}, {"read", "write"}} {
		name := strings.Join(scopes, "+")
		full, err := client.New(srv.URL, srv.Token(t, "stdio-walker"), client.WithRunID("walk-"+name))
		if err != nil {
			t.Fatal(err)
		}
		fx := mcptest.Prepare(t, full, "walk-"+name, "walk-"+name)
		s := startMCP(t, bin, "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+srv.Token(t, "stdio-walker", scopes...))
		t.Run(name, func(t *testing.T) {
			mcptest.Walk(t, fx, scopes, func(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
				return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			})
		})
	}
}

// pipedSession writes lines to a new `agentfs mcp` in one write, closes its
// stdin, and reads what it answers until it exits: the answers by id, and
// its stderr.
func pipedSession(t *testing.T, bin string, env []string, lines ...string) (map[float64]map[string]any, string, error) {
	t.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exit error
	select {
	case exit = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("agentfs mcp did not exit after its stdin closed; stderr:\n%s", stderr.String())
	}
	answers := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if id, ok := m["id"].(float64); ok {
			answers[id] = m
		}
	}
	return answers, stderr.String(), exit
}

const (
	initializeLine  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// TestMCPStdioPipedInput: a client that writes initialize, initialized and
// a call at once and closes stdin gets every answer, every time, before
// `agentfs mcp` exits.
func TestMCPStdioPipedInput(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := apitest.NewServer(t, apitest.Options{})
	env := []string{"AGENTFS_URL=" + srv.URL, "AGENTFS_TOKEN=" + srv.Token(t, "piped")}
	for i := range 20 {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"piped/%d.txt","content":"x"}}}`, i)
		answers, stderr, err := pipedSession(t, bin, env, initializeLine, initializedLine, call)
		if err != nil || strings.Contains(stderr, "initialized before initialize") {
			t.Fatalf("run %d: exit %v; stderr:\n%s", i, err, stderr)
		}
		if answers[1]["result"] == nil {
			t.Fatalf("run %d: initialize unanswered: %v; stderr:\n%s", i, answers, stderr)
		}
		res, _ := answers[2]["result"].(map[string]any)
		if res == nil || res["isError"] == true {
			t.Fatalf("run %d: the call in flight when stdin closed: %v; stderr:\n%s", i, answers[2], stderr)
		}
	}
}

// TestMCPStdioCancelsWhatOutlivesTheDrain: a call still in flight when
// stdin closes and the drain timeout passes is cancelled and answered
// (its outcome unknown, with the key to repeat it), then the process
// exits.
func TestMCPStdioCancelsWhatOutlivesTheDrain(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a server that takes requests and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	env := []string{"AGENTFS_URL=http://" + ln.Addr().String(), "AGENTFS_TOKEN=x", "AGENTFS_MCP_DRAIN_TIMEOUT=1s"}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"hung.txt","content":"x"}}}`
	start := time.Now()
	answers, stderr, err := pipedSession(t, bin, env, initializeLine, initializedLine, call)
	if err != nil {
		t.Fatalf("exit %v; stderr:\n%s", err, stderr)
	}
	res, _ := answers[2]["result"].(map[string]any)
	raw, _ := json.Marshal(res)
	if res == nil || res["isError"] != true || !strings.Contains(string(raw), "UNREACHABLE") || !strings.Contains(string(raw), "idempotency_key") {
		t.Fatalf("the hung call: %s; stderr:\n%s", raw, stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %s to exit with a drain timeout of 1s", d)
	}
}
