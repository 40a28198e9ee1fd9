package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/mcpserver/mcptest"
)

func TestListTools(t *testing.T) {
	b := setup(t, config{})
	want := []string{"read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
		"list_directory", "directory_tree", "search_files", "get_file_info", "delete_file", "restore_file", "list_run_files",
		"move_file", "file_history", "revert_file", "share_file", "run_summary", "grep_files",
		"checkpoint", "list_checkpoints", "diff", "restore", "fork", "merge", "run_recovery",
		"complete_upload", "abort_upload"}
	if len(want) != 27 {
		t.Fatalf("%d tools expected", len(want))
	}
	var got []string
	for name := range b.tools {
		got = append(got, name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	names := mcpserver.ToolNames()
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("ToolNames %v, want %v", names, want)
	}
	readOnly := map[string]bool{"read_text_file": true, "read_media_file": true, "read_multiple_files": true,
		"list_directory": true, "directory_tree": true, "search_files": true, "get_file_info": true, "list_run_files": true,
		"file_history": true, "run_summary": true, "grep_files": true, "list_checkpoints": true, "diff": true, "run_recovery": true}
	destructive := map[string]bool{"write_file": true, "edit_file": true, "delete_file": true, "revert_file": true, "restore": true, "merge": true,
		"complete_upload": true, "abort_upload": true}
	idempotent := map[string]bool{"write_file": true, "delete_file": true, "restore_file": true, "revert_file": true,
		"complete_upload": true, "abort_upload": true}
	for name, tool := range b.tools {
		t.Run(name, func(t *testing.T) {
			a := tool.Annotations
			if a == nil || a.Title == "" {
				t.Fatalf("no annotations: %+v", a)
			}
			if a.ReadOnlyHint != readOnly[name] {
				t.Errorf("readOnlyHint %v", a.ReadOnlyHint)
			}
			if !readOnly[name] {
				if a.DestructiveHint == nil || *a.DestructiveHint != destructive[name] {
					t.Errorf("destructiveHint %v, want %v", a.DestructiveHint, destructive[name])
				}
				if a.IdempotentHint != idempotent[name] {
					t.Errorf("idempotentHint %v, want %v", a.IdempotentHint, idempotent[name])
				}
			}
			if a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("openWorldHint %v, want false", a.OpenWorldHint)
			}
			words := strings.Fields(tool.Description)
			if len(words) < 12 || len(tool.Description) > 400 {
				t.Errorf("description of %d words, %d bytes: %q", len(words), len(tool.Description), tool.Description)
			}
			var in map[string]any
			remarshal(t, tool.InputSchema, &in)
			if in["type"] != "object" || in["properties"] == nil || in["additionalProperties"] == nil {
				t.Errorf("input schema %v", in)
			}
			for prop, s := range in["properties"].(map[string]any) {
				if s.(map[string]any)["description"] == nil {
					t.Errorf("input property %s has no description", prop)
				}
			}
			if b.out[name] == nil {
				t.Errorf("no output schema")
			}
		})
	}
}

// TestSchemasArePortable: as clients see them (tools/list), no schema of a
// tool gives "type" as an array (["null", T] is legal JSON Schema, but
// clients that map schemas onto one type per schema refuse or weaken it;
// the Inspector warns of each), and every required argument has a plain
// type. A nullable output member says so with anyOf branches of one type.
func TestSchemasArePortable(t *testing.T) {
	b := setup(t, config{})
	for name, tool := range b.tools {
		var in, out map[string]any
		remarshal(t, tool.InputSchema, &in)
		remarshal(t, tool.OutputSchema, &out)
		for where, s := range map[string]map[string]any{"inputSchema": in, "outputSchema": out} {
			walkJSON(where, s, func(at string, node map[string]any) {
				if _, isArray := node["type"].([]any); isArray {
					t.Errorf("%s %s: type %v is an array", name, at, node["type"])
				}
			})
		}
		props, _ := in["properties"].(map[string]any)
		required, _ := in["required"].([]any)
		for _, r := range required {
			p, _ := props[r.(string)].(map[string]any)
			if _, plain := p["type"].(string); !plain {
				t.Errorf("%s: required argument %s has no plain type: %v", name, r, p)
			}
		}
	}
	// A member that may be null still validates null: deleted_at of a live
	// file.
	var info map[string]any
	b.ok(t, "write_file", map[string]any{"path": "portable.txt", "content": "x"}, &info)
	if _, ok := info["deleted_at"]; !ok || info["deleted_at"] != nil {
		t.Fatalf("deleted_at of a live file: %v", info)
	}
}

// walkJSON calls f on every object of a JSON value, with its JSON path.
func walkJSON(at string, v any, f func(at string, node map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(at, v)
		for k, sub := range v {
			walkJSON(at+"."+k, sub, f)
		}
	case []any:
		for i, sub := range v {
			walkJSON(fmt.Sprintf("%s[%d]", at, i), sub, f)
		}
	}
}

func TestWriteAndReadText(t *testing.T) {
	b := setup(t, config{agentID: "agent-7", runID: "run-42"})

	t.Run("CreatesReadsAndRefusesToOverwrite", func(t *testing.T) {
		var f mcpserver.File
		res := b.ok(t, "write_file", map[string]any{"path": "/notes/a.md", "content": "one\ntwo\nthree\n"}, &f)
		if f.Path != "notes/a.md" || f.Version != 1 || f.SizeBytes != 14 || f.ContentType != "text/markdown; charset=utf-8" ||
			f.RunID == nil || *f.RunID != "run-42" || f.AgentID == nil || *f.AgentID != "agent-7" {
			t.Fatalf("written file %+v", f)
		}
		if !strings.HasPrefix(text(res), "Wrote notes/a.md: "+f.ID) {
			t.Fatalf("text %q", text(res))
		}
		var tf mcpserver.TextFile
		res = b.ok(t, "read_text_file", map[string]any{"path": "notes/a.md"}, &tf)
		if text(res) != "one\ntwo\nthree\n" || tf.Content != "one\ntwo\nthree\n" || tf.Truncated || tf.ETag != f.ETag || tf.SizeBytes != 14 {
			t.Fatalf("read %q %+v", text(res), tf)
		}
		p, msg := b.fail(t, "write_file", map[string]any{"path": "notes/a.md", "content": "other"}, "PATH_EXISTS")
		if p.ExistingFileID != f.ID || !strings.HasPrefix(msg, "PATH_EXISTS: notes/a.md already exists ("+f.ID+").") ||
			!strings.Contains(msg, `if_exists="replace"`) || p.Retryable {
			t.Fatalf("problem %+v\n%s", p, msg)
		}
	})

	t.Run("HeadAndTail", func(t *testing.T) {
		b.ok(t, "write_file", map[string]any{"path": "lines.txt", "content": "l1\nl2\nl3\nl4\nl5\n"}, nil)
		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"head": 2}, "l1\nl2"},
			{map[string]any{"tail": 2}, "l4\nl5"},
			{map[string]any{"head": 9}, "l1\nl2\nl3\nl4\nl5\n"},
			{map[string]any{"tail": 9}, "l1\nl2\nl3\nl4\nl5"},
			{map[string]any{"tail": 1}, "l5"},
		} {
			c.args["path"] = "lines.txt"
			res := b.ok(t, "read_text_file", c.args, nil)
			if text(res) != c.want {
				t.Errorf("%v: %q, want %q", c.args, text(res), c.want)
			}
		}
		b.fail(t, "read_text_file", map[string]any{"path": "lines.txt", "head": 1, "tail": 1}, "VALIDATION_FAILED")
	})

	t.Run("ReplacesOnlyTheVersionItSaw", func(t *testing.T) {
		var first, second mcpserver.File
		b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "v1"}, &first)
		b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "v2", "if_exists": "replace"}, &second)
		if second.ID != first.ID || second.Version != 2 {
			t.Fatalf("replace: %+v after %+v", second, first)
		}
		_, msg := b.fail(t, "write_file", map[string]any{"path": "doc.txt", "content": "v3", "expected_etag": first.ETag}, "PRECONDITION_FAILED")
		if !strings.Contains(msg, "Read the file again") {
			t.Fatalf("text %s", msg)
		}
		var third mcpserver.File
		unquoted := strings.Trim(second.ETag, `"`)
		b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "v3", "expected_etag": unquoted}, &third)
		if third.Version != 3 || b.content(t, "doc.txt") != "v3" {
			t.Fatalf("conditional replace: %+v", third)
		}
		b.fail(t, "write_file", map[string]any{"path": "doc.txt", "content": "v4", "expected_etag": third.ETag, "if_exists": "error"}, "VALIDATION_FAILED")
	})

	t.Run("MissingFileAndBadPaths", func(t *testing.T) {
		_, msg := b.fail(t, "read_text_file", map[string]any{"path": "nope/none.md"}, "NOT_FOUND")
		if !strings.Contains(msg, "no live file at nope/none.md") || !strings.Contains(msg, "list_directory") {
			t.Fatalf("text %s", msg)
		}
		for _, bad := range []string{"", "a//b", "../etc/passwd", "a\\b", "a/./b", "//x", "x\x01y", strings.Repeat("a", 1025)} {
			b.fail(t, "read_text_file", map[string]any{"path": bad}, "INVALID_PATH")
			b.fail(t, "write_file", map[string]any{"path": bad, "content": "x"}, "INVALID_PATH")
		}
		b.fail(t, "get_file_info", map[string]any{"path": "nope.md"}, "NOT_FOUND")
		b.fail(t, "delete_file", map[string]any{"path": "nope.md"}, "NOT_FOUND")
		b.fail(t, "edit_file", map[string]any{"path": "nope.md", "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}, "NOT_FOUND")
	})

	t.Run("ExpiresIn", func(t *testing.T) {
		var f mcpserver.File
		res := b.ok(t, "write_file", map[string]any{"path": "exp.txt", "content": "scratch", "expires_in": 3600}, &f)
		// The server sets expires_at and updated_at from one clock reading.
		if f.ExpiresAt == nil || f.ExpiresAt.Sub(f.UpdatedAt) != time.Hour {
			t.Fatalf("expires_at %v, updated_at %v", f.ExpiresAt, f.UpdatedAt)
		}
		if !strings.Contains(text(res), "It expires at "+f.ExpiresAt.Format(time.RFC3339)) {
			t.Fatalf("text %s", text(res))
		}
		live := b.liveFiles(t, "exp.txt")
		if len(live) != 1 || live[0].ExpiresAt == nil || !live[0].ExpiresAt.Equal(*f.ExpiresAt) {
			t.Fatalf("stored %+v", live)
		}
		var info mcpserver.FileInfo
		res = b.ok(t, "get_file_info", map[string]any{"path": "exp.txt"}, &info)
		if info.File.ExpiresAt == nil || !strings.Contains(text(res), "expires_at: "+f.ExpiresAt.Format(time.RFC3339)) {
			t.Fatalf("info %s", text(res))
		}
		var kept, renewed mcpserver.File
		b.ok(t, "write_file", map[string]any{"path": "exp.txt", "content": "scratch 2", "if_exists": "replace"}, &kept)
		if kept.ExpiresAt == nil || !kept.ExpiresAt.Equal(*f.ExpiresAt) {
			t.Fatalf("a replace without expires_in changed expires_at: %v, was %v", kept.ExpiresAt, f.ExpiresAt)
		}
		b.ok(t, "write_file", map[string]any{"path": "exp.txt", "content": "scratch 3", "if_exists": "replace", "expires_in": 60}, &renewed)
		if renewed.ExpiresAt == nil || renewed.ExpiresAt.Sub(renewed.UpdatedAt) != time.Minute {
			t.Fatalf("expires_in 60 on a replace: %v, updated %v", renewed.ExpiresAt, renewed.UpdatedAt)
		}
		var plain mcpserver.File
		res = b.ok(t, "write_file", map[string]any{"path": "no-exp.txt", "content": "x"}, &plain)
		if plain.ExpiresAt != nil || strings.Contains(text(res), "expires") {
			t.Fatalf("a file without expires_in: %+v %s", plain, text(res))
		}
	})
}

func TestReadLimits(t *testing.T) {
	b := setup(t, config{opts: mcpserver.Options{MaxReadBytes: 1024, MaxMediaBytes: 1024, MaxWriteBytes: 2048}})
	var long strings.Builder
	for i := 1; long.Len() < 1800; i++ {
		fmt.Fprintf(&long, "line %04d\n", i) // 10 bytes a line
	}
	b.ok(t, "write_file", map[string]any{"path": "big.log", "content": long.String()}, nil)

	t.Run("CutsLongTextWithANote", func(t *testing.T) {
		var tf mcpserver.TextFile
		res := b.ok(t, "read_text_file", map[string]any{"path": "big.log"}, &tf)
		if !tf.Truncated || len(tf.Content) != 1024 || tf.Start != 0 || tf.End != 1024 || tf.SizeBytes != int64(long.Len()) {
			t.Fatalf("read %+v", tf)
		}
		if !strings.Contains(text(res), "[Truncated: big.log is 1800 bytes") || !strings.Contains(tf.Note, "tail=N") ||
			!strings.Contains(tf.Note, "share_file") {
			t.Fatalf("note %q", tf.Note)
		}
		b.ok(t, "read_text_file", map[string]any{"path": "big.log", "tail": 3}, &tf)
		if tf.Content != "line 0178\nline 0179\nline 0180" || tf.Truncated {
			t.Fatalf("tail %+v", tf)
		}
		b.ok(t, "read_text_file", map[string]any{"path": "big.log", "tail": 500}, &tf)
		if !tf.Truncated || !strings.HasPrefix(tf.Content, "line 0") || strings.Count(tf.Content, "\n") != 101 || tf.End != 1800 {
			t.Fatalf("long tail %+v", tf)
		}
		b.ok(t, "read_text_file", map[string]any{"path": "big.log", "head": 500}, &tf)
		if !tf.Truncated || !strings.HasPrefix(tf.Content, "line 0001\n") || len(tf.Content) != 1024 {
			t.Fatalf("long head %+v", tf)
		}
	})

	t.Run("CutsAtACharacterBoundary", func(t *testing.T) {
		s := strings.Repeat("é", 700) // 1400 bytes: byte 1024 is inside no character (even), so add one byte
		b.ok(t, "write_file", map[string]any{"path": "accents.txt", "content": "x" + s}, nil)
		var tf mcpserver.TextFile
		b.ok(t, "read_text_file", map[string]any{"path": "accents.txt"}, &tf)
		if len(tf.Content) != 1023 || !tf.Truncated || tf.End != 1023 {
			t.Fatalf("read %d bytes, end %d", len(tf.Content), tf.End)
		}
		b.ok(t, "read_text_file", map[string]any{"path": "accents.txt", "tail": 1}, &tf)
		if len(tf.Content) != 1024 || tf.Start != 377 || !tf.Truncated {
			t.Fatalf("tail %d bytes from %d", len(tf.Content), tf.Start)
		}
	})

	t.Run("RefusesBinaryAsText", func(t *testing.T) {
		b.put(t, "img.bin", []byte{0x89, 'P', 'N', 'G', 0xff, 0xfe, 0, 1}, "application/octet-stream")
		_, msg := b.fail(t, "read_text_file", map[string]any{"path": "img.bin"}, "UNSUPPORTED_MEDIA_TYPE")
		if !strings.Contains(msg, "read_media_file") || !strings.Contains(msg, "share_file") {
			t.Fatalf("text %s", msg)
		}
		var mf mcpserver.MultipleFiles
		b.ok(t, "read_multiple_files", map[string]any{"paths": []string{"img.bin"}}, &mf)
		if mf.Files[0].Error == nil || mf.Files[0].Error.Code != "UNSUPPORTED_MEDIA_TYPE" {
			t.Fatalf("files %+v", mf)
		}
		b.put(t, "zeros.txt", make([]byte, 10), "text/plain")
		b.fail(t, "read_text_file", map[string]any{"path": "zeros.txt"}, "UNSUPPORTED_MEDIA_TYPE")
	})

	t.Run("RefusesHugeWrites", func(t *testing.T) {
		_, msg := b.fail(t, "write_file", map[string]any{"path": "huge.txt", "content": strings.Repeat("x", 2049)}, "PAYLOAD_TOO_LARGE")
		if !strings.Contains(msg, "at most 2048 bytes") || len(b.liveFiles(t, "huge.txt")) != 0 {
			t.Fatalf("text %s", msg)
		}
		b.put(t, "huge.md", []byte(strings.Repeat("y", 3000)), "text/markdown")
		b.fail(t, "edit_file", map[string]any{"path": "huge.md", "edits": []any{map[string]any{"oldText": "y", "newText": "z"}}}, "PAYLOAD_TOO_LARGE")
	})

	t.Run("ReadsMultipleWithinOneBudget", func(t *testing.T) {
		b.ok(t, "write_file", map[string]any{"path": "m/1.txt", "content": "first"}, nil)
		var mf mcpserver.MultipleFiles
		res := b.ok(t, "read_multiple_files", map[string]any{"paths": []string{"m/1.txt", "/m/missing.txt", "../bad", "big.log", "m/1.txt"}}, &mf)
		f := mf.Files
		if len(f) != 5 || f[0].Content != "first" || f[1].Error == nil || f[1].Error.Code != "NOT_FOUND" ||
			f[2].Error == nil || f[2].Error.Code != "INVALID_PATH" || !f[3].Truncated || len(f[3].Content) != 1024-5 ||
			!f[4].Truncated || f[4].Content != "" || !strings.Contains(f[4].Note, "Not read") {
			t.Fatalf("files %s", mustJSON(mf))
		}
		if !strings.Contains(text(res), "m/missing.txt: Error - NOT_FOUND: ") || !strings.Contains(text(res), "m/1.txt:\nfirst") {
			t.Fatalf("text %s", text(res))
		}
	})
}

func TestReadMediaFile(t *testing.T) {
	b := setup(t, config{opts: mcpserver.Options{MaxMediaBytes: 2048}})
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	b.put(t, "charts/loss.png", png, "image/png")
	b.put(t, "sniffed", png, "application/octet-stream")
	b.put(t, "sound.wav", []byte("RIFF....WAVEfmt "), "audio/wav")
	b.put(t, "data.parquet", []byte("PAR1\x00\x01"), "application/vnd.apache.parquet")
	b.put(t, "big.png", make([]byte, 1537), "image/png")

	for _, c := range []struct {
		path, typ, mime string
		data            []byte
	}{
		{"charts/loss.png", "image", "image/png", png},
		{"sniffed", "image", "image/png", png},
		{"sound.wav", "audio", "audio/wav", []byte("RIFF....WAVEfmt ")},
		{"data.parquet", "blob", "application/vnd.apache.parquet", []byte("PAR1\x00\x01")},
	} {
		var mf mcpserver.MediaFile
		res := b.ok(t, "read_media_file", map[string]any{"path": c.path}, &mf)
		if mf.Type != c.typ || mf.MIMEType != c.mime || mf.SizeBytes != int64(len(c.data)) {
			t.Fatalf("%s: %+v", c.path, mf)
		}
		var got []byte
		switch blk := res.Content[1].(type) {
		case *mcp.ImageContent:
			got = blk.Data
		case *mcp.AudioContent:
			got = blk.Data
		case *mcp.EmbeddedResource:
			got = blk.Resource.Blob
		}
		if string(got) != string(c.data) {
			t.Fatalf("%s: content %T %q", c.path, res.Content[1], got)
		}
	}
	_, msg := b.fail(t, "read_media_file", map[string]any{"path": "big.png"}, "PAYLOAD_TOO_LARGE")
	if !strings.Contains(msg, "2052 bytes as base64, above the limit of 2048") {
		t.Fatalf("text %s", msg)
	}
	b.fail(t, "read_media_file", map[string]any{"path": "none.png"}, "NOT_FOUND")
}

func TestEditFile(t *testing.T) {
	b := setup(t, config{})
	base := "# Title\n\nalpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n"
	var orig mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "doc.md", "content": base}, &orig)
	edit := func(old, repl string) map[string]any { return map[string]any{"oldText": old, "newText": repl} }

	t.Run("DryRunShowsTheDiffAndWritesNothing", func(t *testing.T) {
		var r mcpserver.EditResult
		res := b.ok(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("beta\n", "BETA\nbeta2\n")}, "dryRun": true}, &r)
		want := "--- doc.md\toriginal\n+++ doc.md\tmodified\n@@ -1,7 +1,8 @@\n # Title\n \n alpha\n-beta\n+BETA\n+beta2\n gamma\n delta\n epsilon\n"
		if r.Diff != want || !r.DryRun || r.File != nil {
			t.Fatalf("diff:\n%s\nwant:\n%s", r.Diff, want)
		}
		if !strings.Contains(text(res), "```diff\n"+want+"```") || b.content(t, "doc.md") != base {
			t.Fatalf("text %s", text(res))
		}
	})

	t.Run("AppliesEditsInOrderAsAConditionalReplace", func(t *testing.T) {
		var r mcpserver.EditResult
		b.ok(t, "edit_file", map[string]any{"path": "/doc.md", "edits": []any{edit("alpha", "ALPHA"), edit("ALPHA\nbeta", "AB"), edit("theta\n", "")}}, &r)
		want := "# Title\n\nAB\ngamma\ndelta\nepsilon\nzeta\neta\n"
		if got := b.content(t, "doc.md"); got != want {
			t.Fatalf("content %q, want %q", got, want)
		}
		if r.File == nil || r.File.ID != orig.ID || r.File.Version != 2 || r.DryRun || r.Replayed {
			t.Fatalf("result %+v", r)
		}
		if !strings.Contains(r.Diff, "-alpha\n-beta\n+AB\n") || !strings.Contains(r.Diff, "-theta\n") {
			t.Fatalf("diff %s", r.Diff)
		}
	})

	t.Run("RefusesAbsentAndAmbiguousText", func(t *testing.T) {
		before := b.content(t, "doc.md")
		p, msg := b.fail(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("gamma", "G"), edit("no such text", "x")}}, "VALIDATION_FAILED")
		if p.Errors[0].Field != "edits[1].oldText" || !strings.Contains(msg, "does not occur in doc.md as the 1 edit(s) before it left it") {
			t.Fatalf("problem %+v\n%s", p, msg)
		}
		_, msg = b.fail(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("eta\n", "x")}}, "VALIDATION_FAILED")
		if !strings.Contains(msg, "occurs 2 times in doc.md") || !strings.Contains(msg, "surrounding lines") {
			t.Fatalf("text %s", msg)
		}
		_, msg = b.fail(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("gamma   delta", "x")}}, "VALIDATION_FAILED")
		if !strings.Contains(msg, "different whitespace") {
			t.Fatalf("text %s", msg)
		}
		if b.content(t, "doc.md") != before {
			t.Fatal("a failed edit wrote")
		}
		b.badArgs(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("", "x")}}, "edits[0].oldText")
		b.badArgs(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{}}, "edits")
	})

	t.Run("NoChangeWritesNothing", func(t *testing.T) {
		var r mcpserver.EditResult
		res := b.ok(t, "edit_file", map[string]any{"path": "doc.md", "edits": []any{edit("AB", "AB")}}, &r)
		if r.File != nil || r.Diff != "" || !strings.HasPrefix(text(res), "No change") {
			t.Fatalf("result %+v", r)
		}
	})

	t.Run("KeepsCRLF", func(t *testing.T) {
		b.put(t, "win.txt", []byte("one\r\ntwo\r\nthree\r\n"), "text/plain")
		b.ok(t, "edit_file", map[string]any{"path": "win.txt", "edits": []any{edit("one\ntwo", "1\n2")}}, nil)
		if got := b.content(t, "win.txt"); got != "1\r\n2\r\nthree\r\n" {
			t.Fatalf("content %q", got)
		}
	})

	t.Run("KeyedEditReplaysInsteadOfEditingTwice", func(t *testing.T) {
		b.ok(t, "write_file", map[string]any{"path": "count.txt", "content": "n=1\n"}, nil)
		args := map[string]any{"path": "count.txt", "edits": []any{edit("n=1", "n=1\nn=2")}, "idempotency_key": "edit-count-1"}
		var first, again mcpserver.EditResult
		b.ok(t, "edit_file", args, &first)
		res := b.ok(t, "edit_file", args, &again)
		if !again.Replayed || again.File == nil || again.File.Version != first.File.Version || !strings.HasPrefix(text(res), "Already done") {
			t.Fatalf("replay %+v after %+v", again, first)
		}
		if got := b.content(t, "count.txt"); got != "n=1\nn=2\n" {
			t.Fatalf("content %q", got)
		}
		b.ok(t, "write_file", map[string]any{"path": "other.txt", "content": "x", "idempotency_key": "used-by-write"}, nil)
		b.fail(t, "edit_file", map[string]any{"path": "count.txt", "edits": []any{edit("n=2", "n=3")}, "idempotency_key": "used-by-write"}, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("RefusesBinary", func(t *testing.T) {
		b.put(t, "bin.dat", []byte{0xff, 0xfe, 'a'}, "application/octet-stream")
		b.fail(t, "edit_file", map[string]any{"path": "bin.dat", "edits": []any{edit("a", "b")}}, "UNSUPPORTED_MEDIA_TYPE")
	})
}

// barrierBackend holds every Read until n calls have read, so that
// concurrent edits all read the same content before any writes.
type barrierBackend struct {
	mcpserver.Backend
	wg *sync.WaitGroup
}

func (b barrierBackend) Read(ctx context.Context, r mcpserver.ReadRequest) (*mcpserver.Content, error) {
	c, err := b.Backend.Read(ctx, r)
	b.wg.Done()
	b.wg.Wait()
	return c, err
}

func TestConcurrentEditsNeverLoseAnUpdate(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(2)
	wrap := func(inner mcpserver.Backend) mcpserver.Backend { return barrierBackend{Backend: inner, wg: &wg} }
	a := setup(t, config{subject: "shared", wrap: wrap})
	b := connect(t, a.srv, config{subject: "shared", wrap: wrap})
	base := "header\nmiddle\nfooter\n"
	a.put(t, "shared.txt", []byte(base), "text/plain")

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	results := make(chan outcome, 2)
	for _, s := range []struct {
		b            *bundle
		old, newText string
	}{{a, "header", "HEADER by a"}, {b, "footer", "FOOTER by b"}} {
		go func() {
			res, err := s.b.raw("edit_file", map[string]any{"path": "shared.txt", "edits": []any{map[string]any{"oldText": s.old, "newText": s.newText}}})
			results <- outcome{res, err}
		}()
	}
	var won, lost []*mcp.CallToolResult
	for range 2 {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.res.IsError {
			lost = append(lost, o.res)
		} else {
			won = append(won, o.res)
		}
	}
	if len(won) != 1 || len(lost) != 1 {
		t.Fatalf("%d edits won, %d lost; want one each", len(won), len(lost))
	}
	msg := text(lost[0])
	if !strings.HasPrefix(msg, "PRECONDITION_FAILED: shared.txt changed after edit_file read it") || !strings.Contains(msg, "Call edit_file again") {
		t.Fatalf("loser: %s", msg)
	}
	got := a.content(t, "shared.txt")
	if got != "HEADER by a\nmiddle\nfooter\n" && got != "header\nmiddle\nFOOTER by b\n" {
		t.Fatalf("content %q is not the base with exactly the winning edit", got)
	}
	var r mcpserver.EditResult
	remarshal(t, won[0].StructuredContent, &r)
	if r.File == nil || r.File.Version != 2 {
		t.Fatalf("winner %+v", r)
	}
}

func TestIdempotentWrites(t *testing.T) {
	b := setup(t, config{})
	args := map[string]any{"path": "k/report.md", "content": "report", "idempotency_key": "write-report-1"}
	var first, again mcpserver.File
	b.ok(t, "write_file", args, &first)
	b.ok(t, "write_file", args, &again)
	if again.ID != first.ID || again.Version != 1 || len(b.liveFiles(t, "k/report.md")) != 1 {
		t.Fatalf("repeat made %+v after %+v", again, first)
	}
	args["content"] = "another report"
	p, msg := b.fail(t, "write_file", args, "IDEMPOTENCY_CONFLICT")
	if p.Retryable || !strings.Contains(msg, "use a new key") || b.content(t, "k/report.md") != "report" {
		t.Fatalf("problem %+v\n%s", p, msg)
	}
	b.fail(t, "write_file", map[string]any{"path": "k/other.md", "content": "report", "idempotency_key": "write-report-1"}, "IDEMPOTENCY_CONFLICT")
	b.badArgs(t, "write_file", map[string]any{"path": "k/x.md", "content": "x", "idempotency_key": "bad key!"}, "idempotency_key")
}

func TestReadOnlyToken(t *testing.T) {
	rw := setup(t, config{subject: "team"})
	var f mcpserver.File
	rw.ok(t, "write_file", map[string]any{"path": "ro/a.txt", "content": "hello"}, &f)
	ro := connect(t, rw.srv, config{subject: "team", scopes: []string{"read"}})
	if text(ro.ok(t, "read_text_file", map[string]any{"path": "ro/a.txt"}, nil)) != "hello" {
		t.Fatal("read-only token cannot read")
	}
	ro.ok(t, "list_directory", map[string]any{"path": "ro"}, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "ro/b.txt", "content": "x"}},
		{"write_file", map[string]any{"path": "ro/a.txt", "content": "x", "if_exists": "replace"}},
		{"edit_file", map[string]any{"path": "ro/a.txt", "edits": []any{map[string]any{"oldText": "hello", "newText": "bye"}}}},
		{"delete_file", map[string]any{"path": "ro/a.txt"}},
		{"restore_file", map[string]any{"file_id": f.ID}},
		{"move_file", map[string]any{"source": "ro/a.txt", "destination": "ro/moved.txt"}},
		{"revert_file", map[string]any{"path": "ro/a.txt", "version": 1}},
		{"share_file", map[string]any{"path": "ro/a.txt"}},
	} {
		_, msg := ro.fail(t, c.tool, c.args, "FORBIDDEN")
		want := "write scope"
		if c.tool == "share_file" { // links need share (a root token with read and write has it)
			want = "share scope"
		}
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: %s", c.tool, msg)
		}
	}
	if rw.content(t, "ro/a.txt") != "hello" || len(rw.liveFiles(t, "ro/b.txt")) != 0 || len(rw.liveFiles(t, "ro/moved.txt")) != 0 {
		t.Fatal("a read-only token wrote")
	}
	links, err := rw.client.Links(context.Background(), f.ID)
	if err != nil || len(links) != 0 {
		t.Fatalf("a read-only token made a link: %v %+v", err, links)
	}
	var h mcpserver.FileHistory
	ro.ok(t, "file_history", map[string]any{"path": "ro/a.txt"}, &h)
	if len(h.Versions) != 1 || h.Versions[0].Version != 1 || !h.Versions[0].Current {
		t.Fatalf("read-only history %+v", h)
	}
}

func TestDeleteAndRestore(t *testing.T) {
	b := setup(t, config{subject: "owner"})
	var f, del, back mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "trash/me.txt", "content": "keep me"}, &f)
	res := b.ok(t, "delete_file", map[string]any{"path": "trash/me.txt"}, &del)
	if del.ID != f.ID || del.DeletedAt == nil || del.PurgeAfter == nil || !strings.Contains(text(res), `restore_file with file_id "`+f.ID+`"`) {
		t.Fatalf("deleted %+v\n%s", del, text(res))
	}
	b.fail(t, "read_text_file", map[string]any{"path": "trash/me.txt"}, "NOT_FOUND")
	b.ok(t, "restore_file", map[string]any{"file_id": f.ID}, &back)
	if back.DeletedAt != nil || b.content(t, "trash/me.txt") != "keep me" {
		t.Fatalf("restored %+v", back)
	}
	b.ok(t, "restore_file", map[string]any{"file_id": f.ID}, nil) // a live file: no change

	b.ok(t, "delete_file", map[string]any{"path": "trash/me.txt"}, nil)
	var taker mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "trash/me.txt", "content": "new"}, &taker)
	p, msg := b.fail(t, "restore_file", map[string]any{"file_id": f.ID}, "PATH_EXISTS")
	if p.ExistingFileID != taker.ID || !strings.Contains(msg, "delete_file that path first") {
		t.Fatalf("problem %+v\n%s", p, msg)
	}

	other := connect(t, b.srv, config{subject: "stranger"})
	_, msg = other.fail(t, "restore_file", map[string]any{"file_id": f.ID}, "NOT_FOUND")
	if !strings.Contains(msg, "another token's subject") {
		t.Fatalf("text %s", msg)
	}
	other.fail(t, "restore_file", map[string]any{"file_id": "file_nonexistent"}, "NOT_FOUND")
	other.fail(t, "read_text_file", map[string]any{"path": "trash/me.txt"}, "NOT_FOUND")
}

func TestGetFileInfo(t *testing.T) {
	b := setup(t, config{runID: "run-info"})
	var f mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "info/deep/x.json", "content": "{}"}, &f)
	var fi mcpserver.FileInfo
	res := b.ok(t, "get_file_info", map[string]any{"path": "info/deep/x.json"}, &fi)
	if fi.Type != "file" || fi.File == nil || fi.File.ID != f.ID || fi.File.ContentType != "application/json; charset=utf-8" {
		t.Fatalf("info %+v", fi)
	}
	for _, line := range []string{"type: file", "id: " + f.ID, "etag: " + f.ETag, "version: 1", "run_id: run-info", "size_bytes: 2"} {
		if !strings.Contains(text(res), line+"\n") {
			t.Fatalf("text lacks %q:\n%s", line, text(res))
		}
	}
	b.ok(t, "get_file_info", map[string]any{"path": "info"}, &fi)
	if fi.Type != "directory" || fi.File != nil {
		t.Fatalf("directory info %+v", fi)
	}
}

func TestListingTools(t *testing.T) {
	b := setup(t, config{opts: mcpserver.Options{ScanFiles: 3}})
	paths := []string{"a.md", "docs/guide.md", "docs/api/v1.md", "docs/api/v2.md", "src/main.go", "src/util/x.go",
		"node_modules/lib/index.js", ".hidden/conf.md", "docs.md"}
	for _, p := range paths {
		b.ok(t, "write_file", map[string]any{"path": p, "content": p}, nil)
	}

	t.Run("ListDirectoryPagesThroughEverything", func(t *testing.T) {
		seen := map[string]bool{}
		cursor := ""
		for calls := 0; ; calls++ {
			if calls > 10 {
				t.Fatal("listing never ends")
			}
			args := map[string]any{"path": "/"}
			if cursor != "" {
				args["cursor"] = cursor
			}
			var l mcpserver.DirectoryListing
			res := b.ok(t, "list_directory", args, &l)
			for _, e := range l.Entries {
				prefix := map[string]string{"file": "[FILE] ", "directory": "[DIR] "}[e.Type]
				if !strings.Contains(text(res), prefix+e.Name+"\n") && !strings.HasSuffix(text(res), prefix+e.Name) {
					t.Fatalf("text lacks %s%s:\n%s", prefix, e.Name, text(res))
				}
				seen[prefix+e.Name] = true
			}
			if !l.HasMore {
				break
			}
			if !strings.Contains(text(res), "cursor=") {
				t.Fatalf("no continuation note: %s", text(res))
			}
			cursor = l.NextCursor
		}
		want := []string{"[DIR] .hidden", "[DIR] docs", "[DIR] node_modules", "[DIR] src", "[FILE] a.md", "[FILE] docs.md"}
		var got []string
		for k := range seen {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v", got, want)
		}
	})

	t.Run("ListDirectoryOfASubdirectory", func(t *testing.T) {
		all := allEntries(t, b, "list_directory", "docs/")
		if !slices.Equal(all, []string{"[DIR] api", "[FILE] guide.md"}) {
			t.Fatalf("docs: %v", all)
		}
		_, msg := b.fail(t, "list_directory", map[string]any{"path": "a.md"}, "VALIDATION_FAILED")
		if !strings.Contains(msg, "a.md is a file, not a directory") {
			t.Fatalf("text %s", msg)
		}
		b.fail(t, "list_directory", map[string]any{"path": "nothing/here"}, "NOT_FOUND")
		b.fail(t, "list_directory", map[string]any{"path": "docs//api"}, "INVALID_PATH")
		b.fail(t, "directory_tree", map[string]any{"path": "nothing"}, "NOT_FOUND")
	})

	t.Run("DirectoryTree", func(t *testing.T) {
		big := setupTree(t)
		var tree mcpserver.DirectoryTree
		res := big.ok(t, "directory_tree", map[string]any{"path": "."}, &tree)
		want := `[{"name":"docs","type":"directory","children":[{"name":"api","type":"directory","children":[{"name":"v1.md","type":"file"}]},{"name":"guide.md","type":"file"}]},{"name":"readme.md","type":"file"}]`
		if mustJSON(tree.Tree) != want || tree.HasMore {
			t.Fatalf("tree %s", mustJSON(tree.Tree))
		}
		var fromText []*mcpserver.TreeEntry
		if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || mustJSON(fromText) != want {
			t.Fatalf("text is not the tree: %v\n%s", err, text(res))
		}
		tree = mcpserver.DirectoryTree{}
		big.ok(t, "directory_tree", map[string]any{"path": "docs"}, &tree)
		if mustJSON(tree.Tree) != `[{"name":"api","type":"directory","children":[{"name":"v1.md","type":"file"}]},{"name":"guide.md","type":"file"}]` {
			t.Fatalf("docs tree %s", mustJSON(tree.Tree))
		}
		// Paged: every file shows up in some part.
		var parts strings.Builder
		cursor := ""
		for {
			args := map[string]any{"path": ""}
			if cursor != "" {
				args["cursor"] = cursor
			}
			tree = mcpserver.DirectoryTree{}
			b.ok(t, "directory_tree", args, &tree)
			parts.WriteString(mustJSON(tree.Tree))
			if !tree.HasMore {
				break
			}
			cursor = tree.NextCursor
		}
		for _, name := range []string{"v1.md", "v2.md", "guide.md", "main.go", "x.go", "index.js", "conf.md", "docs.md", "a.md"} {
			if !strings.Contains(parts.String(), `"name":"`+name+`"`) {
				t.Fatalf("paged tree lacks %s: %s", name, parts.String())
			}
		}
	})

	t.Run("SearchFiles", func(t *testing.T) {
		for _, c := range []struct {
			path, pattern string
			exclude       []string
			want          []string
		}{
			{"", "*.md", nil, []string{"a.md", "docs.md"}},
			{"", "**/*.md", nil, []string{".hidden/conf.md", "a.md", "docs.md", "docs/api/v1.md", "docs/api/v2.md", "docs/guide.md"}},
			{"docs", "**/v?.md", nil, []string{"docs/api/v1.md", "docs/api/v2.md"}},
			{"/docs/", "api/v[!1].md", nil, []string{"docs/api/v2.md"}},
			{"", "**/*.{go,js}", []string{"node_modules"}, []string{"src/main.go", "src/util/x.go"}},
			{"", "**", []string{"**/*.md", "src/**", "node_modules"}, []string{}},
			{"src", "*.go", nil, []string{"src/main.go"}},
			{"", "nothing*", nil, []string{}},
		} {
			got := allMatches(t, b, c.path, c.pattern, c.exclude)
			if !slices.Equal(got, c.want) {
				t.Errorf("search %q in %q excluding %v: %v, want %v", c.pattern, c.path, c.exclude, got, c.want)
			}
		}
		p, _ := b.fail(t, "search_files", map[string]any{"path": "", "pattern": "[unclosed"}, "VALIDATION_FAILED")
		if p.Errors[0].Field != "pattern" {
			t.Fatalf("problem %+v", p)
		}
		b.fail(t, "search_files", map[string]any{"path": "", "pattern": "*", "excludePatterns": []string{"ok", "bad\\"}}, "VALIDATION_FAILED")
		res := b.ok(t, "search_files", map[string]any{"path": "", "pattern": "zzz"}, nil)
		if !strings.HasPrefix(text(res), "No matches found") {
			t.Fatalf("text %s", text(res))
		}
	})
}

// setupTree is a session with a small tree and the default scan size.
func setupTree(t *testing.T) *bundle {
	b := setup(t, config{})
	for _, p := range []string{"readme.md", "docs/guide.md", "docs/api/v1.md"} {
		b.ok(t, "write_file", map[string]any{"path": p, "content": p}, nil)
	}
	return b
}

// allEntries pages through list_directory.
func allEntries(t *testing.T, b *bundle, tool, path string) []string {
	t.Helper()
	seen := map[string]bool{}
	cursor := ""
	for {
		args := map[string]any{"path": path}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var l mcpserver.DirectoryListing
		b.ok(t, tool, args, &l)
		for _, e := range l.Entries {
			seen[map[string]string{"file": "[FILE] ", "directory": "[DIR] "}[e.Type]+e.Name] = true
		}
		if !l.HasMore {
			break
		}
		cursor = l.NextCursor
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// allMatches pages through search_files.
func allMatches(t *testing.T, b *bundle, path, pattern string, exclude []string) []string {
	t.Helper()
	out := []string{}
	cursor := ""
	for {
		args := map[string]any{"path": path, "pattern": pattern}
		if exclude != nil {
			args["excludePatterns"] = exclude
		}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var r mcpserver.SearchResult
		res := b.ok(t, "search_files", args, &r)
		out = append(out, r.Matches...)
		for _, m := range r.Matches {
			if !strings.Contains(text(res), m) {
				t.Fatalf("text lacks %s: %s", m, text(res))
			}
		}
		if !r.HasMore {
			break
		}
		cursor = r.NextCursor
	}
	slices.Sort(out)
	return out
}

func TestListRunFiles(t *testing.T) {
	mine := setup(t, config{subject: "runner", agentID: "agent-a", runID: "run-1"})
	other := connect(t, mine.srv, config{subject: "runner", agentID: "agent-b", runID: "run-2"})
	for i := range 102 {
		mine.ok(t, "write_file", map[string]any{"path": fmt.Sprintf("out/%03d.txt", i), "content": "x"}, nil)
	}
	other.ok(t, "write_file", map[string]any{"path": "other/z.txt", "content": "z"}, nil)

	var page mcpserver.RunFiles
	res := mine.ok(t, "list_run_files", map[string]any{}, &page)
	if page.RunID != "run-1" || len(page.Files) != 100 || !page.HasMore || page.Files[0].Path != "out/101.txt" ||
		!strings.HasPrefix(text(res), "Files created by run run-1, newest first:\n[FILE] out/101.txt (file_") ||
		!strings.Contains(text(res), "cursor=") {
		t.Fatalf("first page: %d files, has_more %v\n%s", len(page.Files), page.HasMore, text(res))
	}
	var rest mcpserver.RunFiles
	mine.ok(t, "list_run_files", map[string]any{"cursor": page.NextCursor}, &rest)
	if len(rest.Files) != 2 || rest.HasMore || rest.Files[1].Path != "out/000.txt" {
		t.Fatalf("second page %+v", rest)
	}
	var theirs mcpserver.RunFiles
	mine.ok(t, "list_run_files", map[string]any{"run_id": "run-2"}, &theirs)
	if len(theirs.Files) != 1 || theirs.Files[0].Path != "other/z.txt" {
		t.Fatalf("run-2: %+v", theirs)
	}
	mine.ok(t, "list_run_files", map[string]any{"agent_id": "agent-b"}, &theirs)
	if len(theirs.Files) != 1 {
		t.Fatalf("agent-b: %+v", theirs)
	}
	res = mine.ok(t, "list_run_files", map[string]any{"run_id": "run-none"}, &theirs)
	if len(theirs.Files) != 0 || !strings.HasPrefix(text(res), "No live files created by run run-none") {
		t.Fatalf("unknown run: %s", text(res))
	}
	mine.fail(t, "list_run_files", map[string]any{"run_id": "bad run id"}, "VALIDATION_FAILED")
	anon := connect(t, mine.srv, config{subject: "runner"})
	anon.fail(t, "list_run_files", map[string]any{}, "VALIDATION_FAILED")
}

// TestArgumentsOutsideTheSchemaAreToolErrors: arguments the input schema
// refuses are a tool error VALIDATION_FAILED naming the argument, and say
// what the argument must be (SEP-1303), so that a model can correct its
// call; they are counted as invalid_arguments.
func TestArgumentsOutsideTheSchemaAreToolErrors(t *testing.T) {
	b := setup(t, config{})
	for _, c := range []struct {
		tool  string
		args  any
		field string
		says  string
	}{
		{"read_text_file", map[string]any{}, "path", "is required"},
		{"read_text_file", map[string]any{"path": 7}, "path", "must be a string"},
		{"read_text_file", map[string]any{"path": "a", "Path": "b"}, "Path", "takes path, head, tail"},
		{"read_text_file", map[string]any{"path": "a", "head": 0}, "head", "at least 1"},
		{"read_text_file", map[string]any{"path": "a", "head": 1.5}, "head", "must be an integer"},
		{"write_file", map[string]any{"path": "a"}, "content", "is required"},
		{"write_file", map[string]any{"path": "a", "content": "x", "if_exists": "sometimes"}, "if_exists", `one of "error", "replace"`},
		{"write_file", map[string]any{"path": "a", "content": "x", "expires_in": 5}, "expires_in", "at least 60"},
		{"write_file", map[string]any{"path": "a", "content": nil}, "content", "must be a string"},
		{"read_multiple_files", map[string]any{"paths": []string{}}, "paths", "at least 1 item"},
		{"read_multiple_files", map[string]any{"paths": nil}, "paths", "must be an array"},
		{"edit_file", map[string]any{"path": "a", "edits": []any{map[string]any{"oldText": "x"}}}, "edits[0].newText", "is required"},
		{"search_files", map[string]any{"path": "", "pattern": ""}, "pattern", "at least 1 character"},
		{"read_text_file", []any{"a"}, "arguments", "JSON object"},
		{"move_file", map[string]any{"source": "a"}, "destination", "is required"},
		{"file_history", map[string]any{"path": "a", "limit": 5}, "limit", "takes path, cursor"},
		{"revert_file", map[string]any{"path": "a", "version": 0}, "version", "at least 1"},
		{"revert_file", map[string]any{"path": "a"}, "version", "is required"},
		{"share_file", map[string]any{"path": "a", "expires_in": 59}, "expires_in", "at least 60"},
		{"share_file", map[string]any{"path": "a", "expires_in": 604801}, "expires_in", "at most 604800"},
		{"share_file", map[string]any{"path": "a", "version": -1}, "version", "at least 1"},
		{"run_summary", map[string]any{"run_id": strings.Repeat("r", 129)}, "run_id", "at most 128 characters"},
		{"run_recovery", map[string]any{"run_id": strings.Repeat("r", 129)}, "run_id", "at most 128 characters"},
		{"complete_upload", map[string]any{}, "upload_id", "is required"},
		{"complete_upload", map[string]any{"upload_id": ""}, "upload_id", "at least 1 character"},
		{"abort_upload", map[string]any{"upload_id": strings.Repeat("u", 65)}, "upload_id", "at most 64 characters"},
	} {
		p, msg := b.badArgs(t, c.tool, c.args, c.field)
		if !strings.Contains(msg, c.says) || p.Status != http.StatusUnprocessableEntity || p.Retryable {
			t.Errorf("%s %s: want %q in\n%s", c.tool, mustJSON(c.args), c.says, msg)
		}
	}
	b.ok(t, "list_directory", map[string]any{"path": ""}, nil)
	b.fail(t, "get_file_info", map[string]any{"path": "missing"}, "NOT_FOUND")
	calls := b.calls.all()
	want := 26
	for i, c := range calls[:want] {
		if !strings.HasSuffix(c, " "+mcpserver.OutcomeInvalidArguments) {
			t.Fatalf("call %d counted %q", i, c)
		}
	}
	if !slices.Equal(calls[want:], []string{"list_directory ok", "get_file_info error"}) {
		t.Fatalf("calls %v", calls)
	}
}

func TestCallCounter(t *testing.T) {
	vec := mcpserver.NewCallCounter()
	srv := apitest.NewServer(t, apitest.Options{})
	c, err := client.New(srv.URL, srv.Token(t, "counted"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := mcpserver.NewClientBackend(c)
	if err != nil {
		t.Fatal(err)
	}
	cs := inMemory(t, backend, mcpserver.Options{OnCall: mcpserver.CountCalls(vec)})
	for _, args := range []map[string]any{{"path": "a.txt", "content": "x"}, {"path": "a.txt", "content": "x"}, {"path": 1}} {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: args})
	}
	for outcome, want := range map[string]float64{"ok": 1, "error": 1, "invalid_arguments": 1} {
		if got := testutil.ToFloat64(vec.WithLabelValues("write_file", outcome)); got != want {
			t.Errorf("write_file %s: %v, want %v", outcome, got, want)
		}
	}
	if n := testutil.CollectAndCount(vec); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}

func TestUnreachableServerLeavesAKeyToRetryWith(t *testing.T) {
	// A port nobody listens on: the connection is refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.New("http://"+addr, "token", client.WithRetryPolicy(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := mcpserver.NewClientBackend(c)
	if err != nil {
		t.Fatal(err)
	}
	cs := inMemory(t, backend, mcpserver.Options{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "a.txt", "content": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	var p mcpserver.Problem
	remarshal(t, res.Meta[mcpserver.ProblemMeta], &p)
	msg := text(res)
	if p.Code != "UNREACHABLE" || !p.Retryable || !strings.HasPrefix(p.IdempotencyKey, "afs-") ||
		!strings.Contains(msg, `repeat it with idempotency_key="`+p.IdempotencyKey+`"`) || !strings.Contains(msg, "may or may not have happened") {
		t.Fatalf("problem %+v\n%s", p, msg)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "a.txt", "content": "x", "idempotency_key": "mine-1"}})
	if err != nil || !strings.Contains(text(res), `idempotency_key="mine-1"`) {
		t.Fatalf("%v %s", err, text(res))
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || !strings.HasPrefix(text(res), "UNREACHABLE: ") || strings.Contains(text(res), "idempotency_key") {
		t.Fatalf("read: %v %s", err, text(res))
	}
}

func TestEveryToolChecksTheScopesOfItsOperations(t *testing.T) {
	b := setup(t, config{subject: "walker"})
	for _, scopes := range [][]string{{"read"}, {"write"}, {"read", "write"}} {
		name := strings.Join(scopes, "+")
		t.Run(name, func(t *testing.T) {
			full, err := client.New(b.srv.URL, b.srv.Token(t, "walker"), client.WithRunID("walk-"+name))
			if err != nil {
				t.Fatal(err)
			}
			fx := mcptest.Prepare(t, full, "walk-"+name, "walk-"+name)
			s := connect(t, b.srv, config{subject: "walker", scopes: scopes})
			mcptest.Walk(t, fx, scopes, func(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
				return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			})
		})
	}
}
