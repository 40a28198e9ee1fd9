package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// What the /mcp door reads of a request before the SDK does: whether its
// body is a JSON-RPC batch and how many calls it holds, whether the
// negotiated protocol has batches, and, of a body too large to take, the
// id, method and tool of the call it holds. Untrusted input, all of it.

// envelope is what a request body holds.
type envelope struct {
	batch bool        // a JSON array of messages
	calls int         // requests with an id (notifications and responses are not calls)
	first messageHead // the message, when it is not a batch
}

// messageHead is the part of a JSON-RPC message the door looks at.
type messageHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// isCall reports whether a message is a request that expects an answer.
func (m messageHead) isCall() bool {
	return m.Method != "" && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
}

// errNotJSONRPC is a body that is not a JSON-RPC message or batch; the SDK
// answers it as it does any malformed body.
var errNotJSONRPC = errors.New("mcpserver: the body is not a JSON-RPC message or batch")

// inspect reads a request body's envelope, one message at a time: a batch
// is never held twice.
func inspect(body []byte) (envelope, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return envelope{}, errNotJSONRPC
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var env envelope
	if trimmed[0] != '[' {
		var m messageHead
		if err := dec.Decode(&m); err != nil {
			return envelope{}, errNotJSONRPC
		}
		if m.isCall() {
			env.calls = 1
		}
		env.first = m
		return atEnd(env, dec, trimmed)
	}
	if _, err := dec.Token(); err != nil {
		return envelope{}, errNotJSONRPC
	}
	env.batch = true
	for dec.More() {
		var m messageHead
		if err := dec.Decode(&m); err != nil {
			return envelope{}, errNotJSONRPC
		}
		if m.isCall() {
			env.calls++
		}
	}
	if _, err := dec.Token(); err != nil {
		return envelope{}, errNotJSONRPC
	}
	return atEnd(env, dec, trimmed)
}

// atEnd is env when dec read all of body but white space.
func atEnd(env envelope, dec *json.Decoder, body []byte) (envelope, error) {
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return envelope{}, errNotJSONRPC
	}
	return env, nil
}

// batchProtocol is the one protocol version whose JSON-RPC batches MCP
// had: they came in 2025-03-26 and left in 2025-06-18.
const batchProtocol = "2025-03-26"

// batchesAllowed reports whether a request with these MCP-Protocol-Version
// header values may be a batch. Without the header the request is of
// 2025-03-26 (the specification's rule for a server that cannot tell), the
// one version with batches; two values name no one version.
func batchesAllowed(versions []string) bool {
	switch len(versions) {
	case 0:
		return true
	case 1:
		return strings.TrimSpace(versions[0]) == batchProtocol
	}
	return false
}

// callHead is what the door learns of a body too large to take: the call's
// id (raw JSON; nil when none was found), method and tool.
type callHead struct {
	ID     json.RawMessage
	Method string
	Tool   string
	Batch  bool
}

// Bounds of what scanCall keeps of a value: anything longer is not an id,
// a method or a tool name the door would answer for.
const (
	maxKeyBytes  = 64
	maxHeadBytes = 256
)

// errTooDeep is a value nested deeper than any JSON-RPC message is.
var errTooDeep = errors.New("mcpserver: JSON nested too deeply")

// scanCall reads a JSON-RPC message from r in constant memory, skipping
// values without keeping them, for the top-level id and method and, in
// params, the tool's name; a key given twice counts as its last, as
// encoding/json reads it. It stops at the end of the message, at the first
// byte that is not JSON, or after limit bytes.
func scanCall(r io.Reader, limit int64) (callHead, error) {
	s := &scanner{r: bufio.NewReader(io.LimitReader(r, limit))}
	var h callHead
	c, err := s.next()
	switch {
	case err != nil:
		return h, err
	case c == '[':
		h.Batch = true
		return h, nil
	case c != '{':
		return h, errNotJSONRPC
	}
	err = s.object(func(key string) error {
		switch key {
		case "id":
			raw, err := s.scalar()
			if raw != nil && !json.Valid(raw) {
				raw = nil
			}
			h.ID = raw
			return err
		case "method":
			v, err := s.shortString()
			h.Method = v
			return err
		case "params":
			h.Tool = ""
			return s.params(&h)
		}
		return s.skip(0)
	})
	return h, err
}

// scanner reads JSON a byte at a time without keeping what it skips.
type scanner struct {
	r *bufio.Reader
}

// next is the next byte that is not white space.
func (s *scanner) next() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, nil
		}
	}
}

// object reads the members of an object whose '{' was read, calling
// member for each key with the reader at its value.
func (s *scanner) object(member func(key string) error) error {
	c, err := s.next()
	if err != nil || c == '}' {
		return err
	}
	for {
		if c != '"' {
			return errNotJSONRPC
		}
		raw, err := s.stringBody(maxKeyBytes)
		if err != nil {
			return err
		}
		var key string
		if raw != nil {
			_ = json.Unmarshal(raw, &key)
		}
		if c, err = s.next(); err != nil || c != ':' {
			return errors.Join(err, errNotJSONRPC)
		}
		if err := member(key); err != nil {
			return err
		}
		var end bool
		if c, end, err = s.separator('}'); err != nil || end {
			return err
		}
	}
}

// separator reads what follows a member or an element: the closing byte
// ends the object or array (end); a comma is followed by the first byte
// of the next one, c.
func (s *scanner) separator(closing byte) (c byte, end bool, err error) {
	if c, err = s.next(); err != nil {
		return 0, false, err
	}
	switch c {
	case closing:
		return 0, true, nil
	case ',':
		c, err = s.next()
		return c, false, err
	}
	return 0, false, errNotJSONRPC
}

// params reads a call's params object for the tool's name.
func (s *scanner) params(h *callHead) error {
	c, err := s.next()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.skipFrom(c, 0)
	}
	return s.object(func(key string) error {
		if key == "name" {
			v, err := s.shortString()
			h.Tool = v
			return err
		}
		return s.skip(0)
	})
}

// shortString reads a string value of at most maxHeadBytes (anything
// else is skipped and reads as "").
func (s *scanner) shortString() (string, error) {
	c, err := s.next()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", s.skipFrom(c, 0)
	}
	raw, err := s.stringBody(maxHeadBytes)
	var v string
	if err == nil && raw != nil {
		_ = json.Unmarshal(raw, &v)
	}
	return v, err
}

// scalar reads a string, number, true, false or null as raw JSON (nil for
// a longer one, or an object or array, which it skips).
func (s *scanner) scalar() (json.RawMessage, error) {
	c, err := s.next()
	if err != nil {
		return nil, err
	}
	switch c {
	case '"':
		return s.stringBody(maxHeadBytes)
	case '{', '[':
		return nil, s.skipFrom(c, 0)
	}
	raw := []byte{c}
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if !bytes.ContainsRune([]byte("+-.0123456789eEtruefalsn"), rune(b)) {
			_ = s.r.UnreadByte()
			if len(raw) > maxHeadBytes || !json.Valid(raw) {
				return nil, nil
			}
			return raw, nil
		}
		raw = append(raw, b)
	}
}

// stringBody reads a string whose opening quote was read, returning it
// with its quotes when it has at most max bytes (else nil, read anyway).
func (s *scanner) stringBody(max int) ([]byte, error) {
	raw := []byte{'"'}
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if len(raw) <= max+1 {
			raw = append(raw, b)
		}
		switch b {
		case '"':
			if len(raw) > max+1 {
				return nil, nil
			}
			return raw, nil
		case '\\':
			e, err := s.r.ReadByte()
			if err != nil {
				return nil, err
			}
			if len(raw) <= max+1 {
				raw = append(raw, e)
			}
		}
	}
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// skip reads one value without keeping it.
func (s *scanner) skip(depth int) error {
	c, err := s.next()
	if err != nil {
		return err
	}
	return s.skipFrom(c, depth)
}

// skipFrom skips a value whose first byte c was read.
func (s *scanner) skipFrom(c byte, depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	switch c {
	case '"':
		_, err := s.stringBody(0)
		return err
	case '{':
		return s.object(func(string) error { return s.skip(depth + 1) })
	case '[':
		return s.array(depth + 1)
	}
	_ = s.r.UnreadByte()
	_, err := s.scalar()
	return err
}

// array skips the elements of an array whose '[' was read.
func (s *scanner) array(depth int) error {
	c, err := s.next()
	if err != nil || c == ']' {
		return err
	}
	for {
		if err := s.skipFrom(c, depth); err != nil {
			return err
		}
		var end bool
		if c, end, err = s.separator(']'); err != nil || end {
			return err
		}
	}
}
