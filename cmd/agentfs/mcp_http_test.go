package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/mcpserver/mcptest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// alternating sends each request to the next of its servers in turn, as
// a load balancer without sticky sessions would, with the caller's
// headers.
type alternating struct {
	hosts   []string
	headers http.Header
	n       atomic.Int64
	seen    []atomic.Int64 // requests each server got
}

func (a *alternating) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(a.n.Add(1)) % len(a.hosts)
	a.seen[i].Add(1)
	r = r.Clone(r.Context())
	u, _ := url.Parse(a.hosts[i])
	r.URL.Host, r.Host = u.Host, u.Host
	for k, vs := range a.headers {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's own client to /mcp behind an alternating
// balancer over the given servers.
func mcpSession(t *testing.T, hosts []string, headers http.Header) (*mcp.ClientSession, *alternating) {
	t.Helper()
	lb := &alternating{hosts: hosts, headers: headers, seen: make([]atomic.Int64, len(hosts))}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentfs-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: hosts[0] + "/mcp", HTTPClient: &http.Client{Transport: lb}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { session.Close() })
	return session, lb
}

func callTool(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res, mcptest.Text(res)
}

// TestMCPOverHTTP drives the /mcp door of two `agentfs serve` processes on
// one database through the SDK's client, its requests alternating between
// them: no sticky sessions needed. Bearer auth and scopes are the REST
// API's, X-Run-ID attributes the session's writes, and tool calls are
// counted in /metrics.
func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	bin, cfg := buildBinary(t), storagetest.Config(t)
	a, b := startServe(t, bin, cfg), startServe(t, bin, cfg)
	a.waitReady(t)
	b.waitReady(t)
	token := func(scopes string) string {
		return createToken(t, bin, cfg, "--subject", "agent", "--scopes", scopes)
	}
	writer, reader := token("read,write"), token("read")
	hosts := []string{a.url, b.url}
	headers := http.Header{"Authorization": {"Bearer " + writer}, "X-Run-Id": {"mcp-run"}, "X-Agent-Id": {"mcp-agent"}}

	t.Run("UnauthenticatedIs401BeforeAnyExchange", func(t *testing.T) {
		res, err := http.Post(a.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" ||
			!strings.Contains(string(body), "UNAUTHENTICATED") {
			t.Fatalf("no token: %d %v %s", res.StatusCode, res.Header, body)
		}
	})

	t.Run("WritesEditsAndReadsAcrossInstances", func(t *testing.T) {
		s, lb := mcpSession(t, hosts, headers)
		tools, err := s.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) < 12 {
			t.Fatalf("tools: %d %v", len(tools.Tools), err)
		}
		res, text := callTool(t, s, "write_file", map[string]any{"path": "notes/plan.md", "content": "# Plan\n- one\n",
			"idempotency_key": "mcp-http-1"})
		if res.IsError {
			t.Fatalf("write_file: %s", text)
		}
		// The same key again, on the other instance: the recorded write.
		again, text2 := callTool(t, s, "write_file", map[string]any{"path": "notes/plan.md", "content": "# Plan\n- one\n",
			"idempotency_key": "mcp-http-1"})
		if again.IsError {
			t.Fatalf("repeated write_file: %s", text2)
		}
		var first, second struct {
			ID      string  `json:"id"`
			Version int     `json:"version"`
			RunID   *string `json:"run_id"`
		}
		mustJSON(t, res.StructuredContent, &first)
		mustJSON(t, again.StructuredContent, &second)
		if first.ID == "" || first.ID != second.ID || second.Version != 1 || first.RunID == nil || *first.RunID != "mcp-run" {
			t.Fatalf("a keyed write repeated: %+v then %+v", first, second)
		}
		res, text = callTool(t, s, "edit_file", map[string]any{"path": "notes/plan.md",
			"edits": []map[string]string{{"oldText": "- one\n", "newText": "- one\n- two\n"}}})
		if res.IsError || !strings.Contains(text, "+- two") {
			t.Fatalf("edit_file: %s", text)
		}
		if _, text = callTool(t, s, "read_text_file", map[string]any{"path": "/notes/plan.md"}); text != "# Plan\n- one\n- two\n" {
			t.Fatalf("read_text_file: %q", text)
		}
		if _, text = callTool(t, s, "list_run_files", map[string]any{}); !strings.Contains(text, "notes/plan.md") {
			t.Fatalf("list_run_files: %s", text)
		}
		if lb.seen[0].Load() == 0 || lb.seen[1].Load() == 0 {
			t.Fatalf("requests per instance: %d and %d; the balancer must use both", lb.seen[0].Load(), lb.seen[1].Load())
		}
	})

	t.Run("AReadOnlyTokenReadsAndIsForbiddenToWrite", func(t *testing.T) {
		s, _ := mcpSession(t, hosts, http.Header{"Authorization": {"Bearer " + reader}})
		if res, text := callTool(t, s, "read_text_file", map[string]any{"path": "notes/plan.md"}); res.IsError {
			t.Fatalf("a read-only token cannot read: %s", text)
		}
		res, text := callTool(t, s, "write_file", map[string]any{"path": "notes/no.md", "content": "x"})
		if !res.IsError || !strings.HasPrefix(text, "FORBIDDEN") {
			t.Fatalf("a read-only token wrote: %v %s", res.IsError, text)
		}
	})

	t.Run("ToolCallsAreCounted", func(t *testing.T) {
		res, err := http.Get(a.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !regexp.MustCompile(`agentfs_mcp_tool_calls_total\{outcome="ok",tool="write_file"\} [1-9]`).Match(body) {
			t.Fatalf("tool calls are not counted:\n%s", grep(string(body), "agentfs_mcp"))
		}
	})
}

func mustJSON(t *testing.T, v, dst any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		t.Fatalf("structured content %v: %v", v, err)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return fmt.Sprint(out)
}
