package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
)

// logged calls a tool that must succeed and logs the call and its text, so
// that -v prints the session as an agent saw it.
func logged(t *testing.T, b *bundle, tool string, args map[string]any, out any) string {
	t.Helper()
	raw, _ := json.Marshal(args)
	res := b.ok(t, tool, args, out)
	t.Logf("→ %s %s\n← %s", tool, raw, strings.TrimSpace(text(res)))
	return text(res)
}

// TestPointsAndForksSession: an agent's session through the tools: a
// checkpoint, a bad edit across several files, the diff that shows it and
// the restore that puts it back; then a fork, changes on both sides, a
// merge that stops at the one conflict and one that resolves it.
func TestPointsAndForksSession(t *testing.T) {
	t.Parallel()
	b := setup(t, config{subject: "session"})
	for _, f := range []string{"app/main.go", "app/util.go", "app/README.md"} {
		logged(t, b, "write_file", map[string]any{"path": f, "content": "package app // " + f + "\n"}, nil)
	}
	logged(t, b, "checkpoint", map[string]any{"name": "before-refactor", "path": "app"}, nil)
	for _, f := range []string{"app/main.go", "app/util.go"} {
		logged(t, b, "edit_file", map[string]any{"path": f, "edits": []any{map[string]any{"oldText": "package app", "newText": "package broken"}}}, nil)
	}
	logged(t, b, "delete_file", map[string]any{"path": "app/README.md"}, nil)
	var d struct {
		Changes []api.Change `json:"changes"`
	}
	logged(t, b, "diff", map[string]any{"from": "before-refactor", "path": "app"}, &d)
	if len(d.Changes) != 3 {
		t.Fatalf("the diff lists %d changes, want 3", len(d.Changes))
	}
	logged(t, b, "restore", map[string]any{"path": "app", "to": "before-refactor"}, nil)
	logged(t, b, "diff", map[string]any{"from": "before-refactor", "path": "app"}, &d)
	if len(d.Changes) != 0 || b.content(t, "app/main.go") != "package app // app/main.go\n" {
		t.Fatalf("after the restore: %d changes, main.go %q", len(d.Changes), b.content(t, "app/main.go"))
	}

	var fork api.Fork
	logged(t, b, "fork", map[string]any{"source": "app", "destination": "try"}, &fork)
	logged(t, b, "write_file", map[string]any{"path": "try/main.go", "content": "package app // the fork's main\n", "if_exists": "replace"}, nil)
	logged(t, b, "write_file", map[string]any{"path": "try/new.go", "content": "package app // new in the fork\n"}, nil)
	logged(t, b, "write_file", map[string]any{"path": "try/util.go", "content": "package app // the fork's util\n", "if_exists": "replace"}, nil)
	logged(t, b, "write_file", map[string]any{"path": "app/util.go", "content": "package app // the original's util\n", "if_exists": "replace"}, nil)
	logged(t, b, "merge", map[string]any{"fork_id": fork.ID, "dry_run": true}, nil)
	p, msg := b.fail(t, "merge", map[string]any{"fork_id": fork.ID}, "MERGE_CONFLICT")
	t.Logf("→ merge {\"fork_id\":%q}\n← %s", fork.ID, msg)
	if p.Code != "MERGE_CONFLICT" || !strings.Contains(msg, "app/util.go") || b.content(t, "app/main.go") != "package app // app/main.go\n" {
		t.Fatalf("a conflicted merge: %+v %q", p, msg)
	}
	var m api.Merge
	logged(t, b, "merge", map[string]any{"fork_id": fork.ID, "on_conflict": "target"}, &m)
	if len(m.Applied) != 2 || len(m.Conflicts) != 1 || b.content(t, "app/main.go") != "package app // the fork's main\n" ||
		b.content(t, "app/util.go") != "package app // the original's util\n" || b.content(t, "app/new.go") != "package app // new in the fork\n" {
		t.Fatalf("merge %+v", m)
	}
}

// TestForkAndMergeHeldToTheGrant: a token scoped to P/ forks within P/,
// cannot fork from or to outside it, and cannot merge a fork that reaches
// outside (it does not exist for it).
func TestForkAndMergeHeldToTheGrant(t *testing.T) {
	t.Parallel()
	root := setup(t, config{subject: "team"})
	root.ok(t, "write_file", map[string]any{"path": "Q/secret.txt", "content": "outside"}, nil)
	root.ok(t, "write_file", map[string]any{"path": "P/src/a.txt", "content": "inside"}, nil)
	var outside api.Fork
	root.ok(t, "fork", map[string]any{"source": "Q", "destination": "P/q-copy"}, &outside)
	p := connect(t, root.srv, config{subject: "team", prefixes: []string{"P/"}})
	var inside api.Fork
	p.ok(t, "fork", map[string]any{"source": "P/src", "destination": "P/dst"}, &inside)
	p.ok(t, "merge", map[string]any{"fork_id": inside.ID}, nil)
	p.fail(t, "fork", map[string]any{"source": "Q", "destination": "P/stolen"}, "FORBIDDEN")
	p.fail(t, "fork", map[string]any{"source": "P/src", "destination": "Q/leak"}, "FORBIDDEN")
	p.fail(t, "merge", map[string]any{"fork_id": outside.ID}, "NOT_FOUND")
	p.fail(t, "merge", map[string]any{"fork_id": outside.ID, "dry_run": true}, "NOT_FOUND")
	p.fail(t, "merge", map[string]any{"fork_id": inside.ID, "on_conflict": "maybe"}, "VALIDATION_FAILED")
}

// TestReadToolsAsOf: read_text_file, list_directory and directory_tree
// read a past point with as_of: the bytes a file had then, a file deleted
// since, and none of a file added since.
func TestReadToolsAsOf(t *testing.T) {
	t.Parallel()
	b := setup(t, config{subject: "asof"})
	b.ok(t, "write_file", map[string]any{"path": "d/a.txt", "content": "then"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "d/sub/gone.txt", "content": "gone later"}, nil)
	b.ok(t, "checkpoint", map[string]any{"name": "then"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "d/a.txt", "content": "now", "if_exists": "replace"}, nil)
	b.ok(t, "delete_file", map[string]any{"path": "d/sub/gone.txt"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "d/new.txt", "content": "new"}, nil)

	if got := text(b.ok(t, "read_text_file", map[string]any{"path": "d/a.txt", "as_of": "then"}, nil)); got != "then" {
		t.Fatalf("read_text_file as of then: %q", got)
	}
	if got := text(b.ok(t, "read_text_file", map[string]any{"path": "d/a.txt"}, nil)); got != "now" {
		t.Fatalf("read_text_file now: %q", got)
	}
	b.fail(t, "read_text_file", map[string]any{"path": "d/new.txt", "as_of": "then"}, "NOT_FOUND")
	b.fail(t, "read_text_file", map[string]any{"path": "d/a.txt", "as_of": "no-such-checkpoint"}, "NOT_FOUND")
	b.fail(t, "read_text_file", map[string]any{"path": "d/a.txt", "as_of": "2999-01-01T00:00:00Z"}, "VALIDATION_FAILED")
	if got := text(b.ok(t, "list_directory", map[string]any{"path": "d", "as_of": "then"}, nil)); got != "[FILE] a.txt\n[DIR] sub" {
		t.Fatalf("list_directory as of then: %q", got)
	}
	if got := text(b.ok(t, "list_directory", map[string]any{"path": "d"}, nil)); got != "[FILE] a.txt\n[FILE] new.txt" {
		t.Fatalf("list_directory now: %q", got)
	}
	var tree struct {
		Tree []struct {
			Name string `json:"name"`
		} `json:"tree"`
	}
	b.ok(t, "directory_tree", map[string]any{"path": "d", "as_of": "then"}, &tree)
	if len(tree.Tree) != 2 || tree.Tree[0].Name != "a.txt" || tree.Tree[1].Name != "sub" {
		t.Fatalf("directory_tree as of then: %+v", tree)
	}
}
