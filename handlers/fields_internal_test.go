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
	proj, err := json.Marshal(projectedFile{f: &f, fields: fileFields})
	if err != nil || string(proj) != string(whole) {
		t.Fatalf("every field projected:\n%s\nthe whole object:\n%s (%v)", proj, whole, err)
	}
	f.ForkedFrom = nil
	proj, _ = json.Marshal(projectedFile{f: &f, fields: fileFields[:1:1]})
	if string(proj) != `{"id":"file_1"}` {
		t.Fatalf("id alone: %s", proj)
	}
	all, _ := parseFields(url.Values{"fields": {"forked_from,path"}})
	if proj, _ = json.Marshal(projectedFile{f: &f, fields: all}); string(proj) != `{"id":"file_1","path":"a/b.txt"}` {
		t.Fatalf("no fork: %s", proj)
	}
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
