package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/jsonutf8"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/telemetry/logtest"
)

// FuzzToolArguments feeds arbitrary arguments to every tool, through the
// same handler the SDK calls, on ClientBackend against the real API (the
// test Postgres and S3). Whatever arrives, a call answers a tool result,
// never a protocol error, a panic or an internal error; a failure carries
// its problem in _meta (no structured content) and its text starts with
// the code, and a success matches the tool's output schema.
//
// It needs the test servers: run it through scripts/test.sh, e.g.
//
//	scripts/test.sh ./mcpserver/ -run '^$' -fuzz '^FuzzToolArguments$' -fuzztime 60s -fuzzminimizetime 20x
func FuzzToolArguments(f *testing.F) {
	srv := apitest.NewServer(f, apitest.Options{})
	c, err := client.New(srv.URL, srv.Token(f, "fuzz"), client.WithRunID("fuzz-run"))
	if err != nil {
		f.Fatal(err)
	}
	backend, err := mcpserver.NewClientBackend(c)
	if err != nil {
		f.Fatal(err)
	}
	logs := &logtest.Buffer{}
	tools, handlers, err := mcpserver.ToolHandlers(backend, mcpserver.Options{MaxReadBytes: 4096, MaxMediaBytes: 4096,
		MaxWriteBytes: 8192, ScanFiles: 50, RunID: "fuzz-run", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		f.Fatal(err)
	}
	outputs := make([]*jsonschema.Resolved, len(tools))
	for i, tool := range tools {
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			f.Fatal(err)
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(raw, &schema); err != nil {
			f.Fatal(err)
		}
		if outputs[i], err = schema.Resolve(nil); err != nil {
			f.Fatal(err)
		}
	}
	// Something to read, edit and list.
	for _, p := range []string{"a.txt", "dir/b.md", "dir/sub/c.json"} {
		if _, err := c.PutFile(context.Background(), p, strings.NewReader("hello\nworld\n"), client.PutOptions{Replace: true}); err != nil {
			f.Fatal(err)
		}
	}
	bin, err := c.PutFile(context.Background(), "bin.dat", bytes.NewReader([]byte{0xff, 0, 0xfe}), client.PutOptions{Replace: true})
	if err != nil {
		f.Fatal(err)
	}

	index := map[string]uint8{}
	for i, tool := range tools {
		index[tool.Name] = uint8(i)
	}
	for _, seed := range []struct{ tool, args string }{
		{"read_text_file", `{"path":"a.txt"}`},
		{"read_text_file", `{"path":"/a.txt","head":1}`},
		{"read_text_file", `{"path":"a.txt","tail":99999999999}`},
		{"read_text_file", `{"path":"a.txt","head":1,"tail":1}`},
		{"read_text_file", `{"path":"bin.dat"}`},
		{"read_text_file", `{"path":"../x"}`},
		{"read_text_file", `{"path":"a\u0000b"}`},
		{"read_text_file", `{"path":null}`},
		{"read_text_file", `null`},
		{"read_text_file", `[]`},
		{"read_text_file", `"a.txt"`},
		{"read_text_file", `{"path":"a.txt"`},
		{"read_text_file", `{"path":"a.txt","head":1e400}`},
		{"read_text_file", `{"path":"a.txt","head":-1}`},
		{"read_text_file", `{"path":"a.txt","PATH":"b"}`},
		{"read_text_file", `{"path":"\xff\xfe"}`},
		{"read_media_file", `{"path":"bin.dat"}`},
		{"read_media_file", `{"path":"dir"}`},
		{"read_multiple_files", `{"paths":["a.txt","dir/b.md","nope","","/","bin.dat"]}`},
		{"read_multiple_files", `{"paths":[1,2]}`},
		{"write_file", `{"path":"w.txt","content":"x"}`},
		{"write_file", `{"path":"w.txt","content":"y","if_exists":"replace","idempotency_key":"k1"}`},
		{"write_file", `{"path":"w.txt","content":"z","if_exists":"replace","idempotency_key":"k1"}`},
		{"write_file", `{"path":"w.txt","content":"x","expected_etag":"*"}`},
		{"write_file", `{"path":"w.txt","content":"x","expected_etag":"W/\"1\"","if_exists":"replace"}`},
		{"write_file", `{"path":"w.txt","content":"x","expires_in":60}`},
		{"write_file", `{"path":"w.txt","content":"x","idempotency_key":""}`},
		{"edit_file", `{"path":"a.txt","edits":[{"oldText":"hello","newText":"hi"}],"dryRun":true}`},
		{"edit_file", `{"path":"a.txt","edits":[{"oldText":"o","newText":"0"}]}`},
		{"edit_file", `{"path":"a.txt","edits":[{"oldText":"zzz","newText":""}],"idempotency_key":"k1"}`},
		{"edit_file", `{"path":"bin.dat","edits":[{"oldText":"\u00ff","newText":""}]}`},
		{"list_directory", `{"path":""}`},
		{"list_directory", `{"path":"dir/","cursor":"bm90IGEgY3Vyc29y"}`},
		{"list_directory", `{"path":"a.txt"}`},
		{"directory_tree", `{"path":"."}`},
		{"directory_tree", `{"path":"/dir","cursor":"%%%"}`},
		{"search_files", `{"path":"","pattern":"**/*.{md,json}","excludePatterns":["sub"]}`},
		{"search_files", `{"path":"","pattern":"{{{{{{{{{{a,b},c},d},e},f},g},h},i},j},k}"}`},
		{"search_files", `{"path":"","pattern":"[","excludePatterns":["\\"]}`},
		{"search_files", `{"path":"","pattern":"**/**/**/**/**/**/**/**/x"}`},
		{"get_file_info", `{"path":"dir"}`},
		{"get_file_info", `{"path":"a.txt"}`},
		{"delete_file", `{"path":"w.txt"}`},
		{"restore_file", `{"file_id":"` + bin.ID + `"}`},
		{"restore_file", `{"file_id":"../../v1/protocol"}`},
		{"restore_file", `{"file_id":"file_%2e%2e"}`},
		{"list_run_files", `{}`},
		{"list_run_files", `{"run_id":"bad id","agent_id":"x"}`},
		{"list_run_files", `{"agent_id":"a","cursor":"!!"}`},
		{"move_file", `{"source":"dir/b.md","destination":"dir/moved.md"}`},
		{"move_file", `{"source":"a.txt","destination":"a.txt"}`},
		{"move_file", `{"source":"a.txt","destination":"dir/sub/c.json"}`},
		{"move_file", `{"source":"/dir/moved.md","destination":"/dir/b.md"}`},
		{"move_file", `{"source":"nope","destination":"../x"}`},
		{"move_file", `{"source":"a.txt"}`},
		{"file_history", `{"path":"a.txt"}`},
		{"file_history", `{"path":"a.txt","cursor":"1"}`},
		{"file_history", `{"path":"a.txt","cursor":"-1"}`},
		{"file_history", `{"path":"a.txt","cursor":"99999999999999999999"}`},
		{"file_history", `{"path":"dir"}`},
		{"revert_file", `{"path":"a.txt","version":1}`},
		{"revert_file", `{"path":"a.txt","version":2147483647}`},
		{"revert_file", `{"path":"a.txt","version":1,"expected_etag":"W/\"x\""}`},
		{"revert_file", `{"path":"a.txt","version":1,"idempotency_key":"k1"}`},
		{"revert_file", `{"path":"a.txt","version":1e3}`},
		{"revert_file", `{"path":"a.txt","version":-5}`},
		{"share_file", `{"path":"a.txt"}`},
		{"share_file", `{"path":"bin.dat","version":1,"expires_in":604800}`},
		{"share_file", `{"path":"a.txt","version":2147483647,"expires_in":60}`},
		{"share_file", `{"path":"a.txt","expires_in":60.5}`},
		{"run_summary", `{}`},
		{"run_summary", `{"run_id":"fuzz-run"}`},
		{"run_summary", `{"run_id":"a/b"}`},
		{"run_summary", `{"run_id":"%2e%2e"}`},
		{"run_summary", `{"run_id":"x\u0000"}`},
		{"run_summary", `{"run_id":"run with spaces"}`},
		{"run_recovery", `{}`},
		{"run_recovery", `{"run_id":"fuzz-run"}`},
		{"run_recovery", `{"run_id":"a/b"}`},
		{"complete_upload", `{"upload_id":"upl_00000000000000000000000000"}`},
		{"complete_upload", `{"upload_id":"../x"}`},
		{"abort_upload", `{"upload_id":"upl_x\u0000"}`},
		{"abort_upload", `{"upload_id":7}`},
		{"write_file", `{"path":"bad\udc80.txt","content":"x"}`},
		{"write_file", "{\"path\":\"w.txt\",\"content\":\"caf\xe9\"}"},
		{"read_multiple_files", `{"paths":["a.txt","\ud800"]}`},
	} {
		f.Add(index[seed.tool], []byte(seed.args))
	}
	code := regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		i := int(which) % len(tools)
		tool := tools[i]
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool.Name, Arguments: args}}
		res, err := handlers[i](context.Background(), req)
		if strings.Contains(logs.String(), "panicked") {
			t.Fatalf("%s(%q) panicked:\n%s", tool.Name, args, logs)
		}
		if err != nil {
			t.Fatalf("%s(%q): protocol error %v, want a tool result", tool.Name, args, err)
		}
		if res == nil || len(res.Content) == 0 {
			t.Fatalf("%s(%q): no result", tool.Name, args)
		}
		first, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			t.Fatalf("%s(%q): first content is %T", tool.Name, args, res.Content[0])
		}
		p, isProblem := res.Meta[mcpserver.ProblemMeta].(*mcpserver.Problem)
		if f := jsonutf8.Check(args); f != nil {
			if !res.IsError || !isProblem || p.Code != mcpserver.CodeInvalidPath && p.Code != mcpserver.CodeValidationFailed {
				t.Fatalf("%s(%q) with a string that is not text (%v): %q", tool.Name, args, f, first.Text)
			}
		}
		if res.IsError {
			if !isProblem || !code.MatchString(p.Code) || !strings.HasPrefix(first.Text, p.Code+": ") || res.StructuredContent != nil {
				t.Fatalf("%s(%q): error result %v %q", tool.Name, args, res.Meta, first.Text)
			}
			if p.Code == mcpserver.CodeInternal || p.Status >= 500 {
				t.Fatalf("%s(%q): %s\n%s", tool.Name, args, first.Text, logs)
			}
			return
		}
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := outputs[i].Validate(v); err != nil {
			t.Fatalf("%s(%q): output does not match its schema: %v\n%s", tool.Name, args, err, raw)
		}
	})
}
