// Package textdiff computes line diffs of text and renders them as unified
// diff hunks: the edit tool's preview and the patch of GET /v1/diff share
// it, so both are accepted by the same patch tools.
package textdiff

import (
	"fmt"
	"slices"
	"strings"
)

// diffContext is how many unchanged lines surround a change in a hunk.
const diffContext = 3

// maxDiffEdits bounds the line diff's work; beyond it the changed region
// is shown as one deletion and one insertion (still a correct diff).
const maxDiffEdits = 1000

// lineOp is one line of a diff: ' ' unchanged, '-' deleted, '+' inserted.
type lineOp struct {
	kind byte
	text string // with its newline, if it had one
}

// Unified renders the change from before to after as a unified diff of
// path with "original" and "modified" file headers ("" when nothing
// changed).
func Unified(path, before, after string) string {
	if before == after {
		return ""
	}
	return fmt.Sprintf("--- %s\toriginal\n+++ %s\tmodified\n", path, path) + Hunks(before, after)
}

// Hunks is the hunks of the unified diff from before to after, without
// file headers ("" when nothing changed); a last line without a newline is
// marked as patch(1) and git apply expect.
func Hunks(before, after string) string {
	if before == after {
		return ""
	}
	ops := diffLines(SplitLines(before), SplitLines(after))
	var b strings.Builder
	for _, h := range hunks(ops) {
		writeHunk(&b, ops[h[0]:h[1]], h[0], ops)
	}
	return b.String()
}

// SplitLines splits s after each newline; the last line may lack one.
func SplitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines is the line diff of a and b: the common prefix and suffix,
// and a shortest edit script (Myers) of the middle.
func diffLines(a, b []string) []lineOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []lineOp
	for _, l := range a[:pre] {
		ops = append(ops, lineOp{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb, maxDiffEdits)
	if !ok {
		mid = nil
		for _, l := range ma {
			mid = append(mid, lineOp{'-', l})
		}
		for _, l := range mb {
			mid = append(mid, lineOp{'+', l})
		}
	}
	ops = append(ops, mid...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, lineOp{' ', l})
	}
	return ops
}

// myers returns a shortest edit script from a to b, or false when it needs
// more than maxD deletions and insertions. It keeps each round's frontier
// (O(D²) memory) to walk back the path.
func myers(a, b []string, maxD int) ([]lineOp, bool) {
	f, ok := search(a, b, maxD)
	if !ok {
		return nil, false
	}
	return f.path(a, b), true
}

// frontiers are the rounds of the search: f[d][k+d] is the furthest x on
// diagonal k (x-y) after d edits.
type frontiers [][]int

func (f frontiers) at(d, k int) int { return f[d][k+d] }

// down reports whether round d reaches diagonal k from k+1 of the round
// before (inserting b[y-1]) rather than from k-1 (deleting a[x-1]).
func (f frontiers) down(d, k int) bool {
	return k == -d || k != d && f.at(d-1, k-1) < f.at(d-1, k+1)
}

// search runs rounds of at most maxD edits until one reaches the ends of
// both a and b; that round is the last of the frontiers.
func search(a, b []string, maxD int) (frontiers, bool) {
	n, m := len(a), len(b)
	var f frontiers
	for d := 0; d <= maxD; d++ {
		cur := make([]int, 2*d+1)
		done := false
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case f.down(d, k):
				x = f.at(d-1, k+1) // down: insert b[y-1]
			default:
				x = f.at(d-1, k-1) + 1 // right: delete a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			cur[k+d] = x
			done = done || x >= n && y >= m
		}
		f = append(f, cur)
		if done {
			return f, true
		}
	}
	return nil, false
}

// path walks the frontiers back from the ends of a and b to their starts,
// and returns the edits in order.
func (f frontiers) path(a, b []string) []lineOp {
	var rev []lineOp
	x, y := len(a), len(b)
	for d := len(f) - 1; d > 0; d-- {
		k := x - y
		pk := k - 1
		if f.down(d, k) {
			pk = k + 1
		}
		px := f.at(d-1, pk)
		py := px - pk
		sx := px // where the snake starts, after the edit
		if pk == k-1 {
			sx = px + 1
		}
		for x > sx {
			x, y = x-1, y-1
			rev = append(rev, lineOp{' ', a[x]})
		}
		if pk == k+1 {
			rev = append(rev, lineOp{'+', b[py]})
		} else {
			rev = append(rev, lineOp{'-', a[px]})
		}
		x, y = px, py
	}
	for x > 0 {
		x, y = x-1, y-1
		rev = append(rev, lineOp{' ', a[x]})
	}
	slices.Reverse(rev)
	return rev
}

// hunks groups the changes of ops with their context: [start, end) index
// ranges of ops, merged when their contexts touch.
func hunks(ops []lineOp) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); i++ {
		if ops[i].kind == ' ' {
			continue
		}
		start := max(0, i-diffContext)
		j := i
		for j < len(ops) && ops[j].kind != ' ' {
			j++
		}
		stop := min(len(ops), j+diffContext)
		if n := len(out); n > 0 && start <= out[n-1][1] {
			out[n-1][1] = stop
		} else {
			out = append(out, [2]int{start, stop})
		}
		i = j - 1
	}
	return out
}

// writeHunk writes one hunk, h = all[first:first+len(h)], with its header.
func writeHunk(b *strings.Builder, h []lineOp, first int, all []lineOp) {
	aBefore, bBefore := 0, 0
	for _, op := range all[:first] {
		if op.kind != '+' {
			aBefore++
		}
		if op.kind != '-' {
			bBefore++
		}
	}
	aCount, bCount := 0, 0
	for _, op := range h {
		if op.kind != '+' {
			aCount++
		}
		if op.kind != '-' {
			bCount++
		}
	}
	fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(aBefore, aCount), hunkRange(bBefore, bCount))
	for _, op := range h {
		b.WriteByte(op.kind)
		b.WriteString(op.text)
		if !strings.HasSuffix(op.text, "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange is "start,count" of a hunk side; an empty side names the line
// before it.
func hunkRange(before, count int) string {
	start := before + 1
	if count == 0 {
		start = before
	}
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
