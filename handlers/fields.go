package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
)

// fileField is one member of the File object that a listing's fields=
// may name: its JSON name and how its value in a rendered file is written
// (as encoding/json writes it: a listing page is written without
// reflection, writeFileList).
type fileField struct {
	name string
	add  func(b []byte, f *api.File) []byte
}

// fileFields are the File object's members in the order the object
// lists them. id is always answered: it is what every other route takes.
var fileFields = []fileField{
	{"id", func(b []byte, f *api.File) []byte { return appendString(b, f.ID) }},
	{"object", func(b []byte, f *api.File) []byte { return appendString(b, f.Object) }},
	{"path", func(b []byte, f *api.File) []byte { return appendString(b, f.Path) }},
	{"size_bytes", func(b []byte, f *api.File) []byte { return strconv.AppendInt(b, f.SizeBytes, 10) }},
	{"content_type", func(b []byte, f *api.File) []byte { return appendString(b, f.ContentType) }},
	{"sha256", func(b []byte, f *api.File) []byte { return appendString(b, f.SHA256) }},
	{"etag", func(b []byte, f *api.File) []byte { return appendString(b, f.ETag) }},
	{"version", func(b []byte, f *api.File) []byte { return strconv.AppendInt(b, f.Version, 10) }},
	{"url", func(b []byte, f *api.File) []byte { return appendString(b, f.URL) }},
	{"agent_id", func(b []byte, f *api.File) []byte { return appendStringPtr(b, f.AgentID) }},
	{"run_id", func(b []byte, f *api.File) []byte { return appendStringPtr(b, f.RunID) }},
	{"last_agent_id", func(b []byte, f *api.File) []byte { return appendStringPtr(b, f.LastAgentID) }},
	{"last_run_id", func(b []byte, f *api.File) []byte { return appendStringPtr(b, f.LastRunID) }},
	{"created_at", func(b []byte, f *api.File) []byte { return appendTime(b, f.CreatedAt) }},
	{"updated_at", func(b []byte, f *api.File) []byte { return appendTime(b, f.UpdatedAt) }},
	{"deleted_at", func(b []byte, f *api.File) []byte { return appendTimePtr(b, f.DeletedAt) }},
	{"purge_after", func(b []byte, f *api.File) []byte { return appendTimePtr(b, f.PurgeAfter) }},
	{"expires_at", func(b []byte, f *api.File) []byte { return appendTimePtr(b, f.ExpiresAt) }},
	{"blocked", func(b []byte, f *api.File) []byte { return strconv.AppendBool(b, f.Blocked) }},
	{"mode", func(b []byte, f *api.File) []byte { return strconv.AppendInt(b, int64(f.Mode), 10) }},
	{"mtime", func(b []byte, f *api.File) []byte { return appendTime(b, f.MTime) }},
	{"kind", func(b []byte, f *api.File) []byte { return appendString(b, f.Kind) }},
	// Absent when the file is no fork's copy, as in the whole object.
	{"forked_from", func(b []byte, f *api.File) []byte { return appendJSON(b, f.ForkedFrom) }},
}

// maxFieldsParam bounds the fields= value read: every name once, and room
// for a few repeats.
const maxFieldsParam = 512

// parseFields reads a listing's fields= parameter: the File members to
// answer, comma-separated, each at most once in the answer whatever the
// order or repeats asked for. Absent, it is nil: whole objects. id is
// always answered. An unknown name, an empty one, an empty list or the
// parameter sent twice is a 422 naming fields.
func parseFields(q url.Values) ([]fileField, error) {
	vs, ok := q["fields"]
	if !ok {
		return nil, nil
	}
	if len(vs) != 1 {
		return nil, problem.Validation("fields", "must be sent once, the names separated by commas")
	}
	v := vs[0]
	if len(v) > maxFieldsParam {
		return nil, problem.Validation("fields", "is too long")
	}
	if strings.TrimSpace(v) == "" {
		return nil, problem.Validation("fields", "must name at least one field of the File object")
	}
	want := map[string]bool{"id": true}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return nil, problem.Validation("fields", "has an empty name; separate the names with single commas")
		case !slices.ContainsFunc(fileFields, func(f fileField) bool { return f.name == name }):
			return nil, problem.Validation("fields", "names "+quoteField(name)+", which is no field of the File object (known: "+knownFields()+")")
		}
		want[name] = true
	}
	var out []fileField
	for _, f := range fileFields {
		if want[f.name] {
			out = append(out, f)
		}
	}
	return out, nil
}

// quoteField quotes a name the caller sent, cut short when long.
func quoteField(name string) string {
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	b, _ := json.Marshal(name)
	return string(b)
}

func knownFields() string {
	names := make([]string, len(fileFields))
	for i, f := range fileFields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// fieldNames are the JSON names of fields, for the store (which selects
// only the columns they need).
func fieldNames(fields []fileField) []string {
	if fields == nil {
		return nil
	}
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// writeFileList answers a file listing: list as encoding/json writes it
// (with the newline its encoder ends with), each file with only fields
// (nil: every one), written without reflection (a page of 1,000 files was
// the listing's largest cost to the server) into a buffer kept for the
// next listing.
func writeFileList(c echo.Context, list api.FileList, fields []fileField) error {
	bp, _ := listBuffers.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := appendFileList((*bp)[:0], list, fields)
	err := c.JSONBlob(http.StatusOK, b)
	if cap(b) <= maxKeptListBuffer {
		*bp = b
		listBuffers.Put(bp)
	}
	return err
}

// listBuffers keeps the buffers listings are written into (*[]byte): a
// page of 1,000 whole files is about 700 KB.
var listBuffers sync.Pool

// maxKeptListBuffer is the largest buffer a listing gives back.
const maxKeptListBuffer = 4 << 20

// appendFileList appends list's JSON to b (writeFileList).
func appendFileList(b []byte, list api.FileList, fields []fileField) []byte {
	if fields == nil {
		fields = fileFields
	}
	b = append(b, `{"data":[`...)
	for i := range list.Data {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFile(b, &list.Data[i], fields)
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, list.HasMore)
	b = append(b, `,"next_cursor":`...)
	b = appendStringPtr(b, list.NextCursor)
	if len(list.Prefixes) > 0 {
		b = append(b, `,"prefixes":[`...)
		for i, p := range list.Prefixes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, p)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendFile writes f with the members fields names, in the object's
// order; a nil forked_from is left out, as the whole object leaves it out.
func appendFile(b []byte, f *api.File, fields []fileField) []byte {
	b = append(b, '{')
	first := true
	for _, fl := range fields {
		if fl.name == "forked_from" && f.ForkedFrom == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, fl.name...)
		b = append(b, '"', ':')
		b = fl.add(b, f)
	}
	return append(b, '}')
}

// appendString writes s as encoding/json does: printable ASCII as it is,
// with a backslash before a quote or a backslash (an etag holds quotes);
// a string with any other byte that needs an escape (controls, HTML's
// <, > and &, anything not ASCII) goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return appendJSON(b, s)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendTime writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds as needed); a year it cannot write goes through it.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return appendJSON(b, t)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendJSON writes v through encoding/json (null when it cannot: no
// member of a File fails to encode).
func appendJSON(b []byte, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, j...)
}
