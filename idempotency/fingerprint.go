package idempotency

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/jsonscan"
)

// Request describes what a keyed request asks for, apart from its content:
// the operation, its target, its parameters with defaults filled in, the
// media type and the attribution headers. Two requests with equal Requests
// and equal content are the same request.
type Request struct {
	Operation string // "put", "delete", "restore", …
	Target    string // the path or resource id
	Params    map[string]string
	MediaType string
	By        agentfs.Attribution
}

// Sum is the SHA-256 of an unambiguous encoding of the request.
func (r Request) Sum() []byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	field("v1")
	field(r.Operation)
	field(r.Target)
	names := make([]string, 0, len(r.Params))
	for k := range r.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		field(k)
		field(r.Params[k])
	}
	field(r.MediaType)
	field(r.By.AgentID)
	field(r.By.RunID)
	return h.Sum(nil)
}

// PutRequest is the request of a put, the same whichever route carries it
// (POST /v1/files raw or multipart, or a batch put item): its content is
// fingerprinted separately, as the SHA-256 of the bytes.
func PutRequest(p agentfs.Put) Request {
	ifExists := "error"
	if p.Replace {
		ifExists = "replace"
	}
	ifNoneMatch := ""
	if p.IfNoneMatchAny {
		ifNoneMatch = "*"
	}
	params := map[string]string{"if_exists": ifExists, "if_match": p.IfMatch, "if_none_match": ifNoneMatch}
	if p.ExpiresIn > 0 { // absent before expiry existed: keys recorded then still replay
		params["expires_in"] = strconv.FormatInt(int64(p.ExpiresIn.Seconds()), 10)
	}
	p.Meta.Params(params)
	return Request{
		Operation: agentfs.OpPut,
		Target:    p.Path,
		Params:    params,
		MediaType: p.ContentType,
		By:        p.By,
	}
}

// ErrInvalidJSON says a body is not a single JSON value.
var ErrInvalidJSON = errors.New("body is not valid JSON")

// CanonicalJSON re-encodes one JSON value so that object key order and
// insignificant whitespace do not matter, while every value, array element
// and field still does. Numbers keep their literal text. It is the text
// encoding/json gives for the value decoded with UseNumber (a repeated key
// keeps its last value, map keys sorted, HTML not escaped), which the
// fingerprints of recorded keys were taken of.
func CanonicalJSON(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteCanonicalJSON(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteCanonicalJSON writes CanonicalJSON's text of data to w as it walks
// data, without decoding it into Go values: what it holds meanwhile is the
// keys of the objects it is in, so a large body costs no copy of itself.
func WriteCanonicalJSON(w io.Writer, data []byte) error {
	if !json.Valid(data) {
		return ErrInvalidJSON
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := writeCanonical(bw, jsonscan.Trim(data)); err != nil {
		return err
	}
	return bw.Flush()
}

// writeCanonical writes the canonical text of the valid JSON value v.
func writeCanonical(w *bufio.Writer, v []byte) error {
	switch v[0] {
	case '{':
		return writeObject(w, v)
	case '[':
		w.WriteByte('[')
		first := true
		err := jsonscan.Elements(v, func(e []byte) error {
			if !first {
				w.WriteByte(',')
			}
			first = false
			return writeCanonical(w, e)
		})
		w.WriteByte(']')
		return err
	case '"':
		w.WriteByte('"')
		r := jsonscan.NewString(v)
		for p := r.Next(); p != nil; p = r.Next() {
			writeEscaped(w, p)
		}
		w.WriteByte('"')
		return nil
	}
	_, err := w.Write(v) // a number keeps its literal text; true, false, null
	return err
}

// writeObject writes an object with its keys sorted as Go sorts strings;
// a repeated key keeps its last value, as decoding into a map does.
func writeObject(w *bufio.Writer, v []byte) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	at := map[string]int{}
	err := jsonscan.Members(v, func(k, value []byte) error {
		key := string(jsonscan.AppendString(nil, k))
		if i, ok := at[key]; ok {
			members[i].value = value
			return nil
		}
		at[key] = len(members)
		members = append(members, member{key, value})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	w.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('"')
		writeEscaped(w, []byte(m.key))
		w.WriteString(`":`)
		if err := writeCanonical(w, m.value); err != nil {
			return err
		}
	}
	w.WriteByte('}')
	return nil
}

// writeEscaped writes the bytes of a string as encoding/json escapes them
// without HTML escaping: quote, backslash and control characters, U+2028
// and U+2029, and a byte that is not UTF-8 as U+FFFD.
func writeEscaped(w *bufio.Writer, p []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(p); {
		b := p[i]
		if b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' {
				i++
				continue
			}
			w.Write(p[start:i])
			switch b {
			case '\\', '"':
				w.Write([]byte{'\\', b})
			case '\b':
				w.WriteString(`\b`)
			case '\f':
				w.WriteString(`\f`)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.Write([]byte{'\\', 'u', '0', '0', hex[b>>4], hex[b&0xF]})
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(p[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			w.Write(p[start:i])
			w.WriteString(`\ufffd`)
		case c == '\u2028' || c == '\u2029':
			w.Write(p[start:i])
			w.Write([]byte{'\\', 'u', '2', '0', '2', hex[c&0xF]})
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	w.Write(p[start:])
}

// JSONContentHash is the content fingerprint of a JSON body: the SHA-256 of
// its canonical form, hashed as it is written.
func JSONContentHash(data []byte) ([]byte, error) {
	h := sha256.New()
	if err := WriteCanonicalJSON(h, data); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
