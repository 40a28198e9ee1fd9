package grep

import (
	"bytes"
	"context"
	"regexp"
	"unicode/utf8"
)

// Match is one line that a pattern matches.
type Match struct {
	// Line is 1-based; Column is the 1-based byte offset of the first
	// match in the line.
	Line, Column int
	// Text is the line without its "\n" ("\r" stays, as ripgrep prints
	// it).
	Text []byte
	// Before and After are up to the asked number of lines around it.
	Before, After [][]byte
}

// Lines calls yield with every line of text after line from (0: all) that
// re matches, in order, each with up to around lines before and after it,
// until yield returns false. Lines are what ripgrep calls lines: the text
// split at "\n", a final "\n" ending the last line rather than starting an
// empty one; an empty text has none. re is matched against each line
// alone, so ^ and $ are the line's ends, exactly as rg -n matches. It
// stops early, every so many lines, once ctx is done.
func Lines(ctx context.Context, text []byte, re *regexp.Regexp, from, around int, yield func(Match) bool) {
	starts := lineStarts(text)
	n := len(starts) - 1 // starts[n] is one past the text's end, plus one
	line := func(k int) []byte { return text[starts[k] : starts[k+1]-1] }
	for k := max(from, 0); k < n; k++ {
		if k%1024 == 1023 && ctx.Err() != nil {
			return
		}
		loc := re.FindIndex(line(k))
		if loc == nil {
			continue
		}
		m := Match{Line: k + 1, Column: loc[0] + 1, Text: line(k)}
		for b := max(k-around, 0); b < k; b++ {
			m.Before = append(m.Before, line(b))
		}
		for a := k + 1; a <= min(k+around, n-1); a++ {
			m.After = append(m.After, line(a))
		}
		if !yield(m) {
			return
		}
	}
}

// lineStarts are the offsets where each line starts, and one past where
// the last would, each line ending one byte (its "\n") before the next
// start.
func lineStarts(text []byte) []int {
	starts := []int{0}
	for off := 0; off < len(text); {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			starts = append(starts, len(text)+1)
			break
		}
		off += i + 1
		starts = append(starts, off)
	}
	if len(text) == 0 {
		return starts[:1]
	}
	return starts
}

// Cut returns line cut to at most n bytes on a rune boundary, and whether
// it was cut.
func Cut(line []byte, n int) ([]byte, bool) {
	if len(line) <= n {
		return line, false
	}
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return line[:n], true
}
