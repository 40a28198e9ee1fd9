package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestArgumentsMustBeText calls tools with arguments whose strings are not
// Unicode text, invalid UTF-8 bytes or \u escapes of a surrogate that is
// not half of a pair: a path argument is an INVALID_PATH tool error, any
// other a VALIDATION_FAILED one, each naming the argument, and nothing is
// written. Decoded as they came they would have become U+FFFD: a write to
// "bad\xff\xfe.txt" stored "bad\ufffd\ufffd.txt".
func TestArgumentsMustBeText(t *testing.T) {
	b := setup(t, config{})
	b.ok(t, "write_file", map[string]any{"path": "kept.txt", "content": "kept"}, nil)
	for _, tc := range []struct{ name, tool, args, code, field string }{
		{"PathBytes", "write_file", "{\"path\":\"bad\xff\xfe.txt\",\"content\":\"x\"}", "INVALID_PATH", "path"},
		{"PathEscape", "write_file", `{"path":"bad\udc80.txt","content":"x"}`, "INVALID_PATH", "path"},
		{"ReadPath", "read_text_file", `{"path":"kept\ud800.txt"}`, "INVALID_PATH", "path"},
		{"Content", "write_file", `{"path":"ok.txt","content":"caf\udce9"}`, "VALIDATION_FAILED", "content"},
		{"Destination", "move_file", `{"source":"kept.txt","destination":"x\udfff"}`, "INVALID_PATH", "destination"},
		{"OneOfPaths", "read_multiple_files", `{"paths":["kept.txt","\udc00"]}`, "INVALID_PATH", "paths[1]"},
		{"EditText", "edit_file", "{\"path\":\"kept.txt\",\"edits\":[{\"oldText\":\"kept\",\"newText\":\"\xff\"}]}",
			"VALIDATION_FAILED", "edits[0].newText"},
		{"ArgumentName", "write_file", "{\"path\":\"ok.txt\",\"content\":\"x\",\"n\xffte\":1}", "VALIDATION_FAILED", "arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := b.fail(t, tc.tool, json.RawMessage(tc.args), tc.code)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("%s: errors %+v, want one naming %s", tc.args, p.Errors, tc.field)
			}
		})
	}
	page, err := b.client.ListFiles(context.Background(), client.ListOptions{IncludeDeleted: true})
	if err != nil || len(page.Data) != 1 || page.Data[0].Path != "kept.txt" || b.content(t, "kept.txt") != "kept" {
		t.Fatalf("refused calls changed the files: %+v %v", page.Data, err)
	}
}
