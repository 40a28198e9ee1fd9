package grep

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func collect(text, pattern string, from, around int) []string {
	var out []string
	Lines(context.Background(), []byte(text), regexp.MustCompile(pattern), from, around, func(m Match) bool {
		out = append(out, fmt.Sprintf("%d:%d:%q %q %q", m.Line, m.Column, m.Text, m.Before, m.After))
		return true
	})
	return out
}

func TestLines(t *testing.T) {
	for _, c := range []struct {
		text, pattern string
		from, context int
		want          []string
	}{
		{"a\nb\na", "a", 0, 0, []string{`1:1:"a" [] []`, `3:1:"a" [] []`}},
		{"a\nb\na\n", "a", 1, 0, []string{`3:1:"a" [] []`}},
		{"x\ny\nfoo\nz\nw", "foo", 0, 1, []string{`3:1:"foo" ["y"] ["z"]`}},
		{"foo\nz", "foo", 0, 3, []string{`1:1:"foo" [] ["z"]`}},
		{"ab\r\nb\r\n", `b$`, 0, 0, []string{`2:1:"b\r" [] []`}[:0]},
		{"ab\r\nb\r\n", `b\r$`, 0, 0, []string{`1:2:"ab\r" [] []`, `2:1:"b\r" [] []`}},
		{"\n\nx", "^$", 0, 0, []string{`1:1:"" [] []`, `2:1:"" [] []`}},
		{"", "^", 0, 0, nil},
		{"a\n", "^", 0, 0, []string{`1:1:"a" [] []`}},
		{"été x", "x", 0, 0, []string{`1:7:"été x" [] []`}},
		{"abc", `\Ac`, 0, 0, nil},
		{"a\nc", `\Ac`, 0, 0, []string{`2:1:"c" [] []`}},
	} {
		got := collect(c.text, c.pattern, c.from, c.context)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Lines(%q, %q, %d, %d) = %q, want %q", c.text, c.pattern, c.from, c.context, got, c.want)
		}
	}
}

func TestLinesStops(t *testing.T) {
	n := 0
	Lines(context.Background(), []byte("a\na\na"), regexp.MustCompile("a"), 0, 0, func(Match) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("yield called %d times after it said stop at the second", n)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true},
		{"é", 1, "", true},
	} {
		got, cut := Cut([]byte(c.in), c.n)
		if string(got) != c.want || cut != c.cut {
			t.Errorf("Cut(%q, %d) = %q, %v", c.in, c.n, got, cut)
		}
	}
}
