package agentfs

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxPathBytes is the longest path a file may have.
const MaxPathBytes = 1024

// NormalizePath is the one way a path enters AgentFS (every door calls it):
// it returns the path in Unicode NFC, so the NFC and NFD spellings of a name
// are one path, after checking it against the path rules: 1–1024
// bytes of UTF-8 (counted in the NFC form, the one stored), '/'-separated
// segments, none empty, "." or "..", no leading '/', no control characters,
// no backslash, and nothing that shows it as another name than it is
// (visible: bidirectional controls, invisible format characters, line
// separators). The error says which rule failed, in words fit for a
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
	if err := visible(p, "path"); err != nil {
		return err
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
	if err := visible(p, "prefix"); err != nil {
		return "", err
	}
	return p, nil
}

// The joiners: U+200C ZERO WIDTH NON-JOINER and U+200D ZERO WIDTH JOINER.
const (
	zwnj = '\u200c'
	zwj  = '\u200d'
)

// visible checks that p (a path, or a prefix) reads as what it is when
// shown to a person: no bidirectional controls, which show it in another
// order (U+202E makes "exe.txt" of "txt.exe"); no other invisible format
// character (Unicode category Cf: zero-width space, word joiner, BOM, soft
// hyphen, tags...), which makes two names that look alike; no line or
// paragraph separator, which breaks the line it is shown on. The joiners
// are Cf too, but the spelling of Persian, of Indic scripts and of emoji
// sequences needs them: each is allowed where it changes how the name is
// drawn (joinerFits), nowhere else. NFC leaves all of these as they are.
func visible(p, what string) error {
	for i, r := range p {
		switch {
		case r == '\u2028' || r == '\u2029':
			return fmt.Errorf("%s contains a line or paragraph separator (U+%04X)", what, r)
		case unicode.Is(unicode.Bidi_Control, r):
			return fmt.Errorf("%s contains a bidirectional control character (U+%04X), which shows it in another order than it is", what, r)
		case r == zwnj || r == zwj:
			// A prefix may end right after a joiner: the path goes on.
			if !joinerFits(p[:i], p[i+utf8.RuneLen(r):], r, what == "prefix") {
				return fmt.Errorf("%s contains a zero-width joiner or non-joiner (U+%04X) where it changes nothing visible; "+
					"it is allowed after a virama, between letters of a joining script such as Arabic, and (U+200D) between emoji", what, r)
			}
		case unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%s contains an invisible format character (U+%04X)", what, r)
		}
	}
	return nil
}

// joiningScripts are the scripts whose letters join their neighbours, so
// that a joiner between two of them changes the shapes drawn.
var joiningScripts = []*unicode.RangeTable{unicode.Arabic, unicode.Syriac, unicode.Mongolian, unicode.Nko,
	unicode.Mandaic, unicode.Manichaean, unicode.Psalter_Pahlavi, unicode.Hanifi_Rohingya, unicode.Sogdian,
	unicode.Adlam, unicode.Phags_Pa}

// joinerFits reports whether a joiner r between before and after changes
// how they are drawn: right after a virama (the conjuncts of Indic
// scripts); between a letter of a joining script (past its combining
// marks) and another letter or mark; or, for U+200D, between two emoji (a
// variation selector or a skin tone may end the first). When open, the
// text may go on past an empty after, which then fits whatever it needs.
func joinerFits(before, after string, r rune, open bool) bool {
	if before == "" || after == "" && !open {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(before)
	next, _ := utf8.DecodeRuneInString(after)
	letterNext := after == "" || unicode.IsLetter(next) || unicode.IsMark(next)
	emojiNext := after == "" || unicode.Is(unicode.So, next)
	if norm.NFC.PropertiesString(string(prev)).CCC() == 9 { // a virama
		return true
	}
	base := strings.TrimRightFunc(before, func(c rune) bool { return unicode.Is(unicode.Mn, c) || unicode.Is(unicode.Me, c) })
	if b, _ := utf8.DecodeLastRuneInString(base); base != "" && unicode.IsOneOf(joiningScripts, b) && letterNext {
		return true
	}
	emojiEnd := unicode.Is(unicode.So, prev) || prev == '\ufe0f' || prev >= 0x1f3fb && prev <= 0x1f3ff
	return r == zwj && emojiEnd && emojiNext
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
