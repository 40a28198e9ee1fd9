// Package mcptest walks every MCP tool with a token of given scopes and
// holds each answer to agentfs's one operation table: the tests of both
// doors (the /mcp door of the API server and the stdio door, `agentfs
// mcp`) run the same walk.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mcpserver"
)

// Call calls one tool as a client of a door does: its result, or its
// protocol error.
type Call func(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error)

// Fixture is what one walk acts on: files under Dir, a deleted file, and a
// run that wrote them. Each walk needs its own.
type Fixture struct {
	Dir       string
	DeletedID string
	RunID     string
	// ForkID is a fork of Dir-fsrc to Dir-fdst, for the merge tool.
	ForkID string
	// FullUpload is an upload session with all its parts in, for
	// complete_upload; OpenUpload one with none, for abort_upload.
	FullUpload, OpenUpload string
}

// Prepare makes a walk's fixture under dir through c, a client whose token
// may read and write and whose requests carry the run id runID.
func Prepare(t testing.TB, c *client.Client, dir, runID string) Fixture {
	t.Helper()
	ctx := context.Background()
	put := func(name, content string, replace bool) *client.File {
		t.Helper()
		f, err := c.PutFile(ctx, dir+"/"+name, bytes.NewReader([]byte(content)),
			client.PutOptions{ContentType: "text/plain; charset=utf-8", Replace: replace})
		if err != nil {
			t.Fatalf("put %s/%s: %v", dir, name, err)
		}
		return f
	}
	for _, name := range []string{"a.txt", "b.txt", "del.txt", "mv.txt"} {
		put(name, "content of "+name, false)
	}
	put("edit.txt", "before", false)
	put("rev.txt", "version one", false)
	put("rev.txt", "version two", true)
	gone := put("gone.txt", "deleted before the walk", false)
	if _, err := c.DeleteFile(ctx, gone.ID, client.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", gone.ID, err)
	}
	if _, err := c.PutFile(ctx, dir+"-fsrc/f.txt", bytes.NewReader([]byte("forked")), client.PutOptions{}); err != nil {
		t.Fatalf("put %s-fsrc/f.txt: %v", dir, err)
	}
	fork, err := c.CreateFork(ctx, dir+"-fsrc/", dir+"-fdst/", client.ForkOptions{})
	if err != nil {
		t.Fatalf("fork %s-fsrc: %v", dir, err)
	}
	full, err := c.CreateUpload(ctx, dir+"/up-full.txt", 5, client.CreateUploadOptions{})
	if err != nil {
		t.Fatalf("upload %s/up-full.txt: %v", dir, err)
	}
	if _, err := c.PutPart(ctx, full.ID, 1, bytes.NewReader([]byte("whole")), 5, client.PartOptions{}); err != nil {
		t.Fatalf("part of %s: %v", full.ID, err)
	}
	open, err := c.CreateUpload(ctx, dir+"/up-open.txt", 5, client.CreateUploadOptions{})
	if err != nil {
		t.Fatalf("upload %s/up-open.txt: %v", dir, err)
	}
	return Fixture{Dir: dir, DeletedID: gone.ID, RunID: runID, ForkID: fork.ID, FullUpload: full.ID, OpenUpload: open.ID}
}

// step is one tool call of the walk.
type step struct {
	tool string
	args map[string]any
}

// steps are one call of every tool, each with arguments that succeed for a
// token that may do everything, in an order that leaves each call's
// target in place.
func (fx Fixture) steps() []step {
	p := func(name string) string { return fx.Dir + "/" + name }
	return []step{
		{"read_text_file", map[string]any{"path": p("a.txt")}},
		{"read_media_file", map[string]any{"path": p("a.txt")}},
		{"read_multiple_files", map[string]any{"paths": []string{p("a.txt"), p("b.txt")}}},
		{"list_directory", map[string]any{"path": fx.Dir}},
		{"directory_tree", map[string]any{"path": fx.Dir}},
		{"search_files", map[string]any{"path": fx.Dir, "pattern": "*.txt"}},
		{"grep_files", map[string]any{"path": fx.Dir, "pattern": "[a-z]+"}},
		{"get_file_info", map[string]any{"path": p("a.txt")}},
		{"list_run_files", map[string]any{"run_id": fx.RunID}},
		{"file_history", map[string]any{"path": p("rev.txt")}},
		{"run_summary", map[string]any{"run_id": fx.RunID}},
		{"run_recovery", map[string]any{"run_id": fx.RunID}},
		{"write_file", map[string]any{"path": p("new.txt"), "content": "new"}},
		{"edit_file", map[string]any{"path": p("edit.txt"), "edits": []any{map[string]any{"oldText": "before", "newText": "after"}}}},
		{"delete_file", map[string]any{"path": p("del.txt")}},
		{"restore_file", map[string]any{"file_id": fx.DeletedID}},
		{"move_file", map[string]any{"source": p("mv.txt"), "destination": p("moved.txt")}},
		{"revert_file", map[string]any{"path": p("rev.txt"), "version": 1}},
		{"share_file", map[string]any{"path": p("a.txt")}},
		{"checkpoint", map[string]any{"path": fx.Dir, "note": "the walk"}},
		{"list_checkpoints", map[string]any{"path": fx.Dir}},
		{"diff", map[string]any{"from": "now", "path": fx.Dir}},
		{"restore", map[string]any{"path": fx.Dir, "to": "now", "dry_run": true}},
		{"fork", map[string]any{"source": fx.Dir + "-fsrc", "destination": fx.Dir + "-fcopy"}},
		{"merge", map[string]any{"fork_id": fx.ForkID, "dry_run": true}},
		{"complete_upload", map[string]any{"upload_id": fx.FullUpload}},
		{"abort_upload", map[string]any{"upload_id": fx.OpenUpload}},
	}
}

// Walk calls every tool once with a token of scopes and checks each answer
// against the operation table (agentfs.ScopesFor of each operation
// mcpserver.ToolOperations names): a tool that needs a scope the token
// lacks answers a tool error FORBIDDEN whose missing_scope is one it
// lacks and whose text names it; every other tool succeeds.
func Walk(t *testing.T, fx Fixture, scopes []string, call Call) {
	t.Helper()
	steps := fx.steps()
	var walked []string
	for _, s := range steps {
		walked = append(walked, s.tool)
	}
	tools := mcpserver.ToolNames()
	slices.Sort(walked)
	slices.Sort(tools)
	if !slices.Equal(walked, tools) {
		t.Fatalf("the walk calls %v, the tools are %v", walked, tools)
	}
	for _, s := range steps {
		missing := lacking(t, s.tool, scopes)
		res, err := call(context.Background(), s.tool, s.args)
		if err != nil {
			t.Errorf("%s with scopes %v: protocol error %v", s.tool, scopes, err)
			continue
		}
		check(t, s.tool, scopes, missing, res)
	}
}

// lacking is the scopes tool needs that a token of scopes lacks.
func lacking(t *testing.T, tool string, scopes []string) []string {
	t.Helper()
	scopes = agentfs.RootScopes(scopes) // the walk's tokens are root tokens
	ops := mcpserver.ToolOperations(tool)
	if len(ops) == 0 {
		t.Fatalf("%s names no operation", tool)
	}
	var missing []string
	for _, op := range ops {
		need, ok := agentfs.ScopesFor(op)
		if !ok {
			t.Fatalf("%s names %s, which the operation table does not know", tool, op)
		}
		for _, s := range need {
			if !slices.Contains(scopes, s) && !slices.Contains(missing, s) {
				missing = append(missing, s)
			}
		}
	}
	return missing
}

// check holds one answer to what the table says of it.
func check(t *testing.T, tool string, scopes, missing []string, res *mcp.CallToolResult) {
	t.Helper()
	msg := Text(res)
	if len(missing) == 0 {
		if res.IsError {
			t.Errorf("%s with scopes %v: %s, want success", tool, scopes, msg)
		}
		return
	}
	var p mcpserver.Problem
	raw, _ := json.Marshal(res.Meta[mcpserver.ProblemMeta])
	_ = json.Unmarshal(raw, &p)
	switch {
	case !res.IsError || p.Code != "FORBIDDEN" || !strings.HasPrefix(msg, "FORBIDDEN: "):
		t.Errorf("%s with scopes %v (lacking %v): %s, want FORBIDDEN", tool, scopes, missing, msg)
	case !slices.Contains(missing, p.MissingScope):
		t.Errorf("%s with scopes %v: missing_scope %q, want one of %v", tool, scopes, p.MissingScope, missing)
	case !strings.Contains(msg, "lacks the "+p.MissingScope+" scope") || strings.Contains(msg, "may only read"):
		t.Errorf("%s with scopes %v: the text does not say the %s scope is missing: %s", tool, scopes, p.MissingScope, msg)
	}
}

// Text joins a tool result's text blocks, one a line.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
