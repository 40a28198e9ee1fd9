package idempotency_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/idempotency"
)

var keyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

func TestKeyPatternIsDesignPattern(t *testing.T) {
	t.Parallel()
	if idempotency.KeyPattern != keyRE.String() {
		t.Fatalf("KeyPattern = %q, the idempotency rules say %q", idempotency.KeyPattern, keyRE.String())
	}
	if _, err := regexp.Compile(idempotency.KeyPattern); err != nil {
		t.Fatalf("KeyPattern does not compile: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	longest := "a" + strings.Repeat("b", 127)
	for _, tc := range []struct {
		name, header, want string
		ok                 bool
	}{
		{"AcceptsPlainKey", "abc", "abc", true},
		{"AcceptsSingleCharacter", "Z", "Z", true},
		{"AcceptsUUID", "3f2b8c1e-7d4a-4b9e-9c1f-0a2b3c4d5e6f", "3f2b8c1e-7d4a-4b9e-9c1f-0a2b3c4d5e6f", true},
		{"AcceptsEveryAllowedPunctuation", "k._:-", "k._:-", true},
		{"AcceptsMaxLength", longest, longest, true},
		{"TrimsSurroundingSpace", "  abc\t", "abc", true},
		{"UnquotesStructuredFieldString", `"abc"`, "abc", true},
		{"UnquotesAfterTrimming", ` "run:1.a" `, "run:1.a", true},
		{"UnquotesMaxLength", `"` + longest + `"`, longest, true},
		{"RejectsEmpty", "", "", false},
		{"RejectsOnlySpace", "   ", "", false},
		{"RejectsEmptyQuotedString", `""`, "", false},
		{"RejectsLoneQuote", `"`, "", false},
		{"RejectsUnterminatedQuote", `"abc`, "", false},
		{"RejectsDoubleQuoting", `""abc""`, "", false},
		{"RejectsSpaceInsideQuotes", `" abc"`, "", false},
		{"RejectsTooLong", longest + "c", "", false},
		{"RejectsQuotedTooLong", `"` + longest + `c"`, "", false},
		{"RejectsLeadingDash", "-abc", "", false},
		{"RejectsLeadingDot", ".abc", "", false},
		{"RejectsLeadingUnderscore", "_abc", "", false},
		{"RejectsLeadingColon", ":abc", "", false},
		{"RejectsInnerSpace", "a b", "", false},
		{"RejectsSlash", "a/b", "", false},
		{"RejectsPlus", "a+b", "", false},
		{"RejectsComma", "a,b", "", false},
		{"RejectsNonASCII", "clé", "", false},
		{"RejectsInvalidUTF8", "a\xff", "", false},
		{"RejectsControlCharacter", "a\x00b", "", false},
		{"RejectsByteSequenceSyntax", ":YWJj:", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := idempotency.ParseKey(tc.header)
			if !tc.ok {
				if !errors.Is(err, idempotency.ErrInvalidKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want ErrInvalidKey", tc.header, got, err)
				}
				if got != "" {
					t.Fatalf("ParseKey(%q) returned key %q with its error", tc.header, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tc.header, got, err, tc.want)
			}
		})
	}
}

func TestParseKeyErrorNamesPattern(t *testing.T) {
	t.Parallel()
	_, err := idempotency.ParseKey("-")
	if err == nil || !strings.Contains(err.Error(), idempotency.KeyPattern) {
		t.Fatalf("error %v does not name the pattern %s", err, idempotency.KeyPattern)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"abc", "A", "a._:-", `"abc"`, ` "abc" `, `""`, `"`, `"abc`, "-a", "a b", "clé", "a\xff",
		"a" + strings.Repeat("b", 127), "a" + strings.Repeat("b", 128), `"` + strings.Repeat("b", 128) + `"`,
		"\u00a0abc", "\"\"a\"\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := idempotency.ParseKey(v)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidKey) || key != "" {
				t.Fatalf("ParseKey(%q) = %q, %v", v, key, err)
			}
			if keyRE.MatchString(v) {
				t.Fatalf("ParseKey rejected %q, which matches the key pattern", v)
			}
			return
		}
		if !keyRE.MatchString(key) {
			t.Fatalf("ParseKey(%q) = %q, which does not match %s", v, key, keyRE)
		}
		if !strings.Contains(v, key) {
			t.Fatalf("ParseKey(%q) = %q, which the header does not carry", v, key)
		}
		again, err := idempotency.ParseKey(key)
		if err != nil || again != key {
			t.Fatalf("ParseKey(%q) = %q, %v; want it unchanged", key, again, err)
		}
		if quoted, err := idempotency.ParseKey(`"` + key + `"`); err != nil || quoted != key {
			t.Fatalf(`ParseKey("\"%s\"") = %q, %v; want %q`, key, quoted, err, key)
		}
	})
}
