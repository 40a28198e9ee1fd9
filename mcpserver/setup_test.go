package mcpserver_test

// The tools are tested through the SDK's own client against the real API
// (apitest: the real router on the test Postgres and S3 servers), twice
// (TestMain): first over in-memory transports on ClientBackend, then over
// Streamable HTTP through the API's /mcp door (CoreBackend, in the API's
// process, behind its auth).

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/mcpserver/mcptest"
)

// config adjusts setup.
type config struct {
	subject string
	scopes  []string
	// prefixes, when set, scope the session's token to these folders.
	prefixes []string
	agentID  string
	runID    string
	opts     mcpserver.Options
	// wrap, when set, wraps the backend (to hold calls at a barrier).
	wrap func(mcpserver.Backend) mcpserver.Backend
	// limits adjust the test server's (setup only).
	limits handlers.Limits
}

// bundle is one MCP session on ClientBackend against a real API server.
type bundle struct {
	srv    *apitest.Server
	token  string
	client *client.Client // the same subject, straight to the API
	cs     *mcp.ClientSession
	tools  map[string]*mcp.Tool
	out    map[string]*jsonschema.Resolved // output schemas by tool
	calls  *callLog
}

// callLog records Options.OnCall.
type callLog struct {
	mu    sync.Mutex
	calls []string // "tool outcome"
}

func (l *callLog) add(tool, outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, tool+" "+outcome)
}

func (l *callLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// overDoor says the sessions of this pass go through the /mcp door.
var overDoor bool

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.fuzz").Value.String() == "" {
		overDoor = true
		fmt.Println("mcpserver: the same tests again, through the /mcp door (CoreBackend over Streamable HTTP)")
		code = m.Run()
	}
	os.Exit(code)
}

// doors is a test server's /mcp door: one door per session (by its
// token), each made with that session's Options (Server.NewDoor).
type doors struct {
	mu sync.Mutex
	by map[string]http.Handler
}

func (d *doors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	h := d.by[r.Header.Get("Authorization")]
	d.mu.Unlock()
	if h == nil {
		http.Error(w, "no test session has this token", http.StatusInternalServerError)
		return
	}
	h.ServeHTTP(w, r)
}

var doorsOf sync.Map // test server URL → *doors

func setup(t *testing.T, cfg config) *bundle {
	t.Helper()
	d := &doors{by: map[string]http.Handler{}}
	srv := apitest.NewServer(t, apitest.Options{Limits: cfg.limits, MCP: d})
	doorsOf.Store(srv.URL, d)
	return connect(t, srv, cfg)
}

// headers adds a session's headers to each request to the door.
type headers http.Header

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

// session connects the SDK's client to the server: over the /mcp door in
// the second pass (unless the test wraps the backend, which only
// ClientBackend can be), else in memory to a server on backend.
func session(t *testing.T, srv *apitest.Server, cfg config, token string, backend mcpserver.Backend, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	if overDoor && cfg.wrap == nil {
		d, _ := doorsOf.Load(srv.URL)
		door := d.(*doors)
		door.mu.Lock()
		handler, err := srv.Server.NewDoor(opts)
		if err != nil {
			door.mu.Unlock()
			t.Fatal(err)
		}
		door.by["Bearer "+token] = handler
		door.mu.Unlock()
		h := headers{"Authorization": {"Bearer " + token}}
		if cfg.agentID != "" {
			h["X-Agent-Id"] = []string{cfg.agentID}
		}
		if cfg.runID != "" {
			h["X-Run-Id"] = []string{cfg.runID}
		}
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: h}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("connect to /mcp: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	return inMemory(t, backend, opts)
}

// inMemory connects the SDK's client in memory to a server on backend.
func inMemory(t *testing.T, backend mcpserver.Backend, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	server, err := mcpserver.New(backend, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Close()
	})
	return cs
}

// connect opens another session against srv.
func connect(t *testing.T, srv *apitest.Server, cfg config) *bundle {
	t.Helper()
	if cfg.subject == "" {
		cfg.subject = "agent-subject"
	}
	token := srv.Token(t, cfg.subject, cfg.scopes...)
	if cfg.prefixes != nil {
		scopes := cfg.scopes
		if scopes == nil {
			scopes = []string{agentfs.ScopeRead, agentfs.ScopeWrite}
		}
		tok, err := srv.Store.CreateRootToken(context.Background(), cfg.subject, "scoped",
			agentfs.Grant{Scopes: scopes, Prefixes: cfg.prefixes})
		if err != nil {
			t.Fatal(err)
		}
		token = tok.Secret
	}
	var copts []client.Option
	if cfg.agentID != "" {
		copts = append(copts, client.WithAgentID(cfg.agentID))
	}
	if cfg.runID != "" {
		copts = append(copts, client.WithRunID(cfg.runID))
	}
	c, err := client.New(srv.URL, token, copts...)
	if err != nil {
		t.Fatal(err)
	}
	var backend mcpserver.Backend
	backend, err = mcpserver.NewClientBackend(c)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.wrap != nil {
		backend = cfg.wrap(backend)
	}
	log := &callLog{}
	opts := cfg.opts
	opts.AgentID, opts.RunID, opts.OnCall = cfg.agentID, cfg.runID, log.add
	cs := session(t, srv, cfg, token, backend, opts)
	b := &bundle{srv: srv, token: token, client: c, cs: cs, tools: map[string]*mcp.Tool{},
		out: map[string]*jsonschema.Resolved{}, calls: log}
	b.loadTools(t)
	return b
}

// loadTools lists the tools and resolves their output schemas.
func (b *bundle) loadTools(t *testing.T) {
	t.Helper()
	res, err := b.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		b.tools[tool.Name] = tool
		if tool.OutputSchema == nil {
			continue
		}
		var s jsonschema.Schema
		remarshal(t, tool.OutputSchema, &s)
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s output schema: %v", tool.Name, err)
		}
		b.out[tool.Name] = r
	}
}

func remarshal(t testing.TB, from, to any) {
	t.Helper()
	raw, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, to); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

// raw calls a tool and returns the result or the protocol error.
func (b *bundle) raw(name string, args any) (*mcp.CallToolResult, error) {
	return b.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
}

// ok calls a tool that must succeed; its structured content must match
// the tool's output schema, and is decoded into out when out is not nil.
func (b *bundle) ok(t *testing.T, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := b.raw(name, args)
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", name, args, text(res))
	}
	b.checkOutput(t, name, res)
	if out != nil {
		remarshal(t, res.StructuredContent, out)
	}
	return res
}

func (b *bundle) checkOutput(t *testing.T, name string, res *mcp.CallToolResult) {
	t.Helper()
	schema := b.out[name]
	if schema == nil {
		t.Fatalf("%s has no output schema", name)
	}
	var v any
	remarshal(t, res.StructuredContent, &v)
	if err := schema.Validate(v); err != nil {
		t.Fatalf("%s: structured content does not match its output schema: %v\n%s", name, err, mustJSON(res.StructuredContent))
	}
}

// fail calls a tool that must fail with a tool error of this code, and
// returns its problem. The text must start with the code and say whether
// retrying helps.
func (b *bundle) fail(t *testing.T, name string, args any, code string) (mcpserver.Problem, string) {
	t.Helper()
	res, err := b.raw(name, args)
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v, want tool error %s", name, args, err, code)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want %s: %s", name, args, code, text(res))
	}
	if res.StructuredContent != nil {
		t.Fatalf("%s(%v): a failed call with structured content %s (clients validate it against the output schema)",
			name, args, mustJSON(res.StructuredContent))
	}
	var p mcpserver.Problem
	remarshal(t, res.Meta[mcpserver.ProblemMeta], &p)
	msg := text(res)
	if p.Code != code || !strings.HasPrefix(msg, code+": ") {
		t.Fatalf("%s(%v): got %s, want %s\n%s", name, args, p.Code, code, msg)
	}
	if p.Type != "/problems/"+code || p.Status == 0 {
		t.Fatalf("%s: problem without type or status: %s", name, mustJSON(p))
	}
	if !strings.Contains(msg, "Retrying the same call will not help.") && !strings.Contains(msg, "Retrying can help") {
		t.Fatalf("%s: error text does not say whether retrying helps: %s", name, msg)
	}
	return p, msg
}

// badArgs calls a tool with arguments its input schema refuses: a tool
// error VALIDATION_FAILED (never a protocol error) naming field, so that
// the model can correct the call.
func (b *bundle) badArgs(t *testing.T, name string, args any, field string) (mcpserver.Problem, string) {
	t.Helper()
	p, msg := b.fail(t, name, args, "VALIDATION_FAILED")
	named := false
	for _, fe := range p.Errors {
		named = named || fe.Field == field
	}
	if !named || !strings.Contains(msg, field) {
		t.Fatalf("%s(%s): the error does not name %s: %s\n%s", name, mustJSON(args), field, mustJSON(p.Errors), msg)
	}
	return p, msg
}

// text joins a result's text blocks.
func text(res *mcp.CallToolResult) string { return mcptest.Text(res) }

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

// put stores bytes straight through the API (for content write_file cannot
// make: binary, other content types).
func (b *bundle) put(t *testing.T, path string, data []byte, contentType string) *client.File {
	t.Helper()
	f, err := b.client.PutFile(context.Background(), path, bytes.NewReader(data), client.PutOptions{ContentType: contentType, Replace: true})
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return f
}

// content reads a live file's bytes straight from the API.
func (b *bundle) content(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	page, err := b.client.ListFiles(ctx, client.ListOptions{Path: path})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("find %s: %v (%d files)", path, err, len(page.Data))
	}
	c, err := b.client.FileContent(ctx, page.Data[0].ID, client.ContentOptions{})
	return string(testkit.ReadAll(t, c, err))
}

// liveFiles counts the live files at path.
func (b *bundle) liveFiles(t *testing.T, path string) []client.File {
	t.Helper()
	page, err := b.client.ListFiles(context.Background(), client.ListOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return page.Data
}
