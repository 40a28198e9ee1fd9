package mcpserver

import (
	"fmt"
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

// unifiedDiff renders the change from before to after as a unified diff of
// path ("" when nothing changed).
func unifiedDiff(path, before, after string) string {
	if before == after {
		return ""
	}
	ops := diffLines(splitLines(before), splitLines(after))
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\toriginal\n+++ %s\tmodified\n", path, path)
	for _, h := range hunks(ops) {
		writeHunk(&b, ops[h[0]:h[1]], h[0], ops)
	}
	return b.String()
}

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string {
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
	n, m := len(a), len(b)
	var rounds [][]int // rounds[d][k+d]: the furthest x on diagonal k after d edits
	at := func(d, k int) int { return rounds[d][k+d] }
	end := -1
	for d := 0; d <= n+m && end < 0; d++ {
		if d > maxD {
			return nil, false
		}
		cur := make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || k != d && at(d-1, k-1) < at(d-1, k+1):
				x = at(d-1, k+1) // down: insert b[y-1]
			default:
				x = at(d-1, k-1) + 1 // right: delete a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			cur[k+d] = x
			if x >= n && y >= m {
				end = d
			}
		}
		rounds = append(rounds, cur)
	}
	var rev []lineOp
	x, y := n, m
	for d := end; d > 0; d-- {
		k := x - y
		var pk int
		if k == -d || k != d && at(d-1, k-1) < at(d-1, k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(d-1, pk)
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
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, true
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
