package mcpserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"*.md", []string{"a.md", ".md", ".hidden.md"}, []string{"d/a.md", "a.mdx", "a.txt"}},
		{"**/*.md", []string{"a.md", "d/a.md", "d/e/f/a.md", ".h/x.md"}, []string{"a.txt", "d/a.txt"}},
		{"d/**", []string{"d/a", "d/e/f", "d"}, []string{"e/a", "dd/a"}},
		{"**", []string{"a", "a/b/c"}, nil},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"a/x/c", "b"}},
		{"?.go", []string{"a.go"}, []string{"ab.go", "/.go"}},
		{"[abc].txt", []string{"a.txt", "c.txt"}, []string{"d.txt"}},
		{"[!abc].txt", []string{"d.txt"}, []string{"a.txt"}},
		{"[^abc].txt", []string{"d.txt"}, []string{"b.txt"}},
		{"[a-c]x", []string{"bx"}, []string{"dx"}},
		{"*.{go,md}", []string{"a.go", "b.md"}, []string{"c.txt", "x/a.go"}},
		{"{src,lib}/**/*.{ts,tsx}", []string{"src/a.ts", "lib/x/y.tsx"}, []string{"test/a.ts", "src/a.js"}},
		{"{a,{b,c}}", []string{"a", "b", "c"}, []string{"{a,{b,c}}"}},
		{"{a}", []string{"{a}"}, []string{"a"}},
		{"{a,b", []string{"{a,b"}, []string{"a"}},
		{`\*.md`, []string{"*.md"}, []string{"a.md"}},
		{`\{a,b}`, []string{"{a,b}"}, []string{"a"}},
		{"[{]a,b}", []string{"{a,b}"}, []string{"a"}},
		{"/docs/*.md", []string{"docs/a.md"}, []string{"a.md"}},
		{"./*.md", []string{"a.md"}, []string{"d/a.md"}},
		{"é*", []string{"été"}, []string{"ete"}},
	} {
		g, err := compileGlob(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		for _, p := range c.match {
			if !g.match(p) {
				t.Errorf("%q does not match %q", c.pattern, p)
			}
		}
		for _, p := range c.miss {
			if g.match(p) {
				t.Errorf("%q matches %q", c.pattern, p)
			}
		}
	}
	for _, bad := range []string{"", "[", "a[b", `a\`, "[]", strings.Repeat("{a,b}", 9), strings.Repeat("x", 1025)} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

// FuzzGlob: any pattern either compiles or is refused with an error, and
// matching never fails; a pattern without special characters matches
// exactly itself.
func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*.md", "**/*.{a,b}", "[!x]", "{{{", "}}}", `\`, "a/**/b/**/c", "[a-", "{a,[}]}", "\xff*"} {
		f.Add(s, "a/b.md")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		g, err := compileGlob(pattern)
		if err != nil {
			return
		}
		g.match(name)
		if !strings.ContainsAny(pattern, `*?[]{}\`) && !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "./") {
			if !g.match(pattern) {
				t.Fatalf("literal %q does not match itself", pattern)
			}
		}
	})
}

func TestUnifiedDiff(t *testing.T) {
	for _, c := range []struct {
		name, before, after, want string
	}{
		{"Same", "a\n", "a\n", ""},
		{"FromEmpty", "", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"ToEmpty", "a\n", "", "@@ -1 +0,0 @@\n-a\n"},
		{"NoNewlineAtEnd", "a\nb", "a\nc", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"AddsNewlineAtEnd", "a", "a\n", "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n"},
		{"TwoHunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
		{"MergedHunks", "1\n2\n3\n4\n5\n6\n7\n", "1\nX\n3\n4\n5\nY\n7\n", "@@ -1,7 +1,7 @@\n 1\n-2\n+X\n 3\n 4\n 5\n-6\n+Y\n 7\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := unifiedDiff("f", c.before, c.after)
			if c.want != "" {
				c.want = "--- f\toriginal\n+++ f\tmodified\n" + c.want
			}
			if got != c.want {
				t.Fatalf("diff:\n%s\nwant:\n%s", got, c.want)
			}
			checkPatch(t, c.before, c.after, got)
		})
	}
	t.Run("BeyondTheEditBoundStillCorrect", func(t *testing.T) {
		var a, b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&a, "a%d\n", i)
			fmt.Fprintf(&b, "b%d\n", i)
		}
		checkPatch(t, a.String(), b.String(), unifiedDiff("f", a.String(), b.String()))
	})
}

// FuzzUnifiedDiff: applying the diff to before gives after.
func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd")
	f.Add("", "x")
	f.Add("x\n\n\ny", "\n\nx\ny\n")
	f.Fuzz(func(t *testing.T, before, after string) {
		checkPatch(t, before, after, unifiedDiff("f", before, after))
	})
}

// checkPatch applies a unified diff to before and compares with after.
func checkPatch(t *testing.T, before, after, diff string) {
	t.Helper()
	got, err := applyPatch(before, diff)
	if err != nil || got != after {
		t.Fatalf("patch of %q with\n%s\ngives %q (%v), want %q", before, diff, got, err, after)
	}
}

func applyPatch(before, diff string) (string, error) {
	if diff == "" {
		return before, nil
	}
	var src []string
	if before != "" {
		src = splitLines(before)
	}
	lines := splitLines(diff)
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", errors.New("no header")
	}
	var out []string
	pos := 0
	var last *string // the last line written, for "\ No newline"
	var lastSrc bool
	for i := 2; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "@@ -"):
			start, err := strconv.Atoi(strings.Split(strings.Split(l[4:], " ")[0], ",")[0])
			if err != nil {
				return "", err
			}
			if strings.Contains(strings.Split(l[4:], " ")[0], ",0") {
				start++ // an empty side names the line before it
			}
			for pos < start-1 {
				out = append(out, src[pos])
				pos++
			}
			last = nil
		case strings.HasPrefix(l, `\ No newline`):
			if last == nil {
				return "", errors.New("stray no-newline marker")
			}
			*last = strings.TrimSuffix(*last, "\n")
			if lastSrc && src[pos-1] != *last {
				return "", fmt.Errorf("line %d: %q is not %q", pos, src[pos-1], *last)
			}
		case l[0] == ' ' || l[0] == '-':
			if pos >= len(src) {
				return "", errors.New("past the end")
			}
			if l[0] == ' ' {
				out = append(out, l[1:])
				last = &out[len(out)-1]
			} else {
				s := l[1:]
				last = &s
			}
			lastSrc = true
			if src[pos] != l[1:] && src[pos] != strings.TrimSuffix(l[1:], "\n") {
				return "", fmt.Errorf("line %d: %q is not %q", pos, src[pos], l[1:])
			}
			pos++
		case l[0] == '+':
			out = append(out, l[1:])
			last, lastSrc = &out[len(out)-1], false
		default:
			return "", fmt.Errorf("bad line %q", l)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

func TestApplyEdits(t *testing.T) {
	e := func(o, n string) editIn { return editIn{OldText: o, NewText: n} }
	for _, c := range []struct {
		name, content string
		edits         []editIn
		want, err     string
	}{
		{"One", "a b c", []editIn{e("b", "B")}, "a B c", ""},
		{"InOrder", "abc", []editIn{e("a", "x"), e("xb", "y")}, "yc", ""},
		{"Absent", "abc", []editIn{e("d", "x")}, "", "edits[0].oldText: does not occur in f"},
		{"AbsentAfterEarlierEdits", "abc", []editIn{e("a", "x"), e("a", "y")}, "", "edits[1].oldText: does not occur in f as the 1 edit(s) before it left it"},
		{"Twice", "aXa", []editIn{e("a", "b")}, "", "occurs 2 times in f"},
		{"Overlapping", "aaa", []editIn{e("aa", "b")}, "", "occurs more than once (overlapping)"},
		{"WhitespaceHint", "if x {\n\treturn\n}", []editIn{e("if x {\n    return", "y")}, "", "different whitespace"},
		{"CRLF", "a\r\nb\r\nc\r\n", []editIn{e("a\nb", "x\ny")}, "x\r\ny\r\nc\r\n", ""},
		{"CRLFExact", "a\r\nb\r\n", []editIn{e("a\r\nb", "z")}, "z\r\n", ""},
		{"DeleteText", "keep drop keep", []editIn{e(" drop", "")}, "keep keep", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyEdits("f", c.content, c.edits)
			switch {
			case c.err != "":
				var p *Problem
				if !errors.As(err, &p) || p.Code != CodeValidationFailed || !strings.Contains(p.Detail, c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
			case err != nil || got != c.want:
				t.Fatalf("%q (%v), want %q", got, err, c.want)
			}
		})
	}
}

func TestTextHelpers(t *testing.T) {
	t.Run("TrimPartialRunes", func(t *testing.T) {
		s := []byte("aé€😀")
		for cut := 0; cut <= len(s); cut++ {
			end := trimPartialRuneEnd(s[:cut])
			if !strings.HasPrefix(string(s), string(end)) || len(end) < cut-3 || !isText(end) {
				t.Errorf("end cut %d: %q", cut, end)
			}
			start := trimPartialRuneStart(s[cut:])
			if !strings.HasSuffix(string(s), string(start)) || len(start) < len(s)-cut-3 || !isText(start) {
				t.Errorf("start cut %d: %q", cut, start)
			}
		}
		if got := trimPartialRuneEnd([]byte{0xff, 0xfe}); len(got) != 2 {
			t.Errorf("non-UTF-8 end trimmed to %q", got)
		}
	})
	t.Run("HeadLines", func(t *testing.T) {
		for _, c := range []struct {
			in    string
			n     int
			cut   bool
			want  string
			trunc bool
		}{
			{"a\nb\nc\n", 2, false, "a\nb", false},
			{"a\nb\nc\n", 3, false, "a\nb\nc", false},
			{"a\nb\nc", 5, false, "a\nb\nc", false},
			{"a\nb\nc", 5, true, "a\nb\nc", true},
			{"a\nb", 1, true, "a", false},
			{"", 1, false, "", false},
		} {
			got, trunc := headLines([]byte(c.in), c.n, c.cut)
			if got != c.want || trunc != c.trunc {
				t.Errorf("head %d of %q (cut %v): %q %v", c.n, c.in, c.cut, got, trunc)
			}
		}
	})
	t.Run("TailLines", func(t *testing.T) {
		for _, c := range []struct {
			in      string
			n       int
			cut     bool
			want    string
			skipped int
			trunc   bool
		}{
			{"a\nb\nc\n", 2, false, "b\nc", 2, false},
			{"a\nb\nc", 1, false, "c", 4, false},
			{"a\nb\nc\n", 5, false, "a\nb\nc", 0, false},
			{"xa\nb\nc\n", 5, true, "b\nc", 3, true},
			{"xa\nb\nc\n", 2, true, "b\nc", 3, false},
			{"long line", 1, true, "long line", 0, true},
			{"\n", 1, false, "", 0, false},
		} {
			got, skipped, trunc := tailLines([]byte(c.in), c.n, c.cut)
			if got != c.want || skipped != c.skipped || trunc != c.trunc {
				t.Errorf("tail %d of %q (cut %v): %q %d %v", c.n, c.in, c.cut, got, skipped, trunc)
			}
		}
	})
}

func TestPaths(t *testing.T) {
	for _, c := range []struct{ arg, file, dir string }{
		{"a/b.md", "a/b.md", "a/b.md"},
		{"/a/b.md", "a/b.md", "a/b.md"},
		{"a/", "", "a"},
		{"/", "", ""},
		{".", "", ""},
		{"", "", ""},
	} {
		f, ferr := filePath("path", c.arg)
		if c.file == "" && ferr == nil || c.file != "" && (ferr != nil || f != c.file) {
			t.Errorf("filePath(%q) = %q, %v", c.arg, f, ferr)
		}
		d, derr := dirPath("path", c.arg)
		if derr != nil || d != c.dir {
			t.Errorf("dirPath(%q) = %q, %v", c.arg, d, derr)
		}
	}
	for _, bad := range []string{"//", "a//", "a//b", "../a", "a/./b", "a\\b", "\x00"} {
		if _, err := dirPath("path", bad); err == nil {
			t.Errorf("dirPath(%q) accepted", bad)
		}
	}
}

func TestErrorText(t *testing.T) {
	p := NewProblem(503, "STORAGE_UNAVAILABLE", "S3 is slow")
	p.RetryAfterSeconds = 5
	got := errorText(callContext{tool: "write_file", key: "k-1"}, p)
	want := `STORAGE_UNAVAILABLE: S3 is slow. Retrying can help after 5 seconds; repeat it with idempotency_key="k-1", which can never write twice. AgentFS could not complete the call; if it was a write, it may or may not have happened.`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	u := NewProblem(503, CodeUnreachable, "AgentFS did not answer: dial tcp: refused")
	u.IdempotencyKey = "afs-1"
	if got := errorText(callContext{tool: "write_file"}, u); !strings.Contains(got, `idempotency_key="afs-1"`) {
		t.Fatalf("unknown outcome without its key: %s", got)
	}
	v := validation("edits[0].oldText", "does not occur")
	if got := errorText(callContext{tool: "edit_file"}, v); got != "VALIDATION_FAILED: edits[0].oldText: does not occur. Retrying the same call will not help. Fix the arguments named above and call again." {
		t.Fatalf("validation: %s", got)
	}
}

// TestCount: a tool's text says "1 change", never "1 changes".
func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 changes", 1: "1 change", 2: "2 changes", 10000: "10000 changes"} {
		if got := count(n, "change"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
