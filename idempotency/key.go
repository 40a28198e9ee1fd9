// Package idempotency holds the rules of the Idempotency-Key header: which
// keys are valid, how a request is recognised when it is repeated, and what
// a key records. It is pure: the claims live in Postgres (storage/keys.go)
// and the admission core (package admission) runs writes under them.
package idempotency

import (
	"errors"
	"strings"
)

// Header is the request header that carries a key.
const Header = "Idempotency-Key"

// KeyPattern is the syntax of a key, advertised in /v1/protocol.
const KeyPattern = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`

// ErrInvalidKey says a key does not match KeyPattern.
var ErrInvalidKey = errors.New("Idempotency-Key must match " + KeyPattern)

// ParseKey returns the key a header value carries. A structured-field string
// ("abc", RFC 8941) is unquoted first; an empty header means no key.
func ParseKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if !validKey(v) {
		return "", ErrInvalidKey
	}
	return v, nil
}

func validKey(k string) bool {
	if k == "" || len(k) > 128 || !alnum(k[0]) {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
