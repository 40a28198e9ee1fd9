package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
)

func names(fs []fileField) []string { return fieldNames(fs) }

// TestParseFields: fields= names members of the File object, any order
// and repeats, id always among them, in the object's order; anything else
// is a 422 VALIDATION_FAILED naming fields.
func TestParseFields(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string // nil with ok: whole objects
		ok    bool
	}{
		{"", nil, true},
		{"limit=5", nil, true},
		{"fields=path", []string{"id", "path"}, true},
		{"fields=size_bytes,path", []string{"id", "path", "size_bytes"}, true},
		{"fields=path,%20size_bytes%20", []string{"id", "path", "size_bytes"}, true},
		{"fields=path,path,id", []string{"id", "path"}, true},
		{"fields=id", []string{"id"}, true},
		{"fields=forked_from,kind,mtime,mode,etag", []string{"id", "etag", "mode", "mtime", "kind", "forked_from"}, true},
		{"fields=", nil, false},
		{"fields=%20", nil, false},
		{"fields=path,", nil, false},
		{"fields=,path", nil, false},
		{"fields=path,,size_bytes", nil, false},
		{"fields=nope", nil, false},
		{"fields=Path", nil, false},
		{"fields=blob_key", nil, false},
		{"fields=subject", nil, false},
		{"fields=path&fields=size_bytes", nil, false},
		{"fields=" + strings.Repeat("path,", 200), nil, false},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseFields(q)
		if !tc.ok {
			var p *problem.Problem
			if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || p.Code != problem.ValidationFailed ||
				len(p.Errors) != 1 || p.Errors[0].Field != "fields" {
				t.Errorf("%q: want a 422 naming fields, got %v, %v", tc.query, names(got), err)
			}
			continue
		}
		if err != nil || !slices.Equal(names(got), tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("%q: got %v, %v; want %v", tc.query, names(got), err, tc.want)
		}
	}
}

// TestFileFieldsCoverTheFileObject: fields= knows every member of the
// File object and no other, in the object's order, and a projection of
// every member is the whole object.
func TestFileFieldsCoverTheFileObject(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	run := "run-1"
	f := api.File{ID: "file_1", Object: "file", Path: "a/b.txt", SizeBytes: 5, ContentType: "text/plain", SHA256: "ab",
		ETag: `"ab"`, Version: 2, URL: "http://x/v1/files/file_1/content", RunID: &run, CreatedAt: at, UpdatedAt: at,
		DeletedAt: &at, Mode: 0o644, MTime: at, Kind: "file", ForkedFrom: &api.FileVersionRef{FileID: "file_0", Version: 1}}
	whole, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(string(whole)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(fileFields); !slices.Equal(got, keys) {
		t.Fatalf("fileFields %v, File object %v", got, keys)
	}
	proj := appendFile(nil, &f, fileFields)
	if string(proj) != string(whole) {
		t.Fatalf("every field projected:\n%s\nthe whole object:\n%s", proj, whole)
	}
	f.ForkedFrom = nil
	proj = appendFile(nil, &f, fileFields[:1:1])
	if string(proj) != `{"id":"file_1"}` {
		t.Fatalf("id alone: %s", proj)
	}
	all, _ := parseFields(url.Values{"fields": {"forked_from,path"}})
	if proj = appendFile(nil, &f, all); string(proj) != `{"id":"file_1","path":"a/b.txt"}` {
		t.Fatalf("no fork: %s", proj)
	}
}

// TestFileListJSONIsEncodingJSON: a listing page written without
// reflection is, byte for byte, what encoding/json's encoder (echo's
// c.JSON) writes for it: strings that need escapes (quotes, controls,
// HTML, U+2028, invalid UTF-8), null and set pointers, times with and
// without nanoseconds and in other zones, a fork's copy, prefixes.
func TestFileListJSONIsEncodingJSON(t *testing.T) {
	for _, f := range listJSONCases() {
		for _, list := range []api.FileList{
			{Data: []api.File{f}},
			{Data: []api.File{f, f}, HasMore: true, NextCursor: &f.Path, Prefixes: []string{f.Path, "a/"}},
			{Data: []api.File{}},
		} {
			if got, want := string(appendFileList(nil, list, nil)), encodingJSON(t, list); got != want {
				t.Fatalf("whole files:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// listJSONCases are files whose every member takes an unusual value.
func listJSONCases() []api.File {
	plain := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	nanos := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", -7*3600-30*60))
	odd := "a\"b\\c\n\x01<>&\u2028\xff\u00e9"
	var out []api.File
	for _, s := range []string{"", "plain/path.txt", odd, "ü/é.txt"} {
		s := s
		for _, at := range []time.Time{plain, nanos, {}} {
			at := at
			out = append(out, api.File{ID: s, Object: "file", Path: s, SizeBytes: -1 << 62, ContentType: s, SHA256: s,
				ETag: s, Version: 1 << 40, URL: s, AgentID: &s, RunID: nil, LastAgentID: &s, LastRunID: &s,
				CreatedAt: at, UpdatedAt: at, DeletedAt: &at, PurgeAfter: nil, ExpiresAt: &at, Blocked: true,
				Mode: -1, MTime: at, Kind: s, ForkedFrom: &api.FileVersionRef{FileID: s, Version: 3}})
		}
	}
	return out
}

// encodingJSON is what echo's c.JSON writes for v.
func encodingJSON(t testing.TB, v any) string {
	var buf strings.Builder
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// FuzzFileListJSON: whatever strings and times a file holds, its page
// written without reflection is encoding/json's.
func FuzzFileListJSON(f *testing.F) {
	f.Add("a/b.txt", "text/plain", int64(0), int64(0))
	f.Add("a\"<\u2028\xff", "", int64(-1), int64(999999999))
	f.Fuzz(func(t *testing.T, path, ctype string, sec, nsec int64) {
		at := time.Unix(sec, nsec).UTC()
		file := api.File{ID: path, Path: path, ContentType: ctype, AgentID: &ctype, CreatedAt: at, MTime: at, ExpiresAt: &at}
		list := api.FileList{Data: []api.File{file}, NextCursor: &path, Prefixes: []string{ctype}}
		want := ""
		var buf strings.Builder
		if err := json.NewEncoder(&buf).Encode(list); err != nil {
			return // a time encoding/json refuses: nothing to compare
		}
		want = buf.String()
		if got := string(appendFileList(nil, list, nil)); got != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// FuzzParseFields: whatever fields= holds, the parser answers the names
// it was given (known ones, id among them, in the object's order) or a 422
// naming fields; never a panic.
func FuzzParseFields(f *testing.F) {
	for _, s := range []string{"path", "path,size_bytes", " id ,kind", "", ",", "path,,x", "forked_from", "\xff", strings.Repeat("a,", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseFields(url.Values{"fields": {v}})
		if err != nil {
			var p *problem.Problem
			if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || len(p.Errors) != 1 || p.Errors[0].Field != "fields" {
				t.Fatalf("%q: %v is not a 422 naming fields", v, err)
			}
			if !utf8.ValidString(p.Detail) && utf8.ValidString(v) {
				t.Fatalf("%q: detail %q", v, p.Detail)
			}
			return
		}
		if len(got) == 0 || got[0].name != "id" {
			t.Fatalf("%q: %v lacks id first", v, names(got))
		}
		for _, fl := range got[1:] {
			if !strings.Contains(v, fl.name) {
				t.Fatalf("%q: answered %s, which it did not name", v, fl.name)
			}
		}
		idx := func(name string) int {
			return slices.IndexFunc(fileFields, func(f fileField) bool { return f.name == name })
		}
		for i := 1; i < len(got); i++ {
			if idx(got[i].name) <= idx(got[i-1].name) {
				t.Fatalf("%q: %v out of the object's order or repeated", v, names(got))
			}
		}
		for _, name := range strings.Split(v, ",") {
			if n := strings.TrimSpace(name); idx(n) < 0 {
				t.Fatalf("%q: accepted the unknown %q", v, n)
			}
		}
	})
}
