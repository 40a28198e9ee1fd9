package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"

	"github.com/agentfs/agentfs"
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
// and field still does. Numbers keep their literal text.
func CanonicalJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, ErrInvalidJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrInvalidJSON
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // map keys are encoded sorted
		return nil, ErrInvalidJSON
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// JSONContentHash is the content fingerprint of a JSON body: the SHA-256 of
// its canonical form.
func JSONContentHash(data []byte) ([]byte, error) {
	c, err := CanonicalJSON(data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c)
	return sum[:], nil
}
