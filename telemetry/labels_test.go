package telemetry

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

func TestStatementKind(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"SELECT 1", "select"},
		{"  select id FROM files", "select"},
		{"\n\t\tINSERT INTO files VALUES ($1)", "insert"},
		{"UPDATE idempotency_keys SET fence = fence + 1", "update"},
		{"DELETE FROM file_versions v USING files f", "delete"},
		{"WITH gone AS (DELETE FROM x RETURNING 1) SELECT count(*) FROM gone", "with"},
		{"begin", "begin"},
		{"begin isolation level serializable", "begin"},
		{"commit", "commit"},
		{"rollback", "rollback"},
		{"(SELECT 1) UNION (SELECT 2)", "select"},
		{"-- name: Thing\nSELECT 1", "select"},
		{"/* a comment */ update t set x = 1", "update"},
		{"/* one */ -- two\n /* three */ insert into t values (1)", "insert"},
		{"CREATE TABLE IF NOT EXISTS schema_migrations (version integer)", "other"},
		{"savepoint sp_1", "other"},
		{"selectx 1", "other"},
		{"SELECTED", "other"},
		{"sel", "other"},
		{"", "other"},
		{"   ", "other"},
		{"/* never ends", "other"},
		{"-- only a comment", "other"},
		{"1; DROP TABLE files", "other"},
		{"é", "other"},
	} {
		if got := statementKind(tc.sql); got != tc.want {
			t.Errorf("statementKind(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}

// FuzzStatementKind holds that whatever the SQL, its label is one of a
// closed set.
func FuzzStatementKind(f *testing.F) {
	for _, s := range []string{"SELECT 1", "/* x */ insert", "-- c\nwith", "rollback", "(((", "/*", "--"} {
		f.Add(s)
	}
	kinds := []string{"other"}
	for _, k := range statementKinds {
		kinds = append(kinds, k)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		if got := statementKind(sql); !slices.Contains(kinds, got) {
			t.Fatalf("statementKind(%q) = %q, outside the closed set", sql, got)
		}
	})
}

func s3Request(t testing.TB, method, rawURL string, headers ...string) *http.Request {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &http.Request{Method: method, URL: u, Header: http.Header{}}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func TestS3Operation(t *testing.T) {
	const copySource = "X-Amz-Copy-Source"
	for _, tc := range []struct {
		method, url string
		headers     []string
		want        string
	}{
		// Path-style, as minio-go sends to an IP endpoint.
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "put"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "get"},
		{method: "HEAD", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "stat"},
		{method: "DELETE", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "delete"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc", headers: []string{copySource, "/agentfs/blobs/src"}, want: "copy"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc?tagging", want: "tag"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc?tagging=", want: "tag"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs/blobs/abc?tagging", want: "get_tags"},
		{method: "DELETE", url: "http://127.0.0.1:7070/agentfs/blobs/abc?tagging", want: "delete_tags"},
		{method: "POST", url: "http://127.0.0.1:7070/agentfs/blobs/abc?uploads", want: "multipart_create"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc?partNumber=3&uploadId=xyz", want: "multipart_part"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs/blobs/abc?partNumber=3&uploadId=xyz", headers: []string{copySource, "/agentfs/x"}, want: "multipart_copy_part"},
		{method: "POST", url: "http://127.0.0.1:7070/agentfs/blobs/abc?uploadId=xyz", want: "multipart_complete"},
		{method: "DELETE", url: "http://127.0.0.1:7070/agentfs/blobs/abc?uploadId=xyz", want: "multipart_abort"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs/blobs/abc?uploadId=xyz&max-parts=1000", want: "multipart_list_parts"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs/?uploads&prefix=blobs/", want: "multipart_list_uploads"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs/?list-type=2&prefix=blobs/", want: "list"},
		{method: "GET", url: "http://127.0.0.1:7070/agentfs?location", want: "bucket_location"},
		{method: "HEAD", url: "http://127.0.0.1:7070/agentfs/", want: "bucket_exists"},
		{method: "HEAD", url: "http://127.0.0.1:7070/agentfs", want: "bucket_exists"},
		{method: "PUT", url: "http://127.0.0.1:7070/agentfs", want: "make_bucket"},
		{method: "DELETE", url: "http://127.0.0.1:7070/agentfs/", want: "delete_bucket"},
		{method: "POST", url: "http://127.0.0.1:7070/agentfs/?delete", want: "delete_many"},
		// Virtual-hosted, as minio-go sends to AWS.
		{method: "PUT", url: "https://agentfs.s3.us-east-1.amazonaws.com/blobs/abc", want: "put"},
		{method: "HEAD", url: "https://agentfs.s3.us-east-1.amazonaws.com/", want: "bucket_exists"},
		{method: "GET", url: "https://agentfs.s3.us-east-1.amazonaws.com/?list-type=2", want: "list"},
		{method: "GET", url: "https://agentfs.s3.us-east-1.amazonaws.com/blobs/abc", want: "get"},
		// Anything else.
		{method: "PATCH", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "other"},
		{method: "POST", url: "http://127.0.0.1:7070/agentfs/blobs/abc", want: "other"},
	} {
		r := s3Request(t, tc.method, tc.url, tc.headers...)
		if got := s3Operation(r, "agentfs"); got != tc.want {
			t.Errorf("%s %s %v: %q, want %q", tc.method, tc.url, tc.headers, got, tc.want)
		}
		if !slices.Contains(s3Operations, tc.want) {
			t.Errorf("%q is not listed in s3Operations", tc.want)
		}
	}
}

// FuzzS3Operation holds that whatever the request, its label is one of a
// closed set, never a piece of its URL.
func FuzzS3Operation(f *testing.F) {
	f.Add("PUT", "http://127.0.0.1:7070/agentfs/blobs/abc?partNumber=1&uploadId=x", "")
	f.Add("GET", "https://agentfs.example/?list-type=2", "")
	f.Add("PUT", "http://h/agentfs/k", "/agentfs/src")
	f.Fuzz(func(t *testing.T, method, rawURL, copySource string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			return
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{}}
		r.Header.Set("X-Amz-Copy-Source", copySource)
		if got := s3Operation(r, "agentfs"); !slices.Contains(s3Operations, got) {
			t.Fatalf("s3Operation(%s %s) = %q, outside the closed set", method, rawURL, got)
		}
	})
}
