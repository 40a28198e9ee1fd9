package agentfs

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// MaxPathBytes is the longest path a file may have.
const MaxPathBytes = 1024

// ValidatePath checks a file path against the rules of DESIGN §5: 1–1024
// bytes of UTF-8, '/'-separated segments, none empty, "." or "..", no
// leading '/', no control characters and no backslash. The error says which
// rule failed, in words fit for a caller.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case len(p) > MaxPathBytes:
		return errors.New("path is longer than 1024 bytes")
	case !utf8.ValidString(p):
		return errors.New("path is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("path starts with '/'")
	case strings.ContainsRune(p, '\\'):
		return errors.New("path contains a backslash")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errors.New("path contains a control character")
		}
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return errors.New("path has an empty segment")
		case ".", "..":
			return errors.New("path has a '.' or '..' segment")
		}
	}
	return nil
}

// MaxTagValueLen is the longest X-Agent-ID or X-Run-ID.
const MaxTagValueLen = 128

// ValidTagValue reports whether v may be an X-Agent-ID or X-Run-ID: 1–128
// characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit,
// so it can be written as an S3 object tag unchanged.
func ValidTagValue(v string) bool {
	if v == "" || len(v) > MaxTagValueLen || !isAlnum(v[0]) {
		return false
	}
	for i := 1; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && !strings.ContainsRune("._:/=+@-", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
