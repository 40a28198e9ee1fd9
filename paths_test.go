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
		{"AcceptsNonControlFormatCharacter", "a\u200bb", true},
		{"AcceptsNoBreakSpace", "a\u00a0b", true},
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
	return true
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{
		"a", "a/b/c.txt", "données/日本語", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b",
		`a\b`, "a\x00b", "a\x7f", "a\u0085", "\xff", "a\xc3", "...", ".a/..b",
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
	for _, s := range []string{"", "dir/", "cafe\u0301", "\xff", "a\x00", strings.Repeat("\u0958", 200)} {
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
