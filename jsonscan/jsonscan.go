// Package jsonscan reads JSON text held in one buffer without copying it:
// the members of an object and the elements of an array as slices of the
// buffer, and the bytes a string stands for, decoded a piece at a time. It
// lets a large request body (a batch of 64 MiB) be taken apart and its
// contents kept as slices of the one buffer, where encoding/json would
// copy every string and the body itself. It decodes exactly as
// encoding/json does. The text must be valid JSON (json.Valid): on other
// text its functions fail with ErrSyntax, never with a panic.
package jsonscan

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax says the text is not the JSON value it was expected to be.
var ErrSyntax = errors.New("jsonscan: not the JSON value expected")

// Trim returns v without the white space around it.
func Trim(v []byte) []byte { return bytes.Trim(v, " \t\r\n") }

// Kind is the first byte of the value v (white space trimmed): '{', '[',
// '"', 't', 'f', 'n', or the first byte of a number; 0 when v is empty.
func Kind(v []byte) byte {
	v = Trim(v)
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// Members calls fn with each member of the JSON object obj, in order: the
// text of its key (a JSON string, quotes included) and of its value. It
// stops at the first error fn returns, and returns it.
func Members(obj []byte, fn func(key, value []byte) error) error {
	return walk(obj, '{', '}', func(d []byte, i int) (int, error) {
		if i >= len(d) || d[i] != '"' {
			return 0, ErrSyntax
		}
		keyEnd, err := valueEnd(d, i)
		if err != nil {
			return 0, err
		}
		j := skipSpace(d, keyEnd)
		if j >= len(d) || d[j] != ':' {
			return 0, ErrSyntax
		}
		j = skipSpace(d, j+1)
		end, err := valueEnd(d, j)
		if err != nil {
			return 0, err
		}
		return end, fn(d[i:keyEnd], d[j:end])
	})
}

// Elements calls fn with the text of each element of the JSON array arr,
// in order. It stops at the first error fn returns, and returns it.
func Elements(arr []byte, fn func(value []byte) error) error {
	return walk(arr, '[', ']', func(d []byte, i int) (int, error) {
		end, err := valueEnd(d, i)
		if err != nil {
			return 0, err
		}
		return end, fn(d[i:end])
	})
}

// walk calls each for every comma-separated entry of the object or array
// v (open and close are its brackets); each returns where its entry ends.
func walk(v []byte, open, close byte, each func(d []byte, i int) (int, error)) error {
	d := Trim(v)
	if len(d) < 2 || d[0] != open || d[len(d)-1] != close {
		return ErrSyntax
	}
	i := skipSpace(d, 1)
	if d[i] == close {
		if i != len(d)-1 {
			return ErrSyntax
		}
		return nil
	}
	for {
		end, err := each(d, i)
		if err != nil {
			return err
		}
		i = skipSpace(d, end)
		switch {
		case i >= len(d):
			return ErrSyntax
		case d[i] == ',':
			i = skipSpace(d, i+1)
		case d[i] == close && i == len(d)-1:
			return nil
		default:
			return ErrSyntax
		}
	}
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n') {
		i++
	}
	return i
}

// valueEnd returns where the value that starts at d[i] ends. It skips
// nested objects and arrays by counting brackets outside strings, without
// recursion, so no nesting can exhaust the stack.
func valueEnd(d []byte, i int) (int, error) {
	if i >= len(d) {
		return 0, ErrSyntax
	}
	switch d[i] {
	case '"':
		for j := i + 1; j < len(d); j++ {
			switch d[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, ErrSyntax
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				end, err := valueEnd(d, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, ErrSyntax
	}
	j := i
	for j < len(d) && bytes.IndexByte([]byte("+-.0123456789eEtrufalsn"), d[j]) >= 0 {
		j++
	}
	if j == i {
		return 0, ErrSyntax
	}
	return j, nil
}

// String is the text of a JSON string (quotes included), read as the bytes
// it stands for.
type String struct {
	s []byte // what is left of the text between the quotes
	// pending is decoded bytes a Read had no room for; rune holds them
	// when they come from an escape.
	pending []byte
	rune    [utf8.UTFMax]byte
	err     error
}

// NewString reads the JSON string s. Text that is not a JSON string reads
// as nothing, and Read fails with ErrSyntax.
func NewString(s []byte) *String {
	s = Trim(s)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return &String{err: ErrSyntax}
	}
	return &String{s: s[1 : len(s)-1]}
}

// Read reads the decoded bytes of the string.
func (r *String) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n := 0
	for n < len(p) {
		if len(r.pending) == 0 {
			if len(r.s) == 0 {
				break
			}
			r.pending = r.next()
		}
		c := copy(p[n:], r.pending)
		n += c
		r.pending = r.pending[c:]
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Next returns the next piece of the decoded string, nil at its end: a
// run of the text itself when it needs no decoding (valid UTF-8, no
// escape), or the bytes of one escape or replaced byte. The piece is valid
// only until the next call.
func (r *String) Next() []byte {
	if len(r.pending) > 0 {
		p := r.pending
		r.pending = nil
		return p
	}
	if len(r.s) == 0 {
		return nil
	}
	return r.next()
}

// next decodes the next piece of r.s, as encoding/json's unquote does: an
// escape is one rune (a valid surrogate pair one rune, any other surrogate
// U+FFFD), a byte that is not UTF-8 becomes U+FFFD, anything else is
// itself.
func (r *String) next() []byte {
	s := r.s
	if j := plainRun(s); j > 0 {
		r.s = s[j:]
		return s[:j]
	}
	if s[0] != '\\' { // a byte that is not UTF-8
		r.s = s[1:]
		return r.encode(utf8.RuneError)
	}
	if len(s) < 2 {
		r.s = nil
		return s // a lone backslash: never in valid JSON
	}
	if s[1] == 'u' {
		return r.unicodeEscape()
	}
	r.rune[0] = s[1] // '"', '\\', '/' (anything else is never in valid JSON)
	if c, ok := escapes[s[1]]; ok {
		r.rune[0] = c
	}
	r.s = s[2:]
	return r.rune[:1]
}

// escapes are the one-letter escapes that stand for another byte.
var escapes = map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// plainRun is how many bytes at the start of s are text that needs no
// decoding: valid UTF-8, up to a backslash.
func plainRun(s []byte) int {
	j := 0
	for j < len(s) {
		c := s[j]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			j++
			continue
		}
		rr, size := utf8.DecodeRune(s[j:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		j += size
	}
	return j
}

// unicodeEscape decodes the \uXXXX escape r.s starts with (and the low
// half after it, when it is a surrogate pair).
func (r *String) unicodeEscape() []byte {
	s := r.s
	rr := hex4(s[2:])
	if rr < 0 {
		r.s = s[2:]
		return s[:2] // never in valid JSON
	}
	r.s = s[6:]
	if utf16.IsSurrogate(rr) {
		var low rune = -1
		if len(r.s) >= 6 && r.s[0] == '\\' && r.s[1] == 'u' {
			low = hex4(r.s[2:])
		}
		if dec := utf16.DecodeRune(rr, low); dec != utf8.RuneError {
			r.s = r.s[6:]
			return r.encode(dec)
		}
		rr = utf8.RuneError
	}
	return r.encode(rr)
}

func (r *String) encode(c rune) []byte {
	return r.rune[:utf8.EncodeRune(r.rune[:], c)]
}

// hex4 is the value of the four hex digits that start s, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var v rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		v = v<<4 | rune(c)
	}
	return v
}

// StringLen is how many bytes the JSON string s stands for.
func StringLen(s []byte) int {
	r := NewString(s)
	n := 0
	for p := r.Next(); p != nil; p = r.Next() {
		n += len(p)
	}
	return n
}

// AppendString appends the bytes the JSON string s stands for to dst.
func AppendString(dst, s []byte) []byte {
	dst = slices.Grow(dst, StringLen(s))
	r := NewString(s)
	for p := r.Next(); p != nil; p = r.Next() {
		dst = append(dst, p...)
	}
	return dst
}

// Plain reports whether the JSON string s stands for its own text between
// the quotes (no escape, valid UTF-8), which is then that text.
func Plain(s []byte) ([]byte, bool) {
	s = Trim(s)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, false
	}
	inner := s[1 : len(s)-1]
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return nil, false
	}
	return inner, true
}
