package agentfs

import (
	"errors"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxPathBytes is the longest path a file may have.
const MaxPathBytes = 1024

// NormalizePath is the one way a path enters AgentFS (every door calls it):
// it returns the path in Unicode NFC, so the NFC and NFD spellings of a name
// are one path, after checking it against the path rules: 1–1024
// bytes of UTF-8 (counted in the NFC form, the one stored), '/'-separated
// segments, none empty, "." or "..", no leading '/', no control characters
// and no backslash. The error says which rule failed, in words fit for a
// caller.
func NormalizePath(p string) (string, error) {
	if !utf8.ValidString(p) {
		return "", errors.New("path is not valid UTF-8")
	}
	p = norm.NFC.String(p)
	if err := ValidatePath(p); err != nil {
		return "", err
	}
	return p, nil
}

// ValidatePath checks a path as NormalizePath does, without normalizing it:
// for paths already stored, which are NFC.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case !utf8.ValidString(p):
		return errors.New("path is not valid UTF-8")
	case len(p) > MaxPathBytes:
		return errors.New("path is longer than 1024 bytes")
	case strings.HasPrefix(p, "/"):
		return errors.New("path starts with '/'")
	case strings.ContainsRune(p, '\\'):
		return errors.New("path contains a backslash")
	}
	if strings.ContainsFunc(p, isControl) {
		return errors.New("path contains a control character")
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

// NormalizePrefix returns a listing's path prefix in NFC, the form paths
// are stored in, after checking it: at most 1024 bytes of UTF-8 without
// control characters. A prefix may end anywhere in a path ("dir/", "rep").
func NormalizePrefix(p string) (string, error) {
	if !utf8.ValidString(p) {
		return "", errors.New("prefix is not valid UTF-8")
	}
	p = norm.NFC.String(p)
	if len(p) > MaxPathBytes {
		return "", errors.New("prefix is longer than 1024 bytes")
	}
	if strings.ContainsFunc(p, isControl) {
		return "", errors.New("prefix contains a control character")
	}
	return p, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

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
