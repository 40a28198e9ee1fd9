package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/mcpserver"
)

func TestResources(t *testing.T) {
	t.Parallel()
	b := setup(t, config{})
	ctx := context.Background()
	b.put(t, "notes/a.md", []byte("# héllo\n"), "text/markdown")
	b.put(t, "notes/deep/b.txt", []byte("b"), "text/plain")
	b.put(t, "bin/blob.dat", []byte{0xff, 0xfe, 0x00, 0x80}, "application/octet-stream")

	tpl, err := b.cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != mcpserver.ResourceTemplate {
		t.Fatalf("templates: %+v, %v", tpl, err)
	}

	read := func(uri string) *mcp.ResourceContents {
		t.Helper()
		res, err := b.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 || res.CacheScope != "private" {
			t.Fatalf("read %s: %+v, %v", uri, res, err)
		}
		return res.Contents[0]
	}
	if c := read("agentfs:///notes/a.md"); c.Text != "# héllo\n" || c.Blob != nil || c.MIMEType != "text/markdown" {
		t.Fatalf("text resource: %+v", c)
	}
	if c := read("agentfs:///bin/blob.dat"); !bytes.Equal(c.Blob, []byte{0xff, 0xfe, 0x00, 0x80}) || c.Text != "" {
		t.Fatalf("blob resource: %+v", c)
	}

	for uri, want := range map[string]int64{
		"agentfs:///nope.txt":  mcp.CodeResourceNotFound,
		"file:///etc/passwd":   jsonrpc.CodeInvalidParams,
		"agentfs://host/x.txt": jsonrpc.CodeInvalidParams,
		"agentfs:///notes/":    jsonrpc.CodeInvalidParams,
		"agentfs:///a//b":      jsonrpc.CodeInvalidParams,
	} {
		_, err := b.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != want {
			t.Errorf("read %s: %v; want JSON-RPC error %d", uri, err, want)
		}
	}

	list := func(params *mcp.ListResourcesParams) []string {
		t.Helper()
		var out []string
		for {
			res, err := b.cs.ListResources(ctx, params)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			for _, r := range res.Resources {
				out = append(out, r.URI)
			}
			if res.NextCursor == "" {
				slices.Sort(out)
				return out
			}
			params.Cursor = res.NextCursor
		}
	}
	if got := list(&mcp.ListResourcesParams{Meta: mcp.Meta{mcpserver.ResourcePrefixMeta: "notes/"}}); fmt.Sprint(got) != "[agentfs:///notes/a.md agentfs:///notes/deep/b.txt]" {
		t.Fatalf("list notes/: %v", got)
	}
	if got := list(&mcp.ListResourcesParams{}); len(got) != 3 {
		t.Fatalf("list all: %v", got)
	}
	_, err = b.cs.ListResources(ctx, &mcp.ListResourcesParams{Meta: mcp.Meta{mcpserver.ResourcePrefixMeta: "../"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("list a bad prefix: %v", err)
	}
}

func TestResourcesListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, config{opts: mcpserver.Options{ScanFiles: 4}})
	ctx := context.Background()
	const n = 11 // three pages
	for i := range n {
		b.put(t, fmt.Sprintf("many/f%03d.txt", i), []byte("x"), "text/plain")
	}
	seen := map[string]bool{}
	pages := 0
	params := &mcp.ListResourcesParams{}
	for {
		res, err := b.cs.ListResources(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range res.Resources {
			if seen[r.URI] {
				t.Fatalf("%s listed twice", r.URI)
			}
			seen[r.URI] = true
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("%d resources in %d pages, want %d in 3", len(seen), pages, n)
	}
}

func TestResourceURIs(t *testing.T) {
	for _, c := range []struct {
		uri, path string
		dir, bad  bool
	}{
		{uri: "agentfs:///a.txt", path: "a.txt"},
		{uri: "agentfs:///docs/deep/x%20y.md", path: "docs/deep/x y.md"},
		{uri: "agentfs:///docs/", path: "docs/", dir: true},
		{uri: "agentfs:///", path: "", dir: true},
		{uri: "agentfs://", path: "", dir: true},
		{uri: "agentfs:///a.txt?x=1", bad: true},
		{uri: "agentfs:///a.txt#f", bad: true},
		{uri: "agentfs://h/a.txt", bad: true},
		{uri: "agentfs:a.txt", bad: true},
		{uri: "http:///a.txt", bad: true},
		{uri: "agentfs:///a/../b", bad: true},
		{uri: "agentfs:///docs//", bad: true},
		{uri: "%zz", bad: true},
	} {
		p, dir, err := mcpserver.ResourcePath(c.uri)
		if (err != nil) != c.bad || !c.bad && (p != c.path || dir != c.dir) {
			t.Errorf("ResourcePath(%q) = %q, %v, %v", c.uri, p, dir, err)
		}
		if !c.bad && !c.dir {
			if back, _, _ := mcpserver.ResourcePath(mcpserver.ResourceURI(p)); back != p {
				t.Errorf("ResourceURI(%q) does not read back: %q", p, back)
			}
		}
	}
}

func FuzzResourcePath(f *testing.F) {
	for _, s := range []string{"agentfs:///a.txt", "agentfs:///docs/", "agentfs://", "agentfs:///%2e%2e/x", "agentfs:///a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		p, dir, err := mcpserver.ResourcePath(uri)
		if err != nil {
			return
		}
		if !dir {
			if back, _, err := mcpserver.ResourcePath(mcpserver.ResourceURI(p)); err != nil || back != p {
				t.Fatalf("%q → %q does not read back: %q, %v", uri, p, back, err)
			}
		}
	})
}

func TestSessionIDs(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"mcps_abcdefghijklmnopqrstuvwxyz", true},
		{"mcps_0000000000000000000000000a", false}, // not base32 (no 0, 1, 8 or 9)
		{"mcps_aaaaaaaaaaaaaaaaaaaaaaaaaa", true},
		{"mcps_aaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"mcps_aaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"mcps_aaaaaaaaaaaaaaaaaaaaaaaa1a", false},
		{"mcpx_aaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"", false},
	} {
		if got := mcpserver.ValidSessionID(c.id); got != c.ok {
			t.Errorf("ValidSessionID(%q) = %v", c.id, got)
		}
	}
}

// rawMCP posts one JSON-RPC message to a server's /mcp as a client that
// is not the Go SDK's would.
func rawMCP(t *testing.T, url, token string, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestProtocolVersionsNegotiate(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "versions")
	for _, v := range mcpserver.ProtocolVersions {
		if v >= "2026-07-28" {
			continue // sessionless: no initialize (the SDK client below speaks it)
		}
		res, body := rawMCP(t, srv.URL, token, fmt.Sprintf(initialize, v))
		var m struct {
			Result struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Capabilities    map[string]any `json:"capabilities"`
			} `json:"result"`
		}
		if res.StatusCode != 200 || json.Unmarshal(body, &m) != nil || m.Result.ProtocolVersion != v {
			t.Errorf("initialize %s: %d %s", v, res.StatusCode, body)
		}
		if m.Result.Capabilities["resources"] == nil {
			t.Errorf("initialize %s: no resources capability: %s", v, body)
		}
		if !mcpserver.ValidSessionID(res.Header.Get("Mcp-Session-Id")) {
			t.Errorf("initialize %s: session %q", v, res.Header.Get("Mcp-Session-Id"))
		}
	}
	for _, v := range mcpserver.ProtocolVersions {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: headers{"Authorization": {"Bearer " + token}}}},
			&mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Errorf("Go SDK client at %s: %v", v, err)
			continue
		}
		if got := cs.InitializeResult().ProtocolVersion; got != v {
			t.Errorf("asked for %s, negotiated %s", v, got)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Errorf("tools/list at %s: %v", v, err)
		}
		_ = cs.Close()
	}
}

func TestBadVersionHeaderIsAJSONRPCError(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "badversion")
	for _, v := range []string{"1999-01-01", "2025-13-01", "garbage", "2030-01-01"} {
		res, body := rawMCP(t, srv.URL, token, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "MCP-Protocol-Version", v)
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *jsonrpc.Error  `json:"error"`
		}
		if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(body, &m) != nil || m.Error == nil || !strings.Contains(m.Error.Message, "2024-11-05") {
			t.Errorf("version %s: %d %s %s", v, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	// Whatever else the SDK refuses in plain text is JSON-RPC too.
	res, body := rawMCP(t, srv.URL, token, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, "Accept", "text/html")
	if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !bytes.Contains(body, []byte(`"id":8`)) {
		t.Errorf("a wrong Accept: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
}

func TestHostAndOriginAreValidated(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "guard")
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name   string
		header []string
		status int
	}{
		{"no Origin", nil, 200},
		{"the public origin", []string{"Origin", srv.URL}, 200},
		{"a foreign origin", []string{"Origin", "http://evil.example"}, 403},
		{"another local origin", []string{"Origin", "http://localhost:1"}, 200},
		{"a foreign origin on a loopback-looking name", []string{"Origin", "http://127.0.0.1.evil.example"}, 403},
		{"a null origin", []string{"Origin", "null"}, 403},
		{"localhost", []string{"Host", "localhost:9"}, 200},
		{"a rebinding Host", []string{"Host", "evil.example"}, 403},
		{"a rebinding Host with a port", []string{"Host", "evil.example:" + strings.Split(host, ":")[1]}, 403},
	} {
		res, body := rawMCP(t, srv.URL, "not-a-token", fmt.Sprintf(initialize, "2025-06-18"), c.header...)
		want := c.status
		if want == 200 {
			want = 401 // checked before authentication: the guard let it through to it
		}
		if res.StatusCode != want {
			t.Errorf("%s: %d %s; want %d", c.name, res.StatusCode, body, want)
		}
		if want == 403 && !bytes.Contains(body, []byte("FORBIDDEN")) {
			t.Errorf("%s: %s", c.name, body)
		}
		if c.status == 200 {
			if res, body := rawMCP(t, srv.URL, token, fmt.Sprintf(initialize, "2025-06-18"), c.header...); res.StatusCode != 200 {
				t.Errorf("%s with a token: %d %s", c.name, res.StatusCode, body)
			}
		}
	}
}

func TestGuardConfig(t *testing.T) {
	g, err := mcpserver.NewGuard("https://agentfs.example.com", mcpserver.GuardConfig{
		AllowedHosts: "lb.internal, 10.0.0.5:8080", AllowedOrigins: "https://console.example.com, http://localhost:3000"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, origin string
		ok           bool
	}{
		{"agentfs.example.com", "", true},
		{"agentfs.example.com", "https://agentfs.example.com", true},
		{"agentfs.example.com", "https://agentfs.example.com:443", true},
		{"AGENTFS.example.com", "https://console.example.com", true},
		{"agentfs.example.com", "http://agentfs.example.com", false},
		{"agentfs.example.com", "http://localhost:3000", true},
		{"agentfs.example.com", "http://localhost:3001", false},
		{"lb.internal:7000", "", true},
		{"10.0.0.5:8080", "", true},
		{"10.0.0.5:9090", "", false},
		{"127.0.0.1:1", "", true},
		{"[::1]:1", "", true},
		{"evil.example", "", false},
		{"agentfs.example.com.evil.example", "", false},
	} {
		r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if why := g.Check(r); (why == "") != c.ok {
			t.Errorf("host %q origin %q: %q", c.host, c.origin, why)
		}
	}
	local, err := mcpserver.NewGuard("http://127.0.0.1:8080", mcpserver.GuardConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for origin, ok := range map[string]bool{"http://127.0.0.1:8080": true, "http://127.0.0.1:6274": true,
		"http://localhost:3000": true, "http://[::1]:1": true, "http://evil.example": false, "null": false} {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
		r.Header.Set("Origin", origin)
		if why := local.Check(r); (why == "") != ok {
			t.Errorf("a local server, origin %q: %q", origin, why)
		}
	}
	if _, err := mcpserver.NewGuard("http://x", mcpserver.GuardConfig{AllowedOrigins: "console.example.com"}); err == nil {
		t.Error("an origin without a scheme was taken")
	}
}

// subscriber is a Go SDK session that hears resource updates.
type subscriber struct {
	cs      *mcp.ClientSession
	updates chan string
}

func subscribe(t *testing.T, url, token, version string, uris ...string) *subscriber {
	t.Helper()
	s := &subscriber{updates: make(chan string, 100)}
	c := mcp.NewClient(&mcp.Implementation{Name: "sub", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { s.updates <- r.Params.URI },
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: headers{"Authorization": {"Bearer " + token}}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.cs = cs
	for _, u := range uris {
		if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatalf("subscribe %s at %s: %v", u, version, err)
		}
	}
	return s
}

// await waits for an update of uri, failing on any other.
func (s *subscriber) await(t *testing.T, what, uri string) {
	t.Helper()
	select {
	case got := <-s.updates:
		if got != uri {
			t.Fatalf("%s: heard %s, want %s", what, got, uri)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no update of %s", what, uri)
	}
}

// quiet checks that nothing more was heard.
func (s *subscriber) quiet(t *testing.T, what string) {
	t.Helper()
	select {
	case got := <-s.updates:
		t.Fatalf("%s: heard %s", what, got)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestSubscriptionsHearEveryDoor(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "subs")
	other := srv.Token(t, "someone-else")
	c, err := client.New(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			dir := strings.ReplaceAll(version, "-", "")
			watched := "agentfs:///" + dir + "/watched.txt"
			s := subscribe(t, srv.URL, token, version, watched, "agentfs:///"+dir+"/tree/")
			stranger := subscribe(t, srv.URL, other, version, watched)
			// REST
			f, err := c.PutFile(ctx, dir+"/watched.txt", strings.NewReader("v1"), client.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.await(t, "a REST create", watched)
			// an unwatched path, then another MCP session's write_file
			if _, err := c.PutFile(ctx, dir+"/unwatched.txt", strings.NewReader("x"), client.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			writer := subscribe(t, srv.URL, token, "2025-11-25")
			res, err := writer.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file",
				Arguments: map[string]any{"path": dir + "/watched.txt", "content": "v2", "if_exists": "replace"}})
			if err != nil || res.IsError {
				t.Fatalf("write_file: %v %+v", err, res)
			}
			s.await(t, "another session's write_file", watched)
			// a write below a watched directory
			if _, err := c.PutFile(ctx, dir+"/tree/deep/x.txt", strings.NewReader("x"), client.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			treeURI := "agentfs:///" + dir + "/tree/deep/x.txt"
			if version >= "2026-07-28" {
				treeURI = "agentfs:///" + dir + "/tree/" // the SDK delivers by the subscribed URI
			}
			s.await(t, "a write below a watched directory", treeURI)
			if _, err := c.DeleteFile(ctx, f.ID, client.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			s.await(t, "a delete", watched)
			// a batch item
			ac := apitest.NewClient(t, srv.URL, token)
			ac.Do("POST", "/v1/batch", fmt.Sprintf(`{"operations":[{"op":"put","path":%q,"content":"from a batch"}]}`, dir+"/watched.txt"),
				"Content-Type", "application/json", "Idempotency-Key", dir+"-batch").Expect(t, http.StatusAccepted)
			s.await(t, "a batch item", watched)
			// a run's write, then the run's revert
			run := dir + "-run"
			ac.Do("POST", "/v1/files?path="+dir+"/watched.txt&if_exists=replace", "by the run",
				"Content-Type", "text/plain", "X-Run-ID", run, "Idempotency-Key", run+"-put").Expect(t, http.StatusOK)
			s.await(t, "the run's write", watched)
			ac.Do("POST", "/v1/runs/"+run+"/revert", `{"force":false}`,
				"Content-Type", "application/json", "Idempotency-Key", run+"-revert").Expect(t, http.StatusAccepted)
			s.await(t, "the run's revert", watched)
			s.quiet(t, "after the last change")
			stranger.quiet(t, "another subject's session")
		})
	}
}

func FuzzGuard(f *testing.F) {
	g, err := mcpserver.NewGuard("https://agentfs.example.com", mcpserver.GuardConfig{AllowedHosts: "lb.internal", AllowedOrigins: "https://console.example.com"})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range [][2]string{{"agentfs.example.com", ""}, {"evil.example", "http://evil.example"}, {"[::1]:80", "null"}, {"127.0.0.1", "http://[::1"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, host, origin string) {
		r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		why := g.Check(r)
		if why == "" && origin != "" && !strings.HasPrefix(strings.ToLower(origin), "http") {
			t.Fatalf("origin %q passed", origin)
		}
	})
}

func FuzzValidSessionID(f *testing.F) {
	f.Add("mcps_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Add("mcps_")
	f.Fuzz(func(t *testing.T, s string) {
		if mcpserver.ValidSessionID(s) && (len(s) != 31 || !strings.HasPrefix(s, "mcps_")) {
			t.Fatalf("%q taken", s)
		}
	})
}
