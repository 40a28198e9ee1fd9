package agentfs_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentfs/agentfs"
)

func TestValidatePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		path string
		ok   bool
	}{
		{"AcceptsSingleSegment", "report.txt", true},
		{"AcceptsNestedSegments", "dir/sub/report.txt", true},
		{"AcceptsSpacesInSegment", "dir/report final.txt", true},
		{"AcceptsDotsInsideName", "a/.hidden/..name/x..y", true},
		{"AcceptsTripleDotSegment", "a/.../b", true},
		{"AcceptsUnicode", "données/été/日本語.txt", true},
		{"AcceptsTrailingDotName", "a/b.", true},
		{"AcceptsMaxLength", strings.Repeat("a", agentfs.MaxPathBytes), true},
		{"AcceptsMaxLengthInMultibyteRunes", strings.Repeat("é", agentfs.MaxPathBytes/2), true},
		{"AcceptsNoBreakSpace", "a\u00a0b", true},
		{"AcceptsPersianNonJoiner", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt", true},
		{"AcceptsNonJoinerPastAMark", "\u0628\u064e\u200c\u0627", true},
		{"AcceptsDevanagariConjunct", "\u0915\u094d\u200d\u0937.md", true},
		{"AcceptsEmojiSequence", "\U0001F468\u200d\U0001F469\u200d\U0001F467.png", true},
		{"AcceptsEmojiAfterSelector", "\U0001F3F3\ufe0f\u200d\U0001F308", true},
		{"AcceptsEmojiAfterSkinTone", "\U0001F9D1\U0001F3FD\u200d\U0001F4BB", true},
		{"RejectsRightToLeftOverride", "invoice\u202etxt.exe", false},
		{"RejectsLeftToRightMark", "a\u200eb", false},
		{"RejectsArabicLetterMark", "a\u061cb", false},
		{"RejectsIsolates", "a\u2066b\u2069", false},
		{"RejectsZeroWidthSpace", "a\u200bb", false},
		{"RejectsWordJoiner", "a\u2060b", false},
		{"RejectsByteOrderMark", "\ufeffa.txt", false},
		{"RejectsSoftHyphen", "pass\u00adword.txt", false},
		{"RejectsTagCharacter", "a\U000E0041", false},
		{"RejectsLineSeparator", "a\u2028b", false},
		{"RejectsParagraphSeparator", "a\u2029b", false},
		{"RejectsJoinerBetweenLatinLetters", "a\u200db", false},
		{"RejectsNonJoinerBetweenLatinLetters", "a\u200cb", false},
		{"RejectsLeadingJoiner", "\u200cx", false},
		{"RejectsTrailingJoiner", "\u0628\u200c", false},
		{"RejectsJoinerBeforeASlash", "\u0628\u200c/x", false},
		{"RejectsNonJoinerBetweenEmoji", "\U0001F468\u200c\U0001F469", false},
		{"RejectsEmpty", "", false},
		{"RejectsTooLong", strings.Repeat("a", agentfs.MaxPathBytes+1), false},
		{"RejectsTooLongByBytesNotRunes", strings.Repeat("é", agentfs.MaxPathBytes/2) + "a", false},
		{"RejectsInvalidUTF8", "a/\xff/b", false},
		{"RejectsTruncatedUTF8", "a\xc3", false},
		{"RejectsSurrogateEncoding", "a\xed\xa0\x80", false},
		{"RejectsLeadingSlash", "/a/b", false},
		{"RejectsOnlySlash", "/", false},
		{"RejectsTrailingSlash", "a/b/", false},
		{"RejectsDoubleSlash", "a//b", false},
		{"RejectsDotSegment", "a/./b", false},
		{"RejectsLeadingDotSegment", "./a", false},
		{"RejectsOnlyDot", ".", false},
		{"RejectsDotDotSegment", "a/../b", false},
		{"RejectsLeadingDotDot", "../etc/passwd", false},
		{"RejectsTrailingDotDot", "a/..", false},
		{"RejectsOnlyDotDot", "..", false},
		{"RejectsBackslash", `a\b`, false},
		{"RejectsWindowsTraversal", `..\..\x`, false},
		{"RejectsNUL", "a\x00b", false},
		{"RejectsNewline", "a\nb", false},
		{"RejectsTab", "a\tb", false},
		{"RejectsUnitSeparator", "a\x1fb", false},
		{"RejectsDEL", "a\x7fb", false},
		{"RejectsC1Control", "a\u0085b", false},
		{"RejectsLastC1Control", "a\u009fb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := agentfs.ValidatePath(tc.path)
			if tc.ok && err != nil {
				t.Fatalf("ValidatePath(%q) = %v, want nil", tc.path, err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatalf("ValidatePath(%q) = nil, want an error", tc.path)
				}
				if err.Error() == "" {
					t.Fatalf("ValidatePath(%q) returned an error with no message", tc.path)
				}
			}
		})
	}
}

func TestValidatePathErrorNamesRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"Empty", "", "empty"},
		{"TooLong", strings.Repeat("x", 1025), "1024"},
		{"InvalidUTF8", "\xff", "UTF-8"},
		{"LeadingSlash", "/x", "'/'"},
		{"Backslash", `x\y`, "backslash"},
		{"Control", "x\x01", "control"},
		{"EmptySegment", "x//y", "empty segment"},
		{"DotDotSegment", "x/..", "'..'"},
		{"BidiControl", "x\u202ey", "bidirectional control character (U+202E)"},
		{"FormatCharacter", "x\u200by", "invisible format character (U+200B)"},
		{"Joiner", "x\u200dy", "joiner"},
		{"LineSeparator", "x\u2028y", "line or paragraph separator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := agentfs.ValidatePath(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidatePath(%q) = %v, want an error mentioning %q", tc.path, err, tc.want)
			}
		})
	}
}

// pathRulesHold is the path rules written independently of ValidatePath.
func pathRulesHold(p string) bool {
	if len(p) == 0 || len(p) > 1024 || !utf8.ValidString(p) || strings.HasPrefix(p, "/") {
		return false
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == '\\' {
			return false
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return readsAsWritten(p, false)
}

// joiningScripts are the scripts whose letters join (the rule's list).
var joiningScripts = []*unicode.RangeTable{unicode.Arabic, unicode.Syriac, unicode.Mongolian, unicode.Nko,
	unicode.Mandaic, unicode.Manichaean, unicode.Psalter_Pahlavi, unicode.Hanifi_Rohingya, unicode.Sogdian,
	unicode.Adlam, unicode.Phags_Pa}

// readsAsWritten is the rule on characters that change how a path reads,
// written independently of paths.go: no category Cf (bidirectional
// controls are all Cf), no U+2028 or U+2029, except a joiner (U+200C,
// U+200D) right after a virama, after a letter of a joining script (and
// its marks) before a letter or mark, or a U+200D between emoji. A prefix
// may end with one whose start fits.
func readsAsWritten(p string, prefix bool) bool {
	rs := []rune(p)
	for i, r := range rs {
		switch {
		case r == 0x2028 || r == 0x2029:
			return false
		case r == 0x200c || r == 0x200d:
			if !joinerAllowed(rs, i, prefix) {
				return false
			}
		case unicode.In(r, unicode.Cf):
			return false
		}
	}
	return true
}

func joinerAllowed(rs []rune, i int, prefix bool) bool {
	last := i == len(rs)-1
	if i == 0 || last && !prefix {
		return false
	}
	prev := rs[i-1]
	if norm.NFD.PropertiesString(string(prev)).CCC() == 9 {
		return true
	}
	j := i - 1
	for j >= 0 && unicode.In(rs[j], unicode.Mn, unicode.Me) {
		j--
	}
	if j >= 0 && unicode.In(rs[j], joiningScripts...) && (last || unicode.In(rs[i+1], unicode.L, unicode.M)) {
		return true
	}
	emoji := unicode.In(prev, unicode.So) || prev == 0xfe0f || (prev >= 0x1f3fb && prev <= 0x1f3ff)
	return rs[i] == 0x200d && emoji && (last || unicode.In(rs[i+1], unicode.So))
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{
		"a", "a/b/c.txt", "données/日本語", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b",
		`a\b`, "a\x00b", "a\x7f", "a\u0085", "\xff", "a\xc3", "...", ".a/..b",
		"x\u202ey", "a\u200bb", "\u0628\u200c\u0627", "\u0915\u094d\u200d\u0937", "\U0001F468\u200d\U0001F469",
		"a\u200db", "\u200c", "\u0628\u064e\u200c/", "\ufeff", "a\u2028",
		strings.Repeat("a", 1024), strings.Repeat("a", 1025), strings.Repeat("é", 512),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := agentfs.ValidatePath(p)
		want := pathRulesHold(p)
		if err == nil && !want {
			t.Fatalf("ValidatePath(%q) accepted a path that breaks the path rules", p)
		}
		if err != nil && want {
			t.Fatalf("ValidatePath(%q) = %v, but the path follows the path rules", p, err)
		}
		if err != nil && err.Error() == "" {
			t.Fatalf("ValidatePath(%q) returned an error with no message", p)
		}
	})
}

func TestNormalizePath(t *testing.T) {
	t.Parallel()
	const (
		nfc = "caf\u00e9.txt"  // é as one code point
		nfd = "cafe\u0301.txt" // e and a combining acute accent
	)
	for _, tc := range []struct {
		name, path, want string
		ok               bool
	}{
		{"KeepsASCII", "a/b.txt", "a/b.txt", true},
		{"KeepsNFC", nfc, nfc, true},
		{"ComposesNFD", nfd, nfc, true},
		{"ComposesEverySegment", "re\u0301sume\u0301/" + nfd, "r\u00e9sum\u00e9/" + nfc, true},
		{"ComposesHangulJamo", "\u1100\u1161.txt", "\uac00.txt", true},
		{"KeepsCompatibilityForms", "\ufb01le.txt", "\ufb01le.txt", true}, // NFC, not NFKC: the ligature stays
		{"ReordersCombiningMarks", "a\u0323\u0307", "\u1ea1\u0307", true},
		// Length counts the stored (NFC) form: long in NFD, short enough in NFC.
		{"AcceptsWhatFitsOnceComposed", strings.Repeat("e\u0301", 400), strings.Repeat("\u00e9", 400), true},
		// U+0958 is excluded from composition: its NFC form is twice as long.
		{"RejectsWhatOutgrowsOnceNormalized", strings.Repeat("\u0958", 200), "", false},
		{"RejectsInvalidUTF8", "caf\xe9.txt", "", false},
		{"RejectsDotDotAfterNormalizing", "a/../b", "", false},
		{"RejectsEmpty", "", "", false},
		{"RejectsControlCharacter", "e\u0301\x00", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := agentfs.NormalizePath(tc.path)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("NormalizePath(%q) = %v, want %q", tc.path, err, tc.want)
			case tc.ok && got != tc.want:
				t.Fatalf("NormalizePath(%q) = %q, want %q", tc.path, got, tc.want)
			case !tc.ok && err == nil:
				t.Fatalf("NormalizePath(%q) = %q, want an error", tc.path, got)
			case !tc.ok && got != "":
				t.Fatalf("NormalizePath(%q) returned %q with its error", tc.path, got)
			}
		})
	}
}

// FuzzNormalizePath holds NormalizePath to its promise: what it returns is
// NFC, valid by the path rules (checked independently) and a fixed point; it
// refuses exactly the inputs whose NFC form breaks the rules; and two
// spellings with the same NFC form are one path.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"a", "caf\u00e9.txt", "cafe\u0301.txt", "\u1100\u1161", "a\u0323\u0307", "\u0958",
		strings.Repeat("e\u0301", 400), strings.Repeat("\u0958", 200), "a/../b", "\xff", "e\u0301/\u0301",
		"/\u0301", "\u0301", ".\u0301", "..\u0338", "\u212b", "\u2126/\u0344",
		"invoice\u202etxt.exe", "\u0628\u064e\u200c\u0627", "\u0915\u094d\u200d\u0937", "\U0001F3F3\ufe0f\u200d\U0001F308",
		"a\u0301\u200db", "\u0628\u0651\u064e\u200c\u0627", "\u0928\u093c\u094d\u200d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := agentfs.NormalizePath(p)
		if !utf8.ValidString(p) {
			if err == nil {
				t.Fatalf("NormalizePath(%q) accepted invalid UTF-8", p)
			}
			return
		}
		want := norm.NFC.String(p)
		if err != nil {
			if pathRulesHold(want) {
				t.Fatalf("NormalizePath(%q) = %v, but its NFC form %q follows the path rules", p, err, want)
			}
			if err.Error() == "" {
				t.Fatalf("NormalizePath(%q) returned an error with no message", p)
			}
			return
		}
		if got != want || !norm.NFC.IsNormalString(got) {
			t.Fatalf("NormalizePath(%q) = %q, not its NFC form %q", p, got, want)
		}
		if !pathRulesHold(got) || agentfs.ValidatePath(got) != nil {
			t.Fatalf("NormalizePath(%q) = %q, which breaks the path rules", p, got)
		}
		if again, err := agentfs.NormalizePath(got); err != nil || again != got {
			t.Fatalf("NormalizePath is not idempotent: %q -> %q -> %q (%v)", p, got, again, err)
		}
		if other, err := agentfs.NormalizePath(norm.NFD.String(p)); err != nil || other != got {
			t.Fatalf("the NFD spelling of %q is %q (%v), not the same path %q", p, other, err, got)
		}
	})
}

func TestNormalizePrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix, want string
		ok                 bool
	}{
		{"AllowsEmpty", "", "", true},
		{"AllowsTrailingSlash", "dir/", "dir/", true},
		{"AllowsPartialSegment", "re", "re", true},
		{"ComposesNFD", "cafe\u0301/", "caf\u00e9/", true},
		{"AllowsMaxLength", strings.Repeat("a", agentfs.MaxPathBytes), strings.Repeat("a", agentfs.MaxPathBytes), true},
		{"RejectsTooLong", strings.Repeat("a", agentfs.MaxPathBytes+1), "", false},
		{"RejectsInvalidUTF8", "\xff", "", false},
		{"RejectsControlCharacter", "a\x00", "", false},
		{"RejectsC1Control", "a\u0085", "", false},
		{"RejectsBidiControl", "a\u202e", "", false},
		{"RejectsZeroWidthSpace", "a\u200b", "", false},
		{"AllowsEndingInAJoinerThatFits", "\u0645\u06cc\u200c", "\u0645\u06cc\u200c", true},
		{"RejectsEndingInAJoinerThatDoesNot", "a\u200c", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := agentfs.NormalizePrefix(tc.prefix)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("NormalizePrefix(%q) = %q, %v; want %q (ok %v)", tc.prefix, got, err, tc.want, tc.ok)
			}
		})
	}
}

func FuzzNormalizePrefix(f *testing.F) {
	for _, s := range []string{"", "dir/", "cafe\u0301", "\xff", "a\x00", strings.Repeat("\u0958", 200),
		"a\u202e", "\u0645\u06cc\u200c", "a\u200c", "\U0001F468\u200d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := agentfs.NormalizePrefix(p)
		if err != nil {
			return
		}
		if !utf8.ValidString(p) || got != norm.NFC.String(p) || len(got) > agentfs.MaxPathBytes {
			t.Fatalf("NormalizePrefix(%q) = %q", p, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) {
				t.Fatalf("NormalizePrefix(%q) kept a control character", p)
			}
		}
		if !readsAsWritten(got, true) {
			t.Fatalf("NormalizePrefix(%q) = %q, which does not read as it is written", p, got)
		}
		if again, err := agentfs.NormalizePrefix(got); err != nil || again != got {
			t.Fatalf("NormalizePrefix is not idempotent on %q", p)
		}
	})
}

var tagValueRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/=+@-]{0,127}$`)

func TestValidTagValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    string
		ok   bool
	}{
		{"AcceptsSingleLetter", "a", true},
		{"AcceptsSingleDigit", "7", true},
		{"AcceptsEveryAllowedPunctuation", "a._:/=+@-", true},
		{"AcceptsTypicalRunID", "run-2024-01-01T00:00:00Z", true},
		{"AcceptsEmailLike", "agent+ci@example.com", true},
		{"AcceptsMaxLength", "a" + strings.Repeat("b", 127), true},
		{"RejectsEmpty", "", false},
		{"RejectsTooLong", "a" + strings.Repeat("b", 128), false},
		{"RejectsLeadingDot", ".a", false},
		{"RejectsLeadingDash", "-a", false},
		{"RejectsLeadingSlash", "/a", false},
		{"RejectsLeadingAt", "@a", false},
		{"RejectsSpace", "a b", false},
		{"RejectsTrailingSpace", "ab ", false},
		{"RejectsComma", "a,b", false},
		{"RejectsQuote", `a"b`, false},
		{"RejectsTab", "a\tb", false},
		{"RejectsNUL", "a\x00", false},
		{"RejectsNonASCIILetter", "aé", false},
		{"RejectsNonASCIIFirst", "éa", false},
		{"RejectsInvalidUTF8", "a\xff", false},
		{"RejectsStar", "a*", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := agentfs.ValidTagValue(tc.v); got != tc.ok {
				t.Fatalf("ValidTagValue(%q) = %v, want %v", tc.v, got, tc.ok)
			}
		})
	}
}

func FuzzValidTagValue(f *testing.F) {
	for _, s := range []string{
		"", "a", "0", "a._:/=+@-", "-a", ".a", "a b", "aé", "a\xff", "a\x00",
		"a" + strings.Repeat("b", 127), "a" + strings.Repeat("b", 128), "A/B=C+D@E",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := agentfs.ValidTagValue(v)
		if want := tagValueRE.MatchString(v); got != want {
			t.Fatalf("ValidTagValue(%q) = %v, the pattern says %v", v, got, want)
		}
	})
}
