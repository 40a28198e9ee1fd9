package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/agentfs/agentfs/mcpserver"
)

// TestGrepFiles greps through the tool, edits what it found with
// edit_file, and greps again: the edit is found at once, the old text no
// more.
func TestGrepFiles(t *testing.T) {
	b := setup(t, config{})
	b.ok(t, "write_file", map[string]any{"path": "src/main.go", "content": "package main\n\nfunc oldName() {}\n\nfunc main() { oldName() }\n"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "docs/readme.md", "content": "call oldName first\n"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "src/blob.bin", "content": "oldName\u0000"}, nil)

	var r mcpserver.GrepResult
	res := b.ok(t, "grep_files", map[string]any{"pattern": `oldName\(`}, &r)
	want := "src/main.go:3:func oldName() {}\nsrc/main.go:5:func main() { oldName() }\n[1 files matched, 1 searched; skipped 1 binary and 0 too large]"
	if got := text(res); got != want {
		t.Fatalf("grep text:\n%s\nwant:\n%s", got, want)
	}
	if r.Pattern != `oldName\(` || len(r.Data) != 2 || r.Data[0].Column != 6 || r.FilesMatched != 1 || r.FilesSkipped.Binary != 1 || !r.IndexComplete {
		t.Fatalf("structured result %+v", r)
	}

	res = b.ok(t, "grep_files", map[string]any{"pattern": "oldname", "ignore_case": true, "path": "/src", "glob": "*.go", "context": 1}, nil)
	want = "src/main.go-2-\nsrc/main.go:3:func oldName() {}\nsrc/main.go-4-\nsrc/main.go:5:func main() { oldName() }\n[1 files matched, 1 searched]"
	if got := text(res); got != want {
		t.Fatalf("grep with context:\n%s\nwant:\n%s", got, want)
	}

	b.ok(t, "edit_file", map[string]any{"path": "src/main.go", "edits": []any{
		map[string]any{"oldText": "func oldName() {}", "newText": "func newName() {}"},
		map[string]any{"oldText": "{ oldName() }", "newText": "{ newName() }"}}}, nil)
	res = b.ok(t, "grep_files", map[string]any{"pattern": "oldName", "literal": true}, nil)
	if got := text(res); !strings.HasPrefix(got, "docs/readme.md:1:call oldName first\n[1 files matched") {
		t.Fatalf("after the edit, grep oldName:\n%s", got)
	}
	res = b.ok(t, "grep_files", map[string]any{"pattern": "newName"}, nil)
	if got := text(res); !strings.HasPrefix(got, "src/main.go:3:func newName() {}\nsrc/main.go:5:func main() { newName() }\n") {
		t.Fatalf("after the edit, grep newName:\n%s", got)
	}

	t.Run("PagesWithACursor", func(t *testing.T) {
		var first mcpserver.GrepResult
		res := b.ok(t, "grep_files", map[string]any{"pattern": "Name", "max_results": 1}, &first)
		if !first.HasMore || first.NextCursor == nil || !strings.Contains(text(res), "cursor=") {
			t.Fatalf("first page %+v: %s", first, text(res))
		}
		var second mcpserver.GrepResult
		b.ok(t, "grep_files", map[string]any{"pattern": "Name", "max_results": 1, "cursor": *first.NextCursor}, &second)
		if len(second.Data) != 1 || second.Data[0].Path != "src/main.go" || second.Data[0].Line != 3 {
			t.Fatalf("second page %+v", second.Data)
		}
	})

	t.Run("BadPatternsAreToolErrors", func(t *testing.T) {
		_, msg := b.fail(t, "grep_files", map[string]any{"pattern": "a(b"}, "VALIDATION_FAILED")
		if !strings.Contains(msg, "q") && !strings.Contains(msg, "pattern") {
			t.Fatalf("message %s", msg)
		}
		b.fail(t, "grep_files", map[string]any{"pattern": "x", "glob": "../*"}, "VALIDATION_FAILED")
		// Outside the input schema: a tool error naming the argument,
		// before the tool runs, as for every tool.
		if _, msg := b.fail(t, "grep_files", map[string]any{"pattern": "x", "context": 1000}, "VALIDATION_FAILED"); !strings.Contains(msg, "context") {
			t.Fatalf("context 1000: message %s does not name the argument", msg)
		}
		if _, msg := b.fail(t, "grep_files", map[string]any{"pattern": ""}, "VALIDATION_FAILED"); !strings.Contains(msg, "pattern") {
			t.Fatalf("an empty pattern: message %s does not name the argument", msg)
		}
	})
}
