package mcpserver

import (
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Portable schemas: what the schema library infers from Go types gives a
// pointer, slice or map the type ["null", T]. That is legal JSON Schema,
// but clients that map tool schemas onto a dialect with one type per
// schema (the Inspector warns of it, model providers' function
// declarations) may refuse the tool or drop the constraint. So an input
// schema says only T (an optional argument sent as null counts as absent,
// see dropNullOptionals), and an output schema that may hold null says so
// with anyOf [{"type": "null"}, {"type": T, …}], one type per branch.

// portableInput gives every schema in s one type, dropping null.
func portableInput(s *jsonschema.Schema) {
	walkSchemas(s, func(s *jsonschema.Schema) {
		if other, ok := nullable(s); ok {
			s.Type, s.Types = other, nil
		}
	})
}

// portableOutput splits every schema in s that allows null and one other
// type into an anyOf of two branches of one type each.
func portableOutput(s *jsonschema.Schema) {
	walkSchemas(s, func(s *jsonschema.Schema) {
		other, ok := nullable(s)
		if !ok {
			return
		}
		branch := *s
		branch.Type, branch.Types, branch.Description = other, nil, ""
		*s = jsonschema.Schema{Description: s.Description,
			AnyOf: []*jsonschema.Schema{{Type: "null"}, &branch}}
	})
}

// nullable reports whether s allows exactly null and one other type, and
// names that one.
func nullable(s *jsonschema.Schema) (string, bool) {
	if len(s.Types) != 2 || !slices.Contains(s.Types, "null") {
		return "", false
	}
	if s.Types[0] == "null" {
		return s.Types[1], true
	}
	return s.Types[0], true
}

// walkSchemas calls f on every schema of s, the innermost first.
func walkSchemas(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	for _, p := range s.Properties {
		walkSchemas(p, f)
	}
	for _, d := range s.Defs {
		walkSchemas(d, f)
	}
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for _, sub := range list {
			walkSchemas(sub, f)
		}
	}
	walkSchemas(s.Items, f)
	walkSchemas(s.AdditionalProperties, f)
	f(s)
}

// dropNullOptionals removes the members of args that are null and that
// schema does not require: an optional argument sent as null is an
// argument left out, as most models mean it.
func dropNullOptionals(schema *jsonschema.Schema, args map[string]any) {
	for name, v := range args {
		if v == nil && !slices.Contains(schema.Required, name) {
			delete(args, name)
		}
	}
}
