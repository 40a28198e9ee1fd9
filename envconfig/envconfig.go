// Package envconfig reads AgentFS's configuration from the environment into
// the config structs of its components (storage.Config, handlers.Limits,
// batch.Config, ...), by the env tags on their fields, with
// github.com/caarlos0/env: each variable is spelled once, on the field it
// sets, and each component owns its settings. A value is read trimmed; an
// empty one is unset.
//
// Every number must be positive (a float may be 0) unless the field says
// otherwise. Beside the library's `env` and `envDefault`, a field may carry:
//
//	envZero:"N: meaning"  the value 0 is accepted too, and stored as N
//	                      (the component's own "off"): 0 means that
//	envMin:"V"            a smaller value is refused (V in the field's unit)
//	envMax:"N"            a larger whole number is taken as N
//
// A value that does not fit is refused with a message in the words of the
// variable: "AGENTFS_BATCH_WORKERS must be a positive whole number".
package envconfig

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Problems are the values a Read refused, each in the words of its
// variable; its Error lists them all, so an operator fixes them in one go.
type Problems []string

func (p Problems) Error() string { return strings.Join(p, "; ") }

// setting is one field with an env tag.
type setting struct {
	key   string
	field reflect.StructField
	value reflect.Value
}

// settings lists the fields of *dst (and of the structs within) that name a
// variable, in the order the library reads them.
func settings(dst any) []setting {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("envconfig: %T is not a pointer to a struct", dst))
	}
	var out []setting
	walk(v.Elem(), &out)
	return out
}

func walk(v reflect.Value, out *[]setting) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case key == "-":
		case key != "":
			*out = append(*out, setting{key: key, field: f, value: v.Field(i)})
		case f.Type.Kind() == reflect.Struct:
			walk(v.Field(i), out)
		}
	}
}

// Variable is one variable a config struct reads.
type Variable struct {
	Name string
	// Default is its envDefault ("" when it has none).
	Default string
}

// Variables lists the variables the fields of *dst name, in order.
func Variables(dst any) []Variable {
	var out []Variable
	for _, s := range settings(dst) {
		out = append(out, Variable{Name: s.key, Default: s.field.Tag.Get("envDefault")})
	}
	return out
}

// Name is the variable that sets field, a pointer to a field of *dst: the
// checks that span fields word their messages with it.
func Name(dst any, field any) string {
	p := reflect.ValueOf(field)
	for _, s := range settings(dst) {
		if s.value.Addr().Pointer() == p.Pointer() && s.value.Addr().Type() == p.Type() {
			return s.key
		}
	}
	panic(fmt.Sprintf("envconfig: %T is no setting of %T", field, dst))
}

// Read fills *dst from getenv: each field's variable, or its default. It
// returns Problems naming every variable whose value it refused.
func Read(getenv func(string) string, dst any) error {
	all := settings(dst)
	environ := map[string]string{}
	for _, s := range all {
		if v := strings.TrimSpace(getenv(s.key)); v != "" {
			environ[s.key] = v
		}
	}
	// The library reads one field at a time: OnSet names it, then (when
	// it has a value) its type's parser runs. That is how a value the
	// parser refuses is pinned on its variable.
	var current string
	failed := map[string]bool{}
	funcs := map[reflect.Type]env.ParserFunc{}
	for t, k := range kinds {
		funcs[t] = func(v string) (any, error) {
			x, err := k.parse(v)
			if err != nil {
				failed[current] = true
			}
			return x, err
		}
	}
	err := env.ParseWithOptions(dst, env.Options{Environment: environ, FuncMap: funcs,
		OnSet: func(key string, _ any, _ bool) { current = key }})
	worded, problems := unparsed(err, all)
	for _, s := range all {
		raw, ok := environ[s.key]
		if !ok {
			raw, ok = s.field.Tag.Lookup("envDefault")
		}
		k, ours := kinds[s.field.Type]
		switch {
		case worded[s.key] != "":
			problems = append(problems, worded[s.key])
		case ours && failed[s.key]:
			problems = append(problems, s.key+" must be "+k.want+zeroHint(s.field))
		case ok:
			if msg := check(s, raw); msg != "" {
				problems = append(problems, msg)
			}
		}
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

// unparsed words what the library refused that no parser of kinds did (a
// value of a type that reads itself, an encoding.TextUnmarshaler), by
// variable; what it cannot pin on one comes back as it is.
func unparsed(err error, all []setting) (map[string]string, Problems) {
	var agg env.AggregateError
	if err == nil {
		return nil, nil
	}
	if !errors.As(err, &agg) {
		return nil, Problems{err.Error()}
	}
	worded := map[string]string{}
	var other Problems
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if _, ours := kinds[pe.Type]; ours {
				continue // worded with the other checks
			}
			if s, ok := only(all, pe); ok {
				worded[s.key] = s.key + ": " + pe.Err.Error()
				continue
			}
		}
		other = append(other, e.Error())
	}
	return worded, other
}

// only is the one setting a parse error can be about.
func only(all []setting, pe env.ParseError) (setting, bool) {
	var found []setting
	for _, s := range all {
		if s.field.Name == pe.Name && s.field.Type == pe.Type {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return setting{}, false
	}
	return found[0], true
}

// check applies the rules past parsing to the parsed value of s (read from
// raw): 0 where envZero allows it, positive, envMin, envMax. It returns a
// message when the value is refused for a reason its kind does not say.
func check(s setting, raw string) string {
	k, ok := kinds[s.field.Type]
	if !ok || k.number == nil {
		return ""
	}
	if zero, ok := s.field.Tag.Lookup("envZero"); ok && raw == "0" {
		n, _, _ := strings.Cut(zero, ":")
		setNumber(s.value, mustFloat(n))
		return ""
	}
	v := k.number(s.value)
	if v < 0 || v == 0 && s.field.Type.Kind() != reflect.Float64 {
		return s.key + " must be " + k.want + zeroHint(s.field)
	}
	if m, ok := s.field.Tag.Lookup("envMin"); ok && v < k.number(parsed(s, m)) {
		return s.key + " must be at least " + k.format(m)
	}
	if m, ok := s.field.Tag.Lookup("envMax"); ok && v > mustFloat(m) {
		setNumber(s.value, mustFloat(m))
	}
	return ""
}

// zeroHint says what 0 means, for a field that accepts it.
func zeroHint(f reflect.StructField) string {
	if zero, ok := f.Tag.Lookup("envZero"); ok {
		if _, meaning, ok := strings.Cut(zero, ":"); ok {
			return " (or 0: " + strings.TrimSpace(meaning) + ")"
		}
	}
	return ""
}

// parsed is a tag's value read as the field's type.
func parsed(s setting, tag string) reflect.Value {
	x, err := kinds[s.field.Type].parse(tag)
	if err != nil {
		panic(fmt.Sprintf("envconfig: %s: tag value %q: %v", s.key, tag, err))
	}
	return reflect.ValueOf(x)
}

func mustFloat(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		panic(fmt.Sprintf("envconfig: tag value %q is not a number", s))
	}
	return f
}

func setNumber(v reflect.Value, f float64) {
	switch v.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f))
	case reflect.Uint64:
		v.SetUint(uint64(f))
	case reflect.Float64:
		v.SetFloat(f)
	}
}

// kind is how values of one Go type are read and worded.
type kind struct {
	parse  func(string) (any, error)
	want   string                      // what a value must be, for messages
	number func(reflect.Value) float64 // nil: not a number
	format func(tag string) string     // an envMin, for messages
}

// kinds are the types settings have: a count is an int, a number of bytes
// an int64 (or uint64).
var kinds = map[reflect.Type]kind{
	reflect.TypeFor[int]():           {parse: parseInt, want: "a positive whole number", number: intValue, format: asWritten},
	reflect.TypeFor[int32]():         {parse: parseInt32, want: "a positive whole number", number: intValue, format: asWritten},
	reflect.TypeFor[int64]():         {parse: parseInt64, want: "a positive number of bytes", number: intValue, format: bytesText},
	reflect.TypeFor[uint64]():        {parse: parseUint, want: "a positive number of bytes", number: uintValue, format: bytesText},
	reflect.TypeFor[float64]():       {parse: parseFloat, want: "a number ≥ 0 (0 disables it)", number: floatValue, format: asWritten},
	reflect.TypeFor[time.Duration](): {parse: parseDuration, want: "a positive duration such as 168h", number: intValue, format: asWritten},
	reflect.TypeFor[bool]():          {parse: parseBool, want: "true or false"},
}

func parseInt(v string) (any, error) {
	n, err := strconv.ParseInt(v, 10, strconv.IntSize)
	return int(n), err
}

func parseInt64(v string) (any, error) { return strconv.ParseInt(v, 10, 64) }

// parseInt32 takes any whole number, a larger one as the largest int32:
// envMax bounds it further.
func parseInt32(v string) (any, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, err
	}
	return int32(max(min(n, math.MaxInt32), math.MinInt32)), nil
}

func parseUint(v string) (any, error) { return strconv.ParseUint(v, 10, 64) }

func parseFloat(v string) (any, error) { return strconv.ParseFloat(v, 64) }

func parseDuration(v string) (any, error) { return time.ParseDuration(v) }

func parseBool(v string) (any, error) { return strconv.ParseBool(v) }

func intValue(v reflect.Value) float64   { return float64(v.Int()) }
func uintValue(v reflect.Value) float64  { return float64(v.Uint()) }
func floatValue(v reflect.Value) float64 { return v.Float() }

func asWritten(tag string) string { return tag }

// bytesText writes a whole number of MiB as such ("5 MiB").
func bytesText(tag string) string {
	n, err := strconv.ParseInt(tag, 10, 64)
	if err == nil && n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return tag
}
