package storage

import "strings"

// fileColumn is one column of fileColumns: its expression, the constant
// of its type that stands in for it when no field asked for needs it
// ("": always read), and the File object's members that need it.
type fileColumn struct {
	expr, none string
	fields     []string
}

// fileColumnList is fileColumns, column by column (TestFileColumnsFor
// holds the two to each other). id and created_at are always read: every
// row is named by its id and paged by both.
var fileColumnList = []fileColumn{
	{"id", "", nil},
	{"subject", "''", nil},
	{"path", "''", []string{"path"}},
	{"size_bytes", "0::bigint", []string{"size_bytes"}},
	{"content_type", "''", []string{"content_type"}},
	{"sha256", "''", []string{"sha256", "etag"}},
	{"version", "0", []string{"version"}},
	{"blob_key", "''", nil},
	{"coalesce(agent_id, '')", "''", []string{"agent_id"}},
	{"coalesce(run_id, '')", "''", []string{"run_id"}},
	{"coalesce(last_agent_id, '')", "''", []string{"last_agent_id"}},
	{"coalesce(last_run_id, '')", "''", []string{"last_run_id"}},
	{"created_at", "", nil},
	{"updated_at", "created_at", []string{"updated_at"}},
	{"deleted_at", "NULL::timestamptz", []string{"deleted_at", "purge_after"}},
	{"purge_after", "NULL::timestamptz", []string{"deleted_at", "purge_after"}},
	// A file past its expiry shows as deleted from expires_at on.
	{"expires_at", "NULL::timestamptz", []string{"expires_at", "deleted_at", "purge_after"}},
	{pastExpiry, "false", []string{"deleted_at", "purge_after"}},
	{"blocked", "false", []string{"blocked"}},
	{"block_reason", "''", nil},
	{"mode", "0", []string{"mode"}},
	{"coalesce(mtime, updated_at)", "created_at", []string{"mtime"}},
	{"kind", "''", []string{"kind"}},
	{"coalesce(forked_from_id, '')", "''", []string{"forked_from"}},
	{"coalesce(forked_from_version, 0)", "0", []string{"forked_from"}},
}

// fileColumnsFor is fileColumns with a constant in place of each column
// that none of fields (File members, by JSON name) needs, so that a
// listing that asks for a few members reads and sends only their columns;
// scanFile reads either. No fields: every column.
func fileColumnsFor(fields []string) string {
	if len(fields) == 0 {
		return fileColumns
	}
	return strings.Join(fileColumnsOf(fields), ", ")
}

// fileColumnsOf is fileColumnsFor's columns, one by one.
func fileColumnsOf(fields []string) []string {
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	cols := make([]string, len(fileColumnList))
	for i, c := range fileColumnList {
		cols[i] = c.none
		if c.none == "" {
			cols[i] = c.expr
		}
		for _, f := range c.fields {
			if want[f] {
				cols[i] = c.expr
				break
			}
		}
	}
	return cols
}
