package handlers

import (
	"encoding/base64"
	"errors"
	"mime"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentfs/agentfs/problem"
)

// parseContentDigest returns the SHA-256 named by a Content-Digest header
// (RFC 9530: a dictionary such as `sha-256=:BASE64:, sha-512=:…:`). It
// returns nil when the header names no sha-256, and an error when the header
// or the sha-256 member is malformed.
func parseContentDigest(h string) ([]byte, error) {
	if strings.TrimSpace(h) == "" {
		return nil, nil
	}
	var sum []byte
	for _, member := range strings.Split(h, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(member), "=")
		if !ok || name == "" {
			return nil, errors.New("Content-Digest must be a list of algorithm=:base64: members")
		}
		if strings.ToLower(strings.TrimSpace(name)) != "sha-256" {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) < 2 || value[0] != ':' || value[len(value)-1] != ':' {
			return nil, errors.New("Content-Digest sha-256 must be a byte sequence :BASE64:")
		}
		b, err := base64.StdEncoding.DecodeString(value[1 : len(value)-1])
		if err != nil { // RFC 8941 parsers should accept missing padding
			b, err = base64.RawStdEncoding.DecodeString(value[1 : len(value)-1])
		}
		if err != nil || len(b) != 32 {
			return nil, errors.New("Content-Digest sha-256 must be the base64 of 32 bytes")
		}
		if sum != nil && string(sum) != string(b) {
			return nil, errors.New("Content-Digest names two different sha-256 values")
		}
		sum = b
	}
	return sum, nil
}

// byteRange is one satisfiable range of a representation.
type byteRange struct{ start, length int64 }

// errUnsatisfiable says a Range header names no byte of the content.
var errUnsatisfiable = errors.New("range not satisfiable")

// parseRange reads a Range header for content of size bytes. ok is false
// when the header should be ignored and the whole content served (absent,
// malformed, another unit, or several ranges); errUnsatisfiable when the
// single range lies wholly outside the content.
func parseRange(h string, size int64) (r byteRange, ok bool, err error) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false, nil
	}
	if first == "" { // suffix: the last N bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 || !digits(last) {
			return byteRange{}, false, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, errUnsatisfiable
		}
		n = min(n, size)
		return byteRange{start: size - n, length: n}, true, nil
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || !digits(first) {
		return byteRange{}, false, nil
	}
	end := size - 1
	if last != "" {
		if end, err = strconv.ParseInt(last, 10, 64); err != nil || !digits(last) || end < start {
			return byteRange{}, false, nil
		}
	}
	if start >= size {
		return byteRange{}, false, errUnsatisfiable
	}
	end = min(end, size-1)
	return byteRange{start: start, length: end - start + 1}, true, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// normalizeMediaType checks a Content-Type and returns it in canonical form;
// an empty one is application/octet-stream.
func normalizeMediaType(ct string) (string, error) {
	if strings.TrimSpace(ct) == "" {
		return "application/octet-stream", nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	typ, sub, ok := strings.Cut(mt, "/")
	if err != nil || !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
		return "", errors.New("Content-Type is not a valid media type")
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" || len(out) > 255 {
		return "", errors.New("Content-Type is not a valid media type")
	}
	return out, nil
}

// parseIfExists reads if_exists: error (the default) or replace.
func parseIfExists(v string) (replace bool, err error) {
	switch v {
	case "", "error":
		return false, nil
	case "replace":
		return true, nil
	}
	return false, errors.New("must be error or replace")
}

// queryBool reads an optional true/false query parameter into to, leaving
// it alone when the parameter is absent.
func queryBool(v url.Values, name string, to *bool) error {
	return optionalQuery(v, name, to, strconv.ParseBool, "must be true or false")
}

// queryInt reads an optional integer query parameter into to, leaving it
// alone when the parameter is absent.
func queryInt(v url.Values, name string, to *int) error {
	return optionalQuery(v, name, to, strconv.Atoi, "must be an integer")
}

// optionalQuery parses the query parameter name into to when it is given;
// a value parse refuses is a 400 that says what it must be.
func optionalQuery[T any](v url.Values, name string, to *T, parse func(string) (T, error), must string) error {
	s := v.Get(name)
	if s == "" {
		return nil
	}
	x, err := parse(s)
	if err != nil {
		return problem.Invalid(name, must)
	}
	*to = x
	return nil
}
