// Package grep holds the two halves of content search that need no
// server: what an index may look for, and the exact match.
//
// Required turns an RE2 pattern into a Query: a condition on a file's
// whole text, made of literals joined by AND and OR, that holds for every
// text with a line the pattern matches. An index of the texts (storage
// writes it as SQL for Postgres's pg_trgm) can then rule most files out
// without reading them; a Query may let through texts that do not match
// (it is only necessary), never the other way. Lines then finds the
// matching lines exactly, with Go's regexp, line by line.
//
// The analysis follows Russ Cox's "Regular Expression Matching with a
// Trigram Index" (the exact set of strings a node can match while it is
// small, else the literals it must contain), with literals in place of
// trigrams: the index looks a literal up by its own trigrams.
package grep

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
)

// Atom is one position of a literal: the rune R, or with Fold any rune of
// R's case-folding orbit (unicode.SimpleFold), as (?i) matches it.
type Atom struct {
	R    rune
	Fold bool
}

// Literal is a string of atoms.
type Literal []Atom

// String writes the literal as a pattern would: a folded atom as its
// orbit in brackets.
func (l Literal) String() string {
	var b strings.Builder
	for _, a := range l {
		if a.Fold {
			b.WriteByte('[')
			for _, r := range Orbit(a.R) {
				b.WriteRune(r)
			}
			b.WriteByte(']')
			continue
		}
		b.WriteRune(a.R)
	}
	return b.String()
}

// Orbit is every rune that (?i) matches for r: r's simple case-folding
// orbit, r first.
func Orbit(r rune) []rune {
	out := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f)
	}
	return out
}

// Op is what a Query node is.
type Op int

// Query nodes.
const (
	// All holds for every text: the pattern gives the index nothing to
	// look for.
	All Op = iota
	// None holds for no text: the pattern can match no line.
	None
	// Lit holds for a text that contains the literal.
	Lit
	// And holds when every sub-query does, Or when one does.
	And
	Or
)

// Query is a condition on a file's text that every text with a matching
// line satisfies.
type Query struct {
	Op   Op
	Lit  Literal
	Subs []*Query
}

var (
	allQuery  = &Query{Op: All}
	noneQuery = &Query{Op: None}
)

// String writes the query for people and tests: "abc", (a AND b), (a OR b),
// ALL, NONE.
func (q *Query) String() string {
	switch q.Op {
	case All:
		return "ALL"
	case None:
		return "NONE"
	case Lit:
		return `"` + q.Lit.String() + `"`
	}
	parts := make([]string, len(q.Subs))
	for i, s := range q.Subs {
		parts[i] = s.String()
	}
	sep := " AND "
	if q.Op == Or {
		sep = " OR "
	}
	return "(" + strings.Join(parts, sep) + ")"
}

// Bounds of the analysis: past them a node's exact strings become the
// literals it must contain, which keeps every query small.
const (
	maxExact    = 16 // strings in an exact set
	maxClass    = 8  // runes of a character class taken one by one
	maxLiteral  = 64 // atoms of an exact string
	maxRequired = 64 // sub-queries of an And or an Or
)

// Required is the query that every text with a line re matches satisfies.
// re is the parsed pattern (syntax.Perl flags, as regexp.Compile parses).
func Required(re *syntax.Regexp) *Query { return analyze(re.Simplify()).full() }

// info is what the analysis knows of a node: the strings it matches, when
// they are few (exact, with exactOK); strings one of which every match
// starts with (prefix) and ends with (suffix); and a query every match
// satisfies besides.
type info struct {
	exactOK        bool
	exact          []Literal
	prefix, suffix []Literal
	match          *Query
}

// anything is the prefix or suffix set that says nothing.
var anything = []Literal{{}}

func exactly(lits ...Literal) info {
	return info{exactOK: true, exact: lits, prefix: lits, suffix: lits, match: allQuery}
}

func unknown(q *Query) info { return info{prefix: anything, suffix: anything, match: q} }

// full is everything the info says as one query.
func (i info) full() *Query {
	if i.exactOK {
		return and(i.match, setQuery(i.exact))
	}
	return and(i.match, setQuery(i.prefix), setQuery(i.suffix))
}

// setQuery is the query that a text contains one of lits. A string with
// a newline never matches inside a line.
func setQuery(lits []Literal) *Query {
	var subs []*Query
	for _, l := range lits {
		if slices.ContainsFunc(l, func(a Atom) bool { return a.R == '\n' }) {
			continue
		}
		if len(l) == 0 {
			return allQuery // the empty string is in every text
		}
		subs = append(subs, &Query{Op: Lit, Lit: l})
	}
	return or(subs...)
}

func analyze(re *syntax.Regexp) info {
	switch re.Op {
	case syntax.OpNoMatch:
		return exactly()
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return exactly(Literal{})
	case syntax.OpLiteral:
		return exactly(literal(re))
	case syntax.OpCharClass:
		return class(re.Rune)
	case syntax.OpCapture:
		return analyze(re.Sub[0])
	case syntax.OpQuest:
		sub := analyze(re.Sub[0])
		if sub.exactOK && len(sub.exact) < maxExact {
			return exactly(append(slices.Clone(sub.exact), Literal{})...)
		}
		return unknown(allQuery)
	case syntax.OpPlus:
		return repeated(analyze(re.Sub[0]))
	case syntax.OpRepeat:
		if re.Min == 0 {
			return unknown(allQuery)
		}
		return repeated(analyze(re.Sub[0]))
	case syntax.OpConcat:
		acc := exactly(Literal{})
		for _, sub := range re.Sub {
			acc = concat(acc, analyze(sub))
		}
		return acc
	case syntax.OpAlternate:
		subs := make([]info, len(re.Sub))
		for k, sub := range re.Sub {
			subs[k] = analyze(sub)
		}
		return alternate(subs)
	}
	// OpAnyChar, OpAnyCharNotNL, OpStar (and any op to come): anything.
	return unknown(allQuery)
}

// repeated is the info of x once or more: it starts as x starts, ends as
// x ends, and holds what x holds.
func repeated(x info) info {
	return info{prefix: x.prefix, suffix: x.suffix, match: x.full()}
}

// literal is an OpLiteral's string; under (?i) each rune that has other
// cases stands for its orbit.
func literal(re *syntax.Regexp) Literal {
	fold := re.Flags&syntax.FoldCase != 0
	out := make(Literal, len(re.Rune))
	for k, r := range re.Rune {
		out[k] = Atom{R: r, Fold: fold && unicode.SimpleFold(r) != r}
	}
	return out
}

// class is a character class's runes one by one while they are few.
func class(ranges []rune) info {
	n := 0
	for k := 0; k+1 < len(ranges); k += 2 {
		n += int(ranges[k+1]-ranges[k]) + 1
		if n > maxClass {
			return unknown(allQuery)
		}
	}
	var lits []Literal
	for k := 0; k+1 < len(ranges); k += 2 {
		for r := ranges[k]; r <= ranges[k+1]; r++ {
			lits = append(lits, Literal{{R: r}})
		}
	}
	return exactly(lits...)
}

// product is every x·y of xs and ys; ok is false when there would be more
// than maxExact, or one longer than maxLiteral.
func product(xs, ys []Literal) ([]Literal, bool) {
	if len(xs)*len(ys) > maxExact {
		return nil, false
	}
	var out []Literal
	for _, x := range xs {
		for _, y := range ys {
			if len(x)+len(y) > maxLiteral {
				return nil, false
			}
			out = append(out, append(slices.Clone(x), y...))
		}
	}
	return dedupe(out), true
}

// concat is the info of a followed by b: the cross product of their
// exact sets while it stays small; else what each holds, what spans the
// two (a's suffixes followed by b's prefixes), and the prefixes and
// suffixes that the exact side makes longer.
func concat(a, b info) info {
	if a.exactOK && b.exactOK {
		if p, ok := product(a.exact, b.exact); ok {
			return exactly(p...)
		}
	}
	out := info{prefix: a.prefix, suffix: b.suffix, match: and(a.match, b.match)}
	if a.exactOK {
		out.match = and(out.match, setQuery(a.exact))
		if p, ok := product(a.exact, b.prefix); ok {
			out.prefix = p
		}
	}
	if b.exactOK {
		out.match = and(out.match, setQuery(b.exact))
		if s, ok := product(a.suffix, b.exact); ok {
			out.suffix = s
		}
	}
	if span, ok := product(a.suffix, b.prefix); ok {
		out.match = and(out.match, setQuery(span))
	}
	return out
}

// alternate is the info of one of subs: the union of their exact sets
// while it stays small, else one of what each holds, and the union of
// their prefixes and suffixes while they stay few.
func alternate(subs []info) info {
	var union []Literal
	ok := true
	for _, s := range subs {
		if !s.exactOK || len(union)+len(s.exact) > maxExact {
			ok = false
			break
		}
		union = append(union, s.exact...)
	}
	if ok {
		return exactly(dedupe(union)...)
	}
	out := info{prefix: anything, suffix: anything}
	qs := make([]*Query, len(subs))
	var prefixes, suffixes []Literal
	for k, s := range subs {
		qs[k] = s.full()
		prefixes, suffixes = append(prefixes, s.prefix...), append(suffixes, s.suffix...)
	}
	if prefixes = dedupe(prefixes); len(prefixes) <= maxExact {
		out.prefix = prefixes
	}
	if suffixes = dedupe(suffixes); len(suffixes) <= maxExact {
		out.suffix = suffixes
	}
	out.match = or(qs...)
	return out
}

func dedupe(lits []Literal) []Literal {
	seen := map[string]bool{}
	out := lits[:0:0]
	for _, l := range lits {
		k := key(l)
		if !seen[k] {
			seen[k] = true
			out = append(out, l)
		}
	}
	return out
}

// key is a literal's identity: folded atoms by their orbit's smallest
// rune.
func key(l Literal) string {
	var b strings.Builder
	for _, a := range l {
		r := a.R
		if a.Fold {
			r = slices.Min(Orbit(a.R))
			b.WriteByte(1)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// and is the query that holds when every one of qs does, simplified.
func and(qs ...*Query) *Query { return combine(And, qs) }

// or is the query that holds when one of qs does, simplified.
func or(qs ...*Query) *Query { return combine(Or, qs) }

// combine joins qs with op: nested nodes of the same op flattened, All and
// None folded away, duplicates dropped. An Or of more than maxRequired
// sub-queries is All (dropping one would lose texts); an And of more
// keeps the maxRequired that say most (dropping one only lets more texts
// through).
func combine(op Op, qs []*Query) *Query {
	unit, absorb := allQuery, noneQuery // And: All is its unit, None absorbs
	if op == Or {
		unit, absorb = noneQuery, allQuery
	}
	var subs []*Query
	seen := map[string]bool{}
	for _, q := range qs {
		switch {
		case q.Op == unit.Op:
			continue
		case q.Op == absorb.Op:
			return absorb
		}
		flat := []*Query{q}
		if q.Op == op {
			flat = q.Subs
		}
		for _, s := range flat {
			if k := s.String(); !seen[k] {
				seen[k] = true
				subs = append(subs, s)
			}
		}
	}
	subs = implied(op, subs)
	switch {
	case len(subs) == 0:
		return unit
	case len(subs) == 1:
		return subs[0]
	case len(subs) > maxRequired && op == Or:
		return allQuery
	case len(subs) > maxRequired:
		slices.SortStableFunc(subs, func(x, y *Query) int { return weight(y) - weight(x) })
		subs = subs[:maxRequired]
	}
	return &Query{Op: op, Subs: subs}
}

// implied drops the literals that another literal of subs makes redundant:
// in an And, one contained in another (a text with "abc" has "ab"); in an
// Or, one that contains another (a text with "abc" has "ab" already).
func implied(op Op, subs []*Query) []*Query {
	out := subs[:0:0]
	for k, q := range subs {
		redundant := false
		for j, o := range subs {
			if j == k || q.Op != Lit || o.Op != Lit {
				continue
			}
			inner, outer := q.Lit, o.Lit
			if op == Or {
				inner, outer = o.Lit, q.Lit
			}
			// Equal literals were deduplicated: one contains the other
			// only when it is longer.
			if len(outer) > len(inner) && outer.contains(inner) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, q)
		}
	}
	return out
}

// contains reports whether inner is a run of l's atoms.
func (l Literal) contains(inner Literal) bool {
	for start := 0; start+len(inner) <= len(l); start++ {
		if slices.Equal(l[start:start+len(inner)], inner) {
			return true
		}
	}
	return false
}

// weight is how much a query narrows, roughly: a literal's length.
func weight(q *Query) int {
	switch q.Op {
	case Lit:
		return len(q.Lit)
	case And:
		w := 0
		for _, s := range q.Subs {
			w = max(w, weight(s))
		}
		return w
	case Or:
		w := maxLiteral
		for _, s := range q.Subs {
			w = min(w, weight(s))
		}
		return w
	}
	return 0
}

// Holds reports whether text satisfies the query, by brute force: what an
// index must answer for the query (the tests hold both to it).
func (q *Query) Holds(text string) bool {
	switch q.Op {
	case All:
		return true
	case None:
		return false
	case Lit:
		return q.Lit.In(text)
	case And:
		for _, s := range q.Subs {
			if !s.Holds(text) {
				return false
			}
		}
		return true
	}
	for _, s := range q.Subs {
		if s.Holds(text) {
			return true
		}
	}
	return false
}

// In reports whether text contains the literal.
func (l Literal) In(text string) bool {
	if len(l) == 0 {
		return true
	}
	runes := []rune(text)
	for start := 0; start+len(l) <= len(runes); start++ {
		if l.at(runes[start:]) {
			return true
		}
	}
	return false
}

func (l Literal) at(runes []rune) bool {
	for k, a := range l {
		r := runes[k]
		if r == a.R {
			continue
		}
		if !a.Fold || !slices.Contains(Orbit(a.R), r) {
			return false
		}
	}
	return true
}
