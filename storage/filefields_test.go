package storage

import (
	"strings"
	"testing"
)

// TestFileColumnsFor: the column list behind fields= is fileColumns
// column by column, and a few fields read only their columns.
func TestFileColumnsFor(t *testing.T) {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var all []string
	for _, c := range fileColumnList {
		all = append(all, c.expr)
	}
	if got, want := norm(strings.Join(all, ", ")), norm(fileColumns); got != want {
		t.Fatalf("fileColumnList differs from fileColumns:\n%s\n%s", got, want)
	}
	every := []string{"path", "size_bytes", "content_type", "sha256", "version", "agent_id", "run_id", "last_agent_id",
		"last_run_id", "updated_at", "deleted_at", "expires_at", "blocked", "mode", "mtime", "kind", "forked_from"}
	for i, col := range fileColumnsOf(every) {
		if col != fileColumnList[i].expr && fileColumnList[i].fields != nil {
			t.Fatalf("every field still leaves column %d (%s) out: %s", i, fileColumnList[i].expr, col)
		}
	}
	if fileColumnsFor(nil) != fileColumns {
		t.Fatal("no fields is not every column")
	}
	for _, tc := range []struct {
		fields   []string
		has, not []string
	}{
		{[]string{"path", "size_bytes"}, []string{"id", "path", "size_bytes", "created_at"}, []string{"sha256", "blob_key", "deleted_at", "kind"}},
		{[]string{"etag"}, []string{"sha256"}, []string{"path"}},
		{[]string{"purge_after"}, []string{"deleted_at", "purge_after", "expires_at", "expires_at <= now()"}, []string{"size_bytes"}},
		{[]string{"id"}, []string{"id", "created_at"}, []string{"path", "updated_at"}},
	} {
		got := fileColumnsFor(tc.fields)
		if cols := fileColumnsOf(tc.fields); len(cols) != len(fileColumnList) {
			t.Fatalf("%v: %d columns, want %d", tc.fields, len(cols), len(fileColumnList))
		}
		for _, h := range tc.has {
			if !strings.Contains(got, h) {
				t.Errorf("%v: %q lacks %s", tc.fields, got, h)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%v: %q reads %s", tc.fields, got, n)
			}
		}
	}
}
