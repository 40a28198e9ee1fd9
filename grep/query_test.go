package grep

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
)

func required(t testing.TB, pattern string) *Query {
	t.Helper()
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatalf("parse %q: %v", pattern, err)
	}
	return Required(re)
}

func TestRequired(t *testing.T) {
	for _, c := range []struct{ pattern, want string }{
		{`handleUpload`, `"handleUpload"`},
		{`func handleUpload\(`, `"func handleUpload("`},
		{`foo.*bar`, `("foo" AND "bar")`},
		{`foo|bar`, `("foo" OR "bar")`},
		{`(foo|bar)baz`, `("foobaz" OR "barbaz")`},
		{`colou?r`, `("colour" OR "color")`},
		{`[hH]ello`, `"[Hh]ello"`},
		{`[ab]cd`, `("acd" OR "bcd")`},
		{`ab+c`, `("ab" AND "bc")`},
		{`func \w+\(ctx`, `("func " AND "(ctx")`},
		{`x*`, `ALL`},
		{`.`, `ALL`},
		{`\d+`, `ALL`},
		{`^$`, `ALL`},
		{`(?i)go`, `"[Gg][Oo]"`},
		{`(?i)k9`, `"[` + string(Orbit('K')) + `]9"`},
		{`a\nb`, `NONE`},
		{`[^\x00-\x{10FFFF}]`, `NONE`},
		{`foo(\nbar|baz)`, `"foobaz"`},
		{`(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q)xyz`, `"xyz"`},
		{`(alpha|beta|gamma|delta|epsilon|zeta|eta|theta|iota|kappa|lambda|mu|nu|xi|omicron|pi|rho)!`,
			`(("alpha" OR "gamma" OR "delta" OR "epsilon" OR "eta" OR "iota" OR "kappa" OR "lambda" OR "mu" OR "nu" OR "xi" OR "omicron" OR "pi" OR "rho") AND "!")`},
		{`(alpha|beta|gamma)!`, `("alpha!" OR "beta!" OR "gamma!")`},
	} {
		if got := required(t, c.pattern).String(); got != c.want {
			t.Errorf("Required(%q) = %s, want %s", c.pattern, got, c.want)
		}
	}
}

// TestRequiredBounds: a pattern of many parts gives a query of bounded
// size, and an alternation past the bound asks for nothing rather than
// for some of its branches.
func TestRequiredBounds(t *testing.T) {
	var alts []string
	for k := range 1000 {
		alts = append(alts, "word"+strings.Repeat("x", k%7)+string(rune('a'+k%26)))
	}
	if q := required(t, strings.Join(alts, "|")); size(q) > 2*maxRequired {
		t.Errorf("1000 alternatives: %d nodes", size(q))
	}
	var words []string
	for k := range 100 {
		words = append(words, fmt.Sprintf("%c%cq%d", 'a'+k%26, 'a'+k/26, k))
	}
	if q := required(t, strings.Join(words, "|")); q.Op != All {
		t.Errorf("100 alternatives without a common part: %s, want ALL", q)
	}
	long := strings.Repeat("abcdefgh.*", 300)
	if q := required(t, long); q.Op != Lit && len(q.Subs) > maxRequired {
		t.Errorf("300 parts: %d sub-queries", len(q.Subs))
	}
}

func size(q *Query) int {
	n := 1
	for _, s := range q.Subs {
		n += size(s)
	}
	return n
}

// patterns mix the constructs the analysis takes apart.
var patterns = []string{
	`abc`, `a.c`, `(?i)straße`, `(?i)k`, `(?i)σ`, `ſ`, `[kK]`, `(?i)[a-c]x`, `(ab|cd)+ef`, `x{2,3}y`,
	`^foo`, `bar$`, `\bword\b`, `a|`, `(a|b)*c`, `[^a]b`, `\w+x`, `é+`, `a\x{0}b`, `(?s)a.b`, `(?m)^a`,
	`(?i)(hello|world)[0-9]`, `a?b?c?`, `(abc){2}`, `\Qa.b\E`, `日本`, `\pL\pL`, `(?U)a+?b`,
}

// texts are what the patterns are tried on, cut into lines by Lines.
var texts = []string{
	"abc", "xabcx\nno", "aXc", "STRASSE straße", "STRAẞE", "K", "K", "k", "Σ", "ς", "s", "ſ", "ABX", "cdabef",
	"xxy", "xxxy", "foo\nbar", "a\nb", "\nword\n", "wordy", "ab", "c", "éé", "a\x00b", "hello1", "WORLD9",
	"", "\n\n", "abcabc", "a.b", "日本語", "ab\r\n", "aaab",
}

// holdsForEveryMatch fails t when a text with a line re matches does not
// satisfy Required(re).
func holdsForEveryMatch(t *testing.T, pattern, text string) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return
	}
	syn, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatalf("regexp compiles %q but syntax.Parse refuses it: %v", pattern, err)
	}
	q := Required(syn)
	matched := false
	Lines(context.Background(), []byte(text), re, 0, 0, func(Match) bool { matched = true; return false })
	if matched && !q.Holds(text) {
		t.Fatalf("pattern %q matches a line of %q, but its query %s does not hold for the text", pattern, text, q)
	}
}

func TestRequiredHoldsForEveryMatch(t *testing.T) {
	for _, p := range patterns {
		for _, text := range texts {
			holdsForEveryMatch(t, p, text)
		}
	}
	// Random patterns over a small alphabet, on random texts of it.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		holdsForEveryMatch(t, randomPattern(rng, 4), randomText(rng))
	}
}

// FuzzRequired holds the pattern-to-query translation to a brute-force
// matcher: whenever Go's regexp matches a line of the text, the query
// holds for the text.
func FuzzRequired(f *testing.F) {
	for k, p := range patterns {
		f.Add(p, texts[k%len(texts)])
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		if len(pattern) > 200 || len(text) > 2000 {
			return
		}
		holdsForEveryMatch(t, pattern, text)
	})
}

var atoms = []string{"a", "b", "k", "K", "s", "ſ", "é", "\n", ".", "[ab]", "[^a]", "\\b", "^", "$", "(?i)", "|", "(", ")", "*", "+", "?", "{2}", "{1,3}", "\\w", "\\s", "[kK]"}

func randomPattern(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range 1 + rng.IntN(3*n) {
		b.WriteString(atoms[rng.IntN(len(atoms))])
	}
	return b.String()
}

func randomText(rng *rand.Rand) string {
	chars := []string{"a", "b", "k", "K", "K", "s", "S", "ſ", "é", "É", "\n", " ", "\r", "x"}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(chars[rng.IntN(len(chars))])
	}
	return b.String()
}
