package handlers

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
)

// fileField is one member of the File object that a listing's fields=
// may name: its JSON name and its value in a rendered file.
type fileField struct {
	name string
	get  func(f *api.File) any
}

// fileFields are the File object's members in the order the object
// lists them. id is always answered: it is what every other route takes.
var fileFields = []fileField{
	{"id", func(f *api.File) any { return f.ID }},
	{"object", func(f *api.File) any { return f.Object }},
	{"path", func(f *api.File) any { return f.Path }},
	{"size_bytes", func(f *api.File) any { return f.SizeBytes }},
	{"content_type", func(f *api.File) any { return f.ContentType }},
	{"sha256", func(f *api.File) any { return f.SHA256 }},
	{"etag", func(f *api.File) any { return f.ETag }},
	{"version", func(f *api.File) any { return f.Version }},
	{"url", func(f *api.File) any { return f.URL }},
	{"agent_id", func(f *api.File) any { return f.AgentID }},
	{"run_id", func(f *api.File) any { return f.RunID }},
	{"last_agent_id", func(f *api.File) any { return f.LastAgentID }},
	{"last_run_id", func(f *api.File) any { return f.LastRunID }},
	{"created_at", func(f *api.File) any { return f.CreatedAt }},
	{"updated_at", func(f *api.File) any { return f.UpdatedAt }},
	{"deleted_at", func(f *api.File) any { return f.DeletedAt }},
	{"purge_after", func(f *api.File) any { return f.PurgeAfter }},
	{"expires_at", func(f *api.File) any { return f.ExpiresAt }},
	{"blocked", func(f *api.File) any { return f.Blocked }},
	{"mode", func(f *api.File) any { return f.Mode }},
	{"mtime", func(f *api.File) any { return f.MTime }},
	{"kind", func(f *api.File) any { return f.Kind }},
	// Absent when the file is no fork's copy, as in the whole object.
	{"forked_from", func(f *api.File) any { return f.ForkedFrom }},
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

// projectedFile is a File object with only some of its members.
type projectedFile struct {
	f      *api.File
	fields []fileField
}

// MarshalJSON writes the chosen members in the object's order; a nil
// forked_from is left out, as the whole object leaves it out.
func (p projectedFile) MarshalJSON() ([]byte, error) {
	buf := make([]byte, 0, 32*len(p.fields))
	buf = append(buf, '{')
	first := true
	for _, fl := range p.fields {
		v := fl.get(p.f)
		if fl.name == "forked_from" && p.f.ForkedFrom == nil {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, '"')
		buf = append(buf, fl.name...)
		buf = append(buf, '"', ':')
		buf = append(buf, b...)
	}
	return append(buf, '}'), nil
}

// projectedList is a FileList whose files carry only the chosen members.
type projectedList struct {
	Data       []projectedFile `json:"data"`
	HasMore    bool            `json:"has_more"`
	NextCursor *string         `json:"next_cursor"`
	Prefixes   []string        `json:"prefixes,omitempty"`
}

// fileListBody is what a file listing answers: list itself, or with
// fields=, each file with only those members.
func fileListBody(list api.FileList, fields []fileField) any {
	if fields == nil {
		return list
	}
	out := projectedList{Data: make([]projectedFile, len(list.Data)), HasMore: list.HasMore, NextCursor: list.NextCursor, Prefixes: list.Prefixes}
	for i := range list.Data {
		out.Data[i] = projectedFile{f: &list.Data[i], fields: fields}
	}
	return out
}
