// Package jsonutf8 finds the first string of a JSON document that is not
// Unicode text: bytes that are not UTF-8, or a \u escape of a surrogate
// (\ud800–\udfff) that is not half of a pair. encoding/json decodes both
// into U+FFFD without a word, so a path or a text that arrives that way
// would be stored as something else than was sent; every JSON door of
// AgentFS checks its documents here first and refuses them, as the query
// string's paths are refused. Member names are checked too.
//
// Check reads the document once, without allocating unless it finds a
// fault, and does not judge the rest of the syntax: a document that is not
// JSON is the decoder's to refuse.
package jsonutf8

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Fault is the first string of a document that is not text.
type Fault struct {
	// Field is where it is, in the API's words: member names joined by
	// '.', array elements as [i] ("operations[3].path"); "" for the
	// document itself.
	Field string
	// Name is the member whose value holds the string, directly or in an
	// array ("path" for operations[3].path, "paths" for paths[2]); ""
	// when no member does.
	Name string
	// Key says the string is a member's name (Field is then the object
	// that has it).
	Key bool
	// Reason says what is wrong, in words fit for a caller.
	Reason string
}

// Error reads "operations[3].path: is not valid UTF-8".
func (f *Fault) Error() string {
	if f.Field == "" {
		return f.Reason
	}
	return f.Field + ": " + f.Reason
}

// frame is one object or array the scan is inside.
type frame struct {
	object  bool
	wantKey bool   // an object's next string is a member name
	name    []byte // an object's current member name, raw (escapes kept)
	index   int    // an array's current element
}

// Check returns the first string of doc that is not Unicode text, or nil.
func Check(doc []byte) *Fault {
	var stack []frame
	for i := 0; i < len(doc); {
		switch doc[i] {
		case '{':
			stack = append(stack, frame{object: true, wantKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			if len(stack) == 0 {
				return nil // not JSON: the decoder's to say
			}
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					stack[n-1].wantKey = true
				} else {
					stack[n-1].index++
				}
			}
		case ':':
			if n := len(stack); n > 0 {
				stack[n-1].wantKey = false
			}
		case '"':
			end, reason := scanString(doc, i)
			key := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
			if reason != "" {
				return fault(stack, key, reason)
			}
			if end < 0 {
				return nil // unterminated or malformed: the decoder's to say
			}
			if key {
				stack[len(stack)-1].name = doc[i+1 : end-1]
			}
			i = end
			continue
		}
		i++
	}
	return nil
}

// scanString reads the string that starts with the quote at doc[i]: the
// index after its closing quote, or -1 when it is not a well-formed JSON
// string; or why it is not text.
func scanString(doc []byte, i int) (end int, reason string) {
	for j := i + 1; j < len(doc); {
		c := doc[j]
		switch {
		case c == '"':
			return j + 1, ""
		case c == '\\':
			if j+1 >= len(doc) {
				return -1, ""
			}
			if doc[j+1] != 'u' {
				j += 2
				continue
			}
			r, ok := hex4(doc, j+2)
			if !ok {
				return -1, ""
			}
			switch {
			case r >= 0xd800 && r <= 0xdbff:
				if lowSurrogate(doc, j+6) {
					j += 12
					continue
				}
				return -1, fmt.Sprintf(`holds \u%04x, the first half of a surrogate pair without its second; text must be Unicode`, r)
			case r >= 0xdc00 && r <= 0xdfff:
				return -1, fmt.Sprintf(`holds \u%04x, the second half of a surrogate pair without its first; text must be Unicode`, r)
			}
			j += 6
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(doc[j:])
			if r == utf8.RuneError && size == 1 {
				return -1, "is not valid UTF-8"
			}
			j += size
		}
	}
	return -1, ""
}

// lowSurrogate reports whether doc[j] starts a \u escape of a low
// surrogate, the second half of a pair.
func lowSurrogate(doc []byte, j int) bool {
	if j+1 >= len(doc) || doc[j] != '\\' || doc[j+1] != 'u' {
		return false
	}
	r, ok := hex4(doc, j+2)
	return ok && r >= 0xdc00 && r <= 0xdfff
}

func hex4(doc []byte, j int) (rune, bool) {
	if j+4 > len(doc) {
		return 0, false
	}
	var r rune
	for _, c := range doc[j : j+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// fault describes the string found at the top of stack.
func fault(stack []frame, key bool, reason string) *Fault {
	var b strings.Builder
	name := ""
	for n, f := range stack {
		last := n == len(stack)-1
		switch {
		case f.object && last && key:
		case f.object:
			name = memberName(f.name)
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
		default:
			fmt.Fprintf(&b, "[%d]", f.index)
		}
	}
	if key {
		return &Fault{Field: b.String(), Key: true, Reason: "has a member name that " + reason}
	}
	return &Fault{Field: b.String(), Name: name, Reason: reason}
}

// memberName decodes a raw member name (checked already, so it decodes).
func memberName(raw []byte) string {
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw)
	}
	return s
}
