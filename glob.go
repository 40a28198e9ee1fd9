package agentfs

import (
	"errors"
	"path"
	"strings"
)

// MaxGlobLen bounds a glob pattern.
const MaxGlobLen = 1024

// maxGlobAlternatives bounds what a pattern's braces expand to.
const maxGlobAlternatives = 256

// Glob matches '/'-separated relative paths: the patterns of the MCP tool
// search_files and the glob of content search (GET /v1/search, grep_files):
// '*' and '?' match within one name, "**" as a whole segment matches any
// number of names (also none), [abc], [a-z] and [!a] (or [^a]) match one
// character, {a,b} matches either alternative, and a backslash escapes
// the character after it. Names starting with a dot match like any other.
type Glob struct {
	alts [][]string // each alternative, split into segments
}

// CompileGlob parses a pattern; a malformed one is an error whose text
// says what to fix (fit for a model, or a problem's detail).
func CompileGlob(pattern string) (*Glob, error) {
	if pattern == "" {
		return nil, errors.New("pattern is empty")
	}
	if len(pattern) > MaxGlobLen {
		return nil, errors.New("pattern is longer than 1024 bytes")
	}
	p := strings.TrimPrefix(strings.TrimPrefix(pattern, "/"), "./")
	alts, err := expandBraces(p, 0)
	if err != nil {
		return nil, err
	}
	g := &Glob{}
	for _, alt := range alts {
		segs := strings.Split(alt, "/")
		for i, seg := range segs {
			if seg == "**" {
				continue
			}
			seg = bangToCaret(seg)
			if _, err := path.Match(seg, ""); err != nil {
				return nil, errors.New("pattern is malformed (an unclosed [ or a trailing backslash)")
			}
			segs[i] = seg
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// expandBraces expands the first {a,b} group at or after from (outside
// character classes, not escaped) and recurses into the results. A brace
// without a matching close or without a comma is literal.
func expandBraces(p string, from int) ([]string, error) {
	open, close, commas := findBraceGroup(p, from)
	if open < 0 {
		return []string{p}, nil
	}
	if len(commas) == 0 {
		return expandBraces(p, open+1)
	}
	var out []string
	start := open + 1
	for _, c := range append(commas, close) {
		alt := p[:open] + p[start:c] + p[close+1:]
		more, err := expandBraces(alt, open)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
		if len(out) > maxGlobAlternatives {
			return nil, errors.New("pattern's {a,b} groups expand to more than 256 alternatives")
		}
		start = c + 1
	}
	return out, nil
}

// findBraceGroup finds the first brace group at or after from: the index
// of its '{' and '}' and of its top-level commas; open is -1 when there
// is none.
func findBraceGroup(p string, from int) (open, close int, commas []int) {
	inClass := false
	for i := from; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(p) && (p[i+1] == '!' || p[i+1] == '^') {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++ // a leading ']' is a member
			}
		case c == '{':
			if end, cs, ok := braceEnd(p, i); ok {
				return i, end, cs
			}
		}
	}
	return -1, -1, nil
}

// braceEnd finds the '}' that closes the '{' at open, and the commas at
// its top level.
func braceEnd(p string, open int) (int, []int, bool) {
	depth := 0
	var commas []int
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i, commas, true
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	return -1, nil, false
}

// bangToCaret writes a class's "[!" negation as path.Match's "[^".
func bangToCaret(seg string) string {
	b := []byte(seg)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\':
			i++
		case b[i] == '[' && i+1 < len(b) && b[i+1] == '!':
			b[i+1] = '^'
		}
	}
	return string(b)
}

// Match reports whether rel matches any alternative of the pattern.
func (g *Glob) Match(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, alt := range g.alts {
		if matchSegments(alt, segs) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, "**"
// matching any number of them; memoized, so many "**" stay linear in the
// product of the lengths.
func matchSegments(pat, segs []string) bool {
	w := len(segs) + 1
	memo := make([]int8, (len(pat)+1)*w) // 0 unknown, 1 no, 2 yes
	var rec func(i, j int) bool
	rec = func(i, j int) bool {
		if m := memo[i*w+j]; m != 0 {
			return m == 2
		}
		var ok bool
		switch {
		case i == len(pat):
			ok = j == len(segs)
		case pat[i] == "**":
			ok = rec(i+1, j) || j < len(segs) && rec(i, j+1)
		default:
			ok = j < len(segs) && segmentMatch(pat[i], segs[j]) && rec(i+1, j+1)
		}
		memo[i*w+j] = 1
		if ok {
			memo[i*w+j] = 2
		}
		return ok
	}
	return rec(0, 0)
}

func segmentMatch(pattern, name string) bool {
	ok, _ := path.Match(pattern, name) // compileGlob checked the syntax
	return ok
}
