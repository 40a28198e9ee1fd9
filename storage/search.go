package storage

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/grep"
)

// Search answers one page of a content search of the subject's live,
// unblocked text files (their current versions), in path order (bytes)
// then line. The pattern becomes a condition on the search index (the
// literals every match contains, grep.Required, looked up by pg_trgm's
// trigrams), which rules out most files without reading them; the lines
// of the files it lets through are matched by Go's regexp, so the answer
// is exactly RE2's. A page that cannot finish within
// Config.SearchTimeout is agentfs.ErrSearchTooBroad; the statement it was
// running is cancelled in Postgres (statement_timeout, and a cancel
// request as soon as ctx ends, when the client goes away).
func (s *Store) Search(ctx context.Context, subject string, q agentfs.Search) (*agentfs.SearchPage, error) {
	re, err := q.Regexp()
	if err != nil {
		return nil, err
	}
	plan, err := s.planSearch(subject, q, re)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(unbounded(ctx), s.cfg.SearchTimeout)
	defer cancel()
	page, err := s.runSearch(ctx, plan)
	switch {
	case err == nil:
		page.IndexComplete = s.IndexComplete(ctx)
		return page, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || statementTimedOut(err):
		return nil, agentfs.ErrSearchTooBroad
	}
	return nil, fmt.Errorf("search: %w", err)
}

// searchPlan is a search made ready to run: its pattern, the condition on
// the index, and the files in scope.
type searchPlan struct {
	q      agentfs.Search
	re     *regexp.Regexp
	glob   *agentfs.Glob
	scope  *filter // the files in scope, on files f (and search_texts t)
	text   string  // the condition on t.body ("" when the index cannot narrow)
	none   bool    // no line can match
	maxRow int64
}

// planSearch turns q into the conditions of its statements.
func (s *Store) planSearch(subject string, q agentfs.Search, re *regexp.Regexp) (*searchPlan, error) {
	p := &searchPlan{q: q, re: re, maxRow: s.searchMax()}
	if q.Glob != "" {
		g, err := agentfs.CompileGlob(q.Glob)
		if err != nil {
			return nil, &agentfs.SearchFieldError{Field: "glob", Reason: err.Error()}
		}
		p.glob = g
	}
	p.scope = newFilter("f.subject = @subject", pgx.NamedArgs{"subject": subject})
	p.scope.when(true, liveFileOf("f")+" AND NOT f.blocked", nil)
	lo, ok := narrowest(q.Prefix, globPrefix(q.Glob))
	if !ok {
		p.none = true // the prefix and the glob's own prefix exclude each other
	}
	if lo != "" {
		p.scope.when(true, `f.path COLLATE "C" >= @lo AND starts_with(f.path, @lo)`, pgx.NamedArgs{"lo": lo})
		if hi, ok := prefixEnd(lo); ok {
			p.scope.when(true, `f.path COLLATE "C" < @hi`, pgx.NamedArgs{"hi": hi})
		}
	}
	p.scope.when(q.RunID != "", "(f.run_id = @run_id OR f.last_run_id = @run_id)", pgx.NamedArgs{"run_id": q.RunID})
	// A grant's prefixes (Search.Within, set by the read gate): each a
	// folder ("reports/" and "reports" both cover reports/a.txt, never
	// reports-old/x) or a whole path.
	p.scope.when(len(q.Within) > 0, `EXISTS (SELECT 1 FROM unnest(@within::text[]) w
		WHERE f.path = rtrim(w, '/') OR starts_with(f.path, rtrim(w, '/') || '/'))`, pgx.NamedArgs{"within": q.Within})
	syn, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil, &agentfs.SearchFieldError{Field: "q", Reason: "is not a valid RE2 regular expression: " + err.Error()}
	}
	args := pgx.NamedArgs{}
	required := grep.Required(syn)
	p.none = p.none || required.Op == grep.None
	p.text = textCondition(required, args)
	p.scope.when(true, "true", args)
	return p, nil
}

// liveFileOf is liveFile of the files row named alias.
func liveFileOf(alias string) string {
	return "(" + alias + ".deleted_at IS NULL AND NOT coalesce(" + alias + ".expires_at <= now(), false))"
}

// narrowest is the longer of two prefixes when one extends the other; ok
// is false when no path can start with both.
func narrowest(a, b string) (string, bool) {
	switch {
	case strings.HasPrefix(a, b):
		return a, true
	case strings.HasPrefix(b, a):
		return b, true
	}
	return "", false
}

// globPrefix is the part of a glob before its first special character:
// every path it matches starts with it.
func globPrefix(g string) string {
	g = strings.TrimPrefix(strings.TrimPrefix(g, "/"), "./")
	if i := strings.IndexAny(g, `*?[{\`); i >= 0 {
		g = g[:i]
	}
	return g
}

// prefixEnd is the least string above every string that starts with p, in
// byte order (UTF-8's is code point order): p with its last rune raised by
// one; ok is false when there is none.
func prefixEnd(p string) (string, bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		next := r + 1
		if next == 0xD800 {
			next = 0xE000 // past the surrogates, which UTF-8 cannot hold
		}
		if next <= utf8.MaxRune {
			return p + string(next), true
		}
	}
	return "", false
}

// Bounds of the condition on the index.
const (
	// maxIndexLiteral is the longest literal looked up: a longer one is
	// cut to a run of it, which every text with it holds too.
	maxIndexLiteral = 32
	// maxIndexTerms bounds how many literals one search looks up.
	maxIndexTerms = 32
)

// textCondition writes a query as SQL on t.body, its literals as named
// arguments added to args; "" when it narrows nothing. A literal whose
// trigrams pg_trgm might not find (no run of three ASCII letters or
// digits) counts as true: the index is asked only what it can answer
// quickly, and Go's regexp decides the rest.
func textCondition(q *grep.Query, args pgx.NamedArgs) string {
	var w sqlWriter
	w.args = args
	return w.query(q)
}

type sqlWriter struct {
	args  pgx.NamedArgs
	terms int
}

func (w *sqlWriter) query(q *grep.Query) string {
	switch q.Op {
	case grep.None:
		return "false"
	case grep.Lit:
		return w.literal(q.Lit)
	case grep.And, grep.Or:
		var parts []string
		for _, sub := range q.Subs {
			part := w.query(sub)
			if part == "" && q.Op == grep.Or {
				return "" // one branch that cannot be narrowed: the whole Or
			}
			if part != "" {
				parts = append(parts, part)
			}
		}
		if len(parts) == 0 {
			return ""
		}
		sep := " AND "
		if q.Op == grep.Or {
			sep = " OR "
		}
		return "(" + strings.Join(parts, sep) + ")"
	}
	return ""
}

// literal is the condition that t.body contains l: LIKE, or with folded
// atoms a regular expression of bracket expressions (case-sensitive, so
// no locale decides what matches).
func (w *sqlWriter) literal(l grep.Literal) string {
	start, ok := indexable(l)
	if !ok || w.terms >= maxIndexTerms {
		return ""
	}
	l = l[start:min(len(l), start+maxIndexLiteral)]
	name := "lit" + strconv.Itoa(w.terms)
	w.terms++
	folded := false
	for _, a := range l {
		folded = folded || a.Fold
	}
	if !folded {
		var b strings.Builder
		for _, a := range l {
			if a.R == '%' || a.R == '_' || a.R == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(a.R)
		}
		w.args[name] = "%" + b.String() + "%"
		return "t.body LIKE @" + name
	}
	w.args[name] = regexOf(l)
	return "t.body ~ @" + name
}

// regexOf writes l as a Postgres regular expression (ARE): a folded atom
// as a bracket expression of its orbit (letters only, none of them
// special there), an ASCII punctuation character escaped.
func regexOf(l grep.Literal) string {
	var b strings.Builder
	for _, a := range l {
		switch {
		case a.Fold:
			b.WriteByte('[')
			for _, r := range grep.Orbit(a.R) {
				b.WriteRune(r)
			}
			b.WriteByte(']')
		case a.R < utf8.RuneSelf && !isASCIIAlnum(a.R):
			b.WriteByte('\\')
			b.WriteRune(a.R)
		default:
			b.WriteRune(a.R)
		}
	}
	return b.String()
}

// indexable finds where in l the index can start looking: the first run
// of three atoms that pg_trgm makes a trigram of in any locale (ASCII
// letters and digits, or folded ASCII letters whose orbit is ASCII: not k
// or s, which fold to the Kelvin sign and the long s).
func indexable(l grep.Literal) (int, bool) {
	run := 0
	for k, a := range l {
		if trigramSafe(a) {
			run++
			if run == 3 {
				return k - 2, true
			}
			continue
		}
		run = 0
	}
	return 0, false
}

func trigramSafe(a grep.Atom) bool {
	if !a.Fold {
		return isASCIIAlnum(a.R)
	}
	for _, r := range grep.Orbit(a.R) {
		if !isASCIIAlnum(r) {
			return false
		}
	}
	return true
}

func isASCIIAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// statementTimedOut reports whether Postgres cancelled a statement
// (statement_timeout, or the cancel request of a search whose time ran
// out).
func statementTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014"
}

// searchConn is a connection held for one search page: its statements run
// in one read-only transaction under statement_timeout, and a cancel
// request goes to Postgres as soon as ctx ends.
type searchConn struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
	stop func() bool
}

// beginSearch holds a connection for a page of a search bounded by
// timeout.
func (s *Store) beginSearch(ctx context.Context, timeout time.Duration) (*searchConn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, Translate(err)
	}
	pg := conn.Conn().PgConn()
	stop := context.AfterFunc(ctx, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = pg.CancelRequest(cctx)
	})
	// Every statement is planned for its own arguments: a prepared
	// statement's generic plan, which pgx's statement cache lets Postgres
	// choose after five runs, does not know how narrow the blob keys or a
	// subject's skipped files are, and walks every file under the prefix
	// (0.45 s at 30 k files, against 0.4 ms planned for the arguments).
	ms := max(timeout.Milliseconds(), 1)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(
		"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = %d; SET LOCAL plan_cache_mode = force_custom_plan", ms)})
	if err != nil {
		stop()
		conn.Release()
		return nil, Translate(err)
	}
	return &searchConn{conn: conn, tx: tx, stop: stop}, nil
}

// end ends the transaction and gives the connection back.
func (c *searchConn) end(ctx context.Context) {
	c.stop()
	Rollback(ctx, c.tx)
	c.conn.Release()
}

// runSearch runs a planned search's statements on one connection.
func (s *Store) runSearch(ctx context.Context, p *searchPlan) (*agentfs.SearchPage, error) {
	c, err := s.beginSearch(ctx, s.cfg.SearchTimeout)
	if err != nil {
		return nil, err
	}
	defer c.end(ctx)
	if s.searchHook != nil {
		if err := s.searchHook(ctx, c.tx); err != nil {
			return nil, err
		}
	}
	page := &agentfs.SearchPage{}
	if cur := p.q.After; cur != nil {
		page.FilesMatched, page.FilesSearched = cur.Matched, cur.Searched
		page.SkippedBinary, page.SkippedTooLarge = cur.Binary, cur.TooLarge
	} else if err := p.countSkipped(ctx, c.tx, page); err != nil {
		return nil, err
	}
	if p.none {
		return page, nil
	}
	r := &pageReader{plan: p, page: page, budget: agentfs.MaxSearchPageBytes}
	err = r.read(ctx, c.tx, s.searchKeys)
	if r.keys != nil {
		s.counters.searchByKeys.Add(1)
	} else {
		s.counters.searchWalks.Add(1)
	}
	return page, err
}

// countSkipped counts the files in scope that the search skips (binary,
// too large): on the first page, for every page after it.
func (p *searchPlan) countSkipped(ctx context.Context, tx pgx.Tx, page *agentfs.SearchPage) error {
	rows, err := tx.Query(ctx, `SELECT f.path, t.kind FROM search_texts t JOIN files f ON f.blob_key = t.blob_key
		WHERE t.subject = @subject AND t.kind IN (1, 2) AND `+p.scope.where(), p.scope.args)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var path string
		var kind int16
		if err := rows.Scan(&path, &kind); err != nil {
			return err
		}
		if p.glob != nil && !p.glob.Match(path) {
			continue
		}
		if kind == searchBinary {
			page.SkippedBinary++
		} else {
			page.SkippedTooLarge++
		}
	}
	return rows.Err()
}

// candidateChunk is how many candidate files one statement lists; their
// texts are then read in groups of at most textChunkBytes.
const (
	candidateChunk = 1000
	textChunkBytes = 4 << 20
)

// candidate is a file the index let through.
type candidate struct {
	id, path, blobKey string
	version           int
	size              int64
}

// pageReader reads candidates in path order and matches their lines
// until its page is full.
type pageReader struct {
	plan   *searchPlan
	page   *agentfs.SearchPage
	budget int // bytes of text the page may still hold
	done   bool
	// keys, when set, are every blob of the subject whose text the index
	// lets through (lookupKeys): candidates are then the files in scope
	// that show one of them, instead of a walk of the files in scope.
	keys []string
}

// read fills the page: candidates chunk by chunk, each chunk's texts group
// by group.
func (r *pageReader) read(ctx context.Context, tx pgx.Tx, maxKeys int) error {
	after, afterID := "", ""
	if cur := r.plan.q.After; cur != nil {
		after, afterID = cur.Path, cur.FileID
	}
	if r.plan.text != "" {
		keys, ok, err := r.lookupKeys(ctx, tx, maxKeys)
		if err != nil {
			return err
		}
		if ok {
			r.keys = keys
		}
		if ok && len(keys) == 0 {
			return nil // no text of the subject can hold a match
		}
	}
	for !r.done {
		cands, listed, last, err := r.candidates(ctx, tx, after, afterID)
		if err != nil {
			return err
		}
		after, afterID = last, ""
		for start := 0; start < len(cands) && !r.done; {
			end, size := start, int64(0)
			for end < len(cands) && (end == start || size+cands[end].size <= textChunkBytes) {
				size += cands[end].size
				end++
			}
			if err := r.match(ctx, tx, cands[start:end]); err != nil {
				return err
			}
			start = end
		}
		if listed < candidateChunk {
			return nil
		}
	}
	return nil
}

// searchKeysMax is how many blobs lookupKeys lists at most: a pattern
// whose index condition lets more through is searched by the walk of the
// files in scope.
const searchKeysMax = 1000

// lookupKeys lists the subject's blobs whose texts the index lets through,
// up to limit of them (ok false when there are more). Postgres does not
// cost the detoasting of the bodies that the condition reads, so left to
// itself it prefers reading every body (a sequential scan, or a walk of
// the files in path order) to a bitmap of the trigram index; here only
// that bitmap is allowed, for this one statement. A broad pattern stops after limit+1
// rows of the bitmap; a selective one then reads only the files that
// show the blobs found.
func (r *pageReader) lookupKeys(ctx context.Context, tx pgx.Tx, limit int) (keys []string, ok bool, err error) {
	if limit == 0 {
		limit = searchKeysMax
	}
	if limit < 0 {
		return nil, false, nil
	}
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off"); err != nil {
		return nil, false, err
	}
	args := pgx.NamedArgs{"over": limit + 1}
	for k, v := range r.plan.scope.args {
		args[k] = v
	}
	// The texts not in the trigram index yet (kind 3, a few: the mover
	// takes them in soon after their writes) are read whole, through
	// search_texts_pending.
	rows, err := tx.Query(ctx, `(SELECT t.blob_key FROM search_texts t
		WHERE t.kind = 0 AND t.subject = @subject AND `+r.plan.text+`)
		UNION ALL (SELECT t.blob_key FROM search_texts t
		WHERE t.kind = 3 AND t.subject = @subject AND `+r.plan.text+`) LIMIT @over`, args)
	if err != nil {
		return nil, false, err
	}
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, err
	}
	if _, err := tx.Exec(ctx, "RESET enable_seqscan; RESET enable_indexscan"); err != nil {
		return nil, false, err
	}
	if len(keys) > limit {
		return nil, false, nil
	}
	return keys, true, nil
}

// candidates lists the next files in scope after path after (and the file
// afterID at after itself, to resume it) that the index lets through, then
// keeps those the glob matches; listed is how many were listed, last the
// path of the last one.
func (r *pageReader) candidates(ctx context.Context, tx pgx.Tx, after, afterID string) (kept []candidate, listed int, last string, err error) {
	p := r.plan
	where := p.scope.where() + ` AND t.kind IN (0, 3) AND (f.path COLLATE "C" > @after OR f.path = @after AND f.id = @after_id)`
	switch {
	case r.keys != nil:
		where += " AND f.blob_key = ANY(@keys)"
	case p.text != "":
		where += " AND " + p.text
	}
	args := pgx.NamedArgs{"after": after, "after_id": afterID, "chunk": candidateChunk, "keys": r.keys}
	for k, v := range p.scope.args {
		args[k] = v
	}
	rows, err := tx.Query(ctx, `SELECT f.id, f.path, f.version, f.blob_key, f.size_bytes
		FROM files f JOIN search_texts t ON t.blob_key = f.blob_key
		WHERE `+where+` ORDER BY f.path COLLATE "C" LIMIT @chunk`, args)
	if err != nil {
		return nil, 0, after, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		return c, row.Scan(&c.id, &c.path, &c.version, &c.blobKey, &c.size)
	})
	if err != nil || len(out) == 0 {
		return nil, 0, after, err
	}
	for _, c := range out {
		if p.glob == nil || p.glob.Match(c.path) {
			kept = append(kept, c)
		}
	}
	return kept, len(out), out[len(out)-1].path, nil
}

// match reads the texts of cands and matches their lines, in order.
func (r *pageReader) match(ctx context.Context, tx pgx.Tx, cands []candidate) error {
	keys := make([]string, len(cands))
	for k, c := range cands {
		keys[k] = c.blobKey
	}
	rows, err := tx.Query(ctx, `SELECT blob_key, body FROM search_texts WHERE blob_key = ANY($1) AND kind IN (0, 3)`, keys)
	if err != nil {
		return err
	}
	texts := make(map[string][]byte, len(cands))
	for rows.Next() {
		var key string
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			rows.Close()
			return err
		}
		texts[key] = body
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.file(ctx, c, texts[c.blobKey]); r.done {
			return nil
		}
	}
	return ctx.Err()
}

// file matches one candidate's lines into the page. The page ends at the
// first match it has no room for: the cursor then points just before
// that match, so the next page starts with it. A file is counted as
// searched on the page that starts reading it, and as matched on the page
// of its first match (the cursor says whether a resumed file had one).
func (r *pageReader) file(ctx context.Context, c candidate, text []byte) {
	q, page := r.plan.q, r.page
	from, resumed, hit := 0, false, false
	if cur := q.After; cur != nil && cur.FileID == c.id && cur.Path == c.path {
		from, resumed, hit = cur.Line, true, cur.Hit
	}
	if !resumed {
		page.FilesSearched++
	}
	grep.Lines(ctx, text, r.plan.re, from, q.Context, func(m grep.Match) bool {
		sm := searchMatch(c, m)
		size := len(sm.Text)
		for _, l := range append(sm.Before, sm.After...) {
			size += len(l)
		}
		if len(page.Matches) == q.Limit || len(page.Matches) > 0 && size > r.budget {
			page.Next = &agentfs.SearchCursor{Path: c.path, FileID: c.id, Line: m.Line - 1, Hit: hit,
				Matched: page.FilesMatched, Searched: page.FilesSearched,
				Binary: page.SkippedBinary, TooLarge: page.SkippedTooLarge}
			r.done = true
			return false
		}
		if !hit {
			hit = true
			page.FilesMatched++
		}
		r.budget -= size
		page.Matches = append(page.Matches, sm)
		return true
	})
}

// searchMatch is m of the file c, its lines cut to MaxSearchLineBytes.
func searchMatch(c candidate, m grep.Match) agentfs.SearchMatch {
	text, cut := grep.Cut(m.Text, agentfs.MaxSearchLineBytes)
	sm := agentfs.SearchMatch{FileID: c.id, Path: c.path, Version: c.version, Line: m.Line, Column: m.Column,
		Text: string(text), Truncated: cut, Before: []string{}, After: []string{}}
	for _, l := range m.Before {
		l, _ = grep.Cut(l, agentfs.MaxSearchLineBytes)
		sm.Before = append(sm.Before, string(l))
	}
	for _, l := range m.After {
		l, _ = grep.Cut(l, agentfs.MaxSearchLineBytes)
		sm.After = append(sm.After, string(l))
	}
	return sm
}
