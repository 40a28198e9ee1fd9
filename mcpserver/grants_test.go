package mcpserver_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/mcpserver"
)

// TestScopedTokenThroughTheTools: a token scoped to P/ works in P/
// through the tools and finds nothing outside: writes outside are
// FORBIDDEN naming P/, reads and moves of what lies outside NOT_FOUND,
// listings show only P/. Run over both doors (stdio and /mcp).
func TestScopedTokenThroughTheTools(t *testing.T) {
	t.Parallel()
	root := setup(t, config{subject: "team"})
	root.ok(t, "write_file", map[string]any{"path": "Q/secret.txt", "content": "outside"}, nil)
	root.ok(t, "write_file", map[string]any{"path": "P-old/x.txt", "content": "sibling"}, nil)
	p := connect(t, root.srv, config{subject: "team", prefixes: []string{"P/"}})

	p.ok(t, "write_file", map[string]any{"path": "P/notes.md", "content": "hello"}, nil)
	if got := text(p.ok(t, "read_text_file", map[string]any{"path": "P/notes.md"}, nil)); got != "hello" {
		t.Fatalf("read back %q", got)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"write_file", map[string]any{"path": "Q/new.txt", "content": "x"}, "FORBIDDEN"},
		{"write_file", map[string]any{"path": "P-old/new.txt", "content": "x"}, "FORBIDDEN"},
		{"move_file", map[string]any{"source": "P/notes.md", "destination": "Q/notes.md"}, "FORBIDDEN"},
		{"read_text_file", map[string]any{"path": "Q/secret.txt"}, "NOT_FOUND"},
		{"read_text_file", map[string]any{"path": "P-old/x.txt"}, "NOT_FOUND"},
		{"edit_file", map[string]any{"path": "Q/secret.txt", "edits": []map[string]any{{"oldText": "outside", "newText": "mine"}}}, "NOT_FOUND"},
		{"get_file_info", map[string]any{"path": "P-old/x.txt"}, "NOT_FOUND"},
		{"delete_file", map[string]any{"path": "Q/secret.txt"}, "NOT_FOUND"},
		{"move_file", map[string]any{"source": "Q/secret.txt", "destination": "P/stolen.txt"}, "NOT_FOUND"},
	} {
		_, msg := p.fail(t, c.tool, c.args, c.code)
		if c.code == "FORBIDDEN" && !strings.Contains(msg, "P/") {
			t.Errorf("%s: %q does not name the allowed prefix", c.tool, msg)
		}
	}
	if got := text(p.ok(t, "read_multiple_files", map[string]any{"paths": []string{"P/notes.md", "Q/secret.txt", "P-old/x.txt"}}, nil)); !strings.Contains(got, "hello") ||
		strings.Contains(got, "outside") || strings.Contains(got, "sibling") {
		t.Fatalf("read_multiple_files through the scoped token: %s", got)
	}
	listing := text(p.ok(t, "directory_tree", map[string]any{"path": ""}, nil))
	if strings.Contains(listing, "secret") || strings.Contains(listing, "P-old") || !strings.Contains(listing, "notes.md") {
		t.Fatalf("the scoped token's tree: %s", listing)
	}
	// list_directory walks one level by delimiter: only P shows at the
	// root, and a folder outside is no folder at all.
	if got := text(p.ok(t, "list_directory", map[string]any{"path": ""}, nil)); got != "[DIR] P" {
		t.Fatalf("the scoped token's root: %q", got)
	}
	p.fail(t, "list_directory", map[string]any{"path": "Q"}, "NOT_FOUND")
	p.fail(t, "list_directory", map[string]any{"path": "P-old"}, "NOT_FOUND")
	// edit_file writes against the file it read, inside the grant.
	p.ok(t, "edit_file", map[string]any{"path": "P/notes.md", "edits": []map[string]any{{"oldText": "hello", "newText": "hello again"}}}, nil)
	if got := root.content(t, "P/notes.md"); got != "hello again" {
		t.Fatalf("edited %q", got)
	}
	if root.content(t, "Q/secret.txt") != "outside" {
		t.Fatal("a scoped token changed a file outside its folder")
	}
}

// TestToolsListShowsWhatTheScopesAllow: through the /mcp door a read-only
// token is offered only the tools that read. The stdio door, which does
// not know its token's grant, lists every tool (the server behind it
// checks each call).
func TestToolsListShowsWhatTheScopesAllow(t *testing.T) {
	t.Parallel()
	srv := setup(t, config{subject: "team"}).srv
	ro := connect(t, srv, config{subject: "team", scopes: []string{"read"}})
	res, err := ro.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	if !overDoor {
		if len(names) != len(mcpserver.ToolNames()) {
			t.Fatalf("the stdio door lists %v, want every tool", names)
		}
		return
	}
	for _, writes := range []string{"write_file", "edit_file", "delete_file", "move_file", "share_file", "revert_file", "restore_file"} {
		if slices.Contains(names, writes) {
			t.Errorf("a read-only token is offered %s", writes)
		}
	}
	if !slices.Contains(names, "read_text_file") || !slices.Contains(names, "list_directory") {
		t.Fatalf("a read-only token is not offered the reads: %v", names)
	}
}
