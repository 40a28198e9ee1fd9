package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// goTypeWords may never appear in a message: they name Go types, not the
// API's JSON.
var goTypeWords = []string{"handlers.", "json.", "[]", "*", "int64", "map[", "RawMessage", "struct"}

// wrongValues are JSON values of every other kind than the one a field
// takes, with the words the answer must use for that kind.
var wrongValues = map[string][]string{
	"a string":      {`1`, `1.5`, `true`, `{}`, `[]`, `["x"]`},
	"an integer":    {`"1"`, `1.5`, `1e30`, `true`, `{}`, `[]`},
	"an array":      {`{}`, `"x"`, `1`, `false`},
	"a JSON object": {`[]`, `"x"`, `1`, `true`, `[{}]`},
}

// TestJSONFieldsOfTheWrongType sends every field of every JSON body the API
// takes with a value of each wrong kind: the answer is 422
// VALIDATION_FAILED naming the field and saying what was expected in the
// API's words, never a Go type name.
func TestJSONFieldsOfTheWrongType(t *testing.T) {
	c, _ := setup(t)
	type field struct {
		name string // as the problem names it
		kind string // a key of wrongValues
		// body is the request body with v as the field's value.
		body func(v string) string
	}
	upload := func(name string) func(string) string {
		return func(v string) string {
			fields := map[string]string{"path": `"a.txt"`, "size_bytes": `10`}
			fields[name] = v
			return jsonObject(fields)
		}
	}
	complete := func(name string) func(string) string {
		return func(v string) string { return jsonObject(map[string]string{name: v}) }
	}
	item := func(name string) func(string) string {
		return func(v string) string {
			fields := map[string]string{"op": `"put"`, "path": `"a.txt"`, "content": `"x"`}
			fields[name] = v
			return `{"operations":[` + jsonObject(fields) + `]}`
		}
	}
	whole := func(v string) string { return v }
	routes := []struct {
		route  string
		fields []field
	}{
		{"/v1/uploads", []field{
			{"body", "a JSON object", whole},
			{"path", "a string", upload("path")},
			{"size_bytes", "an integer", upload("size_bytes")},
			{"content_type", "a string", upload("content_type")},
			{"if_exists", "a string", upload("if_exists")},
			{"sha256", "a string", upload("sha256")},
		}},
		{"/v1/uploads/upl_0000000000000000000000000a/complete", []field{
			{"body", "a JSON object", whole},
			{"if_exists", "a string", complete("if_exists")},
			{"sha256", "a string", complete("sha256")},
		}},
		{"/v1/batch", []field{
			{"body", "a JSON object", whole},
			{"operations", "an array", func(v string) string { return `{"operations":` + v + `}` }},
			{"operations[0]", "a JSON object", func(v string) string { return `{"operations":[` + v + `]}` }},
			{"operations[0].op", "a string", item("op")},
			{"operations[0].path", "a string", item("path")},
			{"operations[0].content", "a string", item("content")},
			{"operations[0].encoding", "a string", item("encoding")},
			{"operations[0].content_type", "a string", item("content_type")},
			{"operations[0].if_exists", "a string", item("if_exists")},
			{"operations[0].idempotency_key", "a string", item("idempotency_key")},
			{"operations[0].file_id", "a string", item("file_id")},
		}},
	}
	n := 0
	for _, r := range routes {
		for _, f := range r.fields {
			for _, v := range wrongValues[f.kind] {
				n++
				body := f.body(v)
				t.Run(fmt.Sprintf("%s/%s=%s", r.route, f.name, v), func(t *testing.T) {
					res := c.Do("POST", r.route, body, "Content-Type", "application/json", "Idempotency-Key", fmt.Sprintf("wrong-type-%d", n))
					p := res.ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
					if len(p.Errors) != 1 || p.Errors[0].Field != f.name {
						t.Fatalf("errors %+v, want one naming %s\nbody: %s", p.Errors, f.name, body)
					}
					if want := "must be " + f.kind; p.Errors[0].Message != want {
						t.Fatalf("message %q, want %q\nbody: %s", p.Errors[0].Message, want, body)
					}
					for _, text := range []string{p.Detail, p.Errors[0].Message} {
						for _, w := range goTypeWords {
							if strings.Contains(text, w) {
								t.Fatalf("%q names a Go type (%q)", text, w)
							}
						}
					}
				})
			}
		}
	}
}

// jsonObject writes fields (raw JSON values) as an object.
func jsonObject(fields map[string]string) string {
	parts := make([]string, 0, len(fields))
	for k, v := range fields {
		name, _ := json.Marshal(k)
		parts = append(parts, string(name)+":"+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
