package mcpserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// What a tool's arguments must be, said to the model that sent them: a
// call whose arguments its input schema refuses is a tool error
// VALIDATION_FAILED naming each offending argument and what it must be
// (SEP-1303), never a protocol error the model would not see. The schema
// library decides; these functions only word its verdict.

// argumentProblem is the VALIDATION_FAILED of arguments v (decoded JSON)
// that schema refuses, or nil when it takes them.
func argumentProblem(schema *jsonschema.Schema, resolved *jsonschema.Resolved, v any) *Problem {
	obj, ok := v.(map[string]any)
	if !ok {
		return validation("arguments", "must be a JSON object of the tool's arguments, e.g. {\"path\": \"reports/a.md\"}")
	}
	err := resolved.Validate(obj)
	if err == nil {
		return nil
	}
	errs := objectErrors("", schema, obj)
	if len(errs) == 0 { // a rule the wording does not know: say the library's
		errs = []FieldError{{Field: "arguments", Message: "do not match the tool's input schema: " + err.Error()}}
	}
	var detail []string
	for _, fe := range errs {
		detail = append(detail, fe.Field+": "+fe.Message)
	}
	p := NewProblem(http.StatusUnprocessableEntity, CodeValidationFailed, strings.Join(detail, "; "))
	p.Errors = errs
	return p
}

// objectErrors words what is wrong with the members of obj, an object of
// schema s, naming each member below prefix.
func objectErrors(prefix string, s *jsonschema.Schema, obj map[string]any) []FieldError {
	var errs []FieldError
	for _, name := range s.Required {
		if _, ok := obj[name]; !ok {
			errs = append(errs, FieldError{Field: prefix + name, Message: "is required: " + describe(s.Properties[name])})
		}
	}
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		prop, known := s.Properties[name]
		if !known {
			if s.AdditionalProperties != nil {
				errs = append(errs, FieldError{Field: prefix + name, Message: unknownMember(prefix, s)})
			}
			continue
		}
		errs = append(errs, valueErrors(prefix+name, prop, obj[name])...)
	}
	return errs
}

// unknownMember says which members an object takes.
func unknownMember(prefix string, s *jsonschema.Schema) string {
	var names []string
	for name := range s.Properties {
		names = append(names, name)
	}
	order := s.PropertyOrder
	if len(order) != len(names) {
		slices.Sort(names)
		order = names
	}
	if prefix == "" {
		return "is not an argument of this tool, which takes " + strings.Join(order, ", ") + " (names are case-sensitive)"
	}
	return "is not a member here; each takes " + strings.Join(order, ", ")
}

// valueErrors words what is wrong with v, the value of field, against s.
func valueErrors(field string, s *jsonschema.Schema, v any) []FieldError {
	if s == nil {
		return nil
	}
	bad := func() []FieldError { return []FieldError{{Field: field, Message: "must be " + describe(s)}} }
	if !typeFits(s, v) {
		return bad()
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonEqual(e, v) }) {
		return bad()
	}
	switch v := v.(type) {
	case float64:
		if s.Minimum != nil && v < *s.Minimum || s.Maximum != nil && v > *s.Maximum {
			return bad()
		}
	case string:
		n := utf8.RuneCountInString(v)
		if s.MinLength != nil && n < *s.MinLength || s.MaxLength != nil && n > *s.MaxLength {
			return bad()
		}
		if s.Pattern != "" && !matches(s.Pattern, v) {
			return bad()
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems || s.MaxItems != nil && len(v) > *s.MaxItems {
			return bad()
		}
		var errs []FieldError
		for i, item := range v {
			errs = append(errs, valueErrors(field+"["+strconv.Itoa(i)+"]", s.Items, item)...)
		}
		return errs
	case map[string]any:
		return objectErrors(field+".", s, v)
	}
	return nil
}

// typeFits reports whether v has one of the types s allows (any, when s
// names none).
func typeFits(s *jsonschema.Schema, v any) bool {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		return true
	}
	return slices.ContainsFunc(types, func(t string) bool { return isType(t, v) })
}

func isType(t string, v any) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v) && !math.IsInf(v, 0)
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// matches reports whether v matches a pattern of a schema (the library
// compiled it when it resolved the schema, so it compiles).
func matches(pattern, v string) bool {
	probe := &jsonschema.Schema{Type: "string", Pattern: pattern}
	r, err := probe.Resolve(nil)
	return err == nil && r.Validate(v) == nil
}

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// describe says what a value of schema s is, for a model: "an integer
// from 1 to 100000", "a string matching ^[A-Za-z0-9]…$", "one of "error",
// "replace"".
func describe(s *jsonschema.Schema) string {
	if s == nil {
		return "a value"
	}
	if len(s.Enum) > 0 {
		var quoted []string
		for _, e := range s.Enum {
			raw, _ := json.Marshal(e)
			quoted = append(quoted, string(raw))
		}
		return "one of " + strings.Join(quoted, ", ")
	}
	t := s.Type
	if t == "" && len(s.Types) > 0 {
		t = s.Types[len(s.Types)-1]
	}
	switch t {
	case "string":
		return "a string" + bounds(s.MinLength, s.MaxLength, "character") + pattern(s)
	case "integer":
		return "an integer" + numberBounds(s)
	case "number":
		return "a number" + numberBounds(s)
	case "boolean":
		return "true or false"
	case "array":
		return "an array" + bounds(s.MinItems, s.MaxItems, "item") + ", each " + describe(s.Items)
	case "object":
		return "an object with " + members(s)
	}
	return "a value"
}

func pattern(s *jsonschema.Schema) string {
	if s.Pattern == "" {
		return ""
	}
	return " matching " + s.Pattern
}

// count is n units, the unit in the plural unless n is 1.
func count(n int, unit string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, unit)
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

func bounds(lo, hi *int, unit string) string {
	plural := func(n int) string { return count(n, unit) }
	switch {
	case lo != nil && *lo > 0 && hi != nil:
		return fmt.Sprintf(" of at least %s and at most %s", plural(*lo), plural(*hi))
	case lo != nil && *lo > 0:
		return " of at least " + plural(*lo)
	case hi != nil:
		return " of at most " + plural(*hi)
	}
	return ""
}

func numberBounds(s *jsonschema.Schema) string {
	n := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		return " of at least " + n(*s.Minimum) + " and at most " + n(*s.Maximum)
	case s.Minimum != nil:
		return " of at least " + n(*s.Minimum)
	case s.Maximum != nil:
		return " of at most " + n(*s.Maximum)
	}
	return ""
}

// members names an object's members, the required ones first.
func members(s *jsonschema.Schema) string {
	var parts []string
	for _, name := range s.Required {
		parts = append(parts, name+" ("+describe(s.Properties[name])+")")
	}
	var optional []string
	for name := range s.Properties {
		if !slices.Contains(s.Required, name) {
			optional = append(optional, name)
		}
	}
	slices.Sort(optional)
	for _, name := range optional {
		parts = append(parts, name+"? ("+describe(s.Properties[name])+")")
	}
	return strings.Join(parts, ", ")
}
