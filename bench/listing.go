package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// list: listing one run's newest 100 files with 10 k and then 1 M rows in
// the files table, seeded with SQL. One row in 100 belongs to the listed
// run (so it holds 1% of the seeded rows at each point), and seeded rows
// are newer the later they are inserted, as real uploads would be.
func (b *bench) list(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("run listing p50, limit 100, %s → %s rows", count(c.listSmall), count(c.listLarge))
	if c.databaseURL == "" {
		return []row{{name: name, agentfs: "skipped: no -database-url", budget: "flat"}}, nil
	}
	conn, subject, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	base := time.Now().Add(-24 * time.Hour)
	seeded := 0
	seed := func(upto int) error {
		return seedTable(ctx, conn, "files", &seeded, upto, func(from, to int) error {
			_, err := conn.Exec(ctx, `
INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
                   agent_id, run_id, last_agent_id, last_run_id, created_at, updated_at)
SELECT 'file_seed' || $1 || '_' || g, $2, 'bench-seed/' || $1 || '/' || g, 0, 'application/octet-stream',
       'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'bench-seed/' || $1 || '/' || g,
       'seed-agent', 'seed-' || $1 || '-' || lpad((g % 100)::text, 2, '0'),
       'seed-agent', 'seed-' || $1 || '-' || lpad((g % 100)::text, 2, '0'),
       $3::timestamptz + g * interval '1 millisecond', $3::timestamptz + g * interval '1 millisecond'
FROM generate_series($4::bigint, $5::bigint) AS g`, b.tag, subject, base, from, to)
			return err
		})
	}
	run := "seed-" + b.tag + "-07"
	query := "run_id=" + url.QueryEscape(run) + "&limit=100"
	type point struct {
		p50, p90 time.Duration
		work     string // Postgres work per call
		total    int64  // rows in the table
	}
	measure := func() (point, error) {
		var p point
		var err error
		p.p50, p.p90, p.work, err = b.timedCalls(ctx, conn, "files", func() error {
			got, err := b.api.list(ctx, query)
			if err == nil && got != 100 {
				err = fmt.Errorf("listing run %s returned %d files, want 100", run, got)
			}
			return err
		})
		if err != nil {
			return p, err
		}
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM files`).Scan(&p.total)
		logf("  %d seeded rows (%d in the table): p50 %s, p90 %s", seeded, p.total, fmtMS(p.p50), fmtMS(p.p90))
		return p, nil
	}

	points, err := atPoints([]int{c.listSmall, c.listLarge}, "rows", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	small, large := points[0], points[1]
	b.notes = append(b.notes, fmt.Sprintf("listing: the listed run holds 1%% of the seeded rows (%d, then %d); the files table held %d, then %d rows in all; p90 %s, then %s.",
		c.listSmall/100, c.listLarge/100, small.total, large.total, fmtMS(small.p90), fmtMS(large.p90)))
	b.notes = append(b.notes, fmt.Sprintf("listing, Postgres work per call on the files table (from its statistics counters): %s, then %s.", small.work, large.work))
	return []row{flatRow(name, small.p50, large.p50)}, nil
}

// settleTable vacuums and checkpoints after seeding. A table in use is
// vacuumed by autovacuum; doing it now means the timed calls neither race
// a vacuum of the fresh rows nor pay for setting their hint bits. The
// checkpoint writes out the pages the load dirtied, so that the
// checkpointer does not do it during the timed calls; it needs a superuser
// (the throwaway cluster's role is one), and without one it is skipped.
func settleTable(ctx context.Context, conn *pgx.Conn, table string) error {
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) `+pgx.Identifier{table}.Sanitize()); err != nil {
		return fmt.Errorf("vacuum %s: %w", table, err)
	}
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		logf("  CHECKPOINT skipped: %v", err)
	}
	return nil
}

// seedTable inserts table's rows up to upto in steps (inSteps), then
// settles the table for the measurements; an insert's error names it.
func seedTable(ctx context.Context, conn *pgx.Conn, table string, seeded *int, upto int, insert func(from, to int) error) error {
	if err := inSteps(seeded, upto, insert); err != nil {
		return fmt.Errorf("seed %s: %w", table, err)
	}
	return settleTable(ctx, conn, table)
}

// flatRow is a row whose budget is the budget's "flat": the p50 at the large
// point at most 1.5× the p50 at the small one.
func flatRow(name string, small, large time.Duration) row {
	r := float64(large) / float64(small)
	verdict := "meets"
	if r > 1.5 {
		verdict = "misses"
	}
	return row{
		name:    name,
		agentfs: fmt.Sprintf("%s → %s", fmtMS(small), fmtMS(large)),
		ratio:   fmt.Sprintf("%.2f×", r),
		budget:  "flat (≤ 1.5×)",
		verdict: verdict,
	}
}

// timedCalls calls call a few times to warm up, then -list-calls times on
// the clock, and returns the p50 and p90 and the Postgres work per call on
// table. The timing moves with whatever else the cores are doing; the rows
// and pages each call touched do not, so they are shown too.
func (b *bench) timedCalls(ctx context.Context, conn *pgx.Conn, table string, call func() error) (p50, p90 time.Duration, work string, err error) {
	const warmup = 5
	w0, err := quietWork(ctx, conn, table)
	if err != nil {
		return 0, 0, "", err
	}
	for range warmup {
		if err := call(); err != nil {
			return 0, 0, "", err
		}
	}
	lat := make([]time.Duration, b.cfg.listCalls)
	for i := range lat {
		t0 := time.Now()
		if err := call(); err != nil {
			return 0, 0, "", err
		}
		lat[i] = time.Since(t0)
	}
	calls := int64(warmup + b.cfg.listCalls)
	w1, err := workAfter(ctx, conn, table, w0, calls)
	if err != nil {
		return 0, 0, "", err
	}
	return percentile(lat, 50), percentile(lat, 90), w1.since(w0, calls), nil
}

// inSteps inserts rows *seeded+1 to upto, 100,000 at a time so that no
// statement runs long, and keeps *seeded at the last row inserted.
func inSteps(seeded *int, upto int, insert func(from, to int) error) error {
	const step = 100_000
	for *seeded < upto {
		to := min(*seeded+step, upto)
		if err := insert(*seeded+1, to); err != nil {
			return err
		}
		*seeded = to
	}
	return nil
}

// atPoints seeds rows up to each count in turn (seeded is how many are so
// far) and measures there: one measurement at a small and a large table.
func atPoints[P any](counts []int, rows string, seeded *int, seed func(upto int) error, measure func() (P, error)) ([]P, error) {
	var points []P
	for _, upto := range counts {
		t0 := time.Now()
		if err := seed(upto); err != nil {
			return nil, err
		}
		logf("  seeded %d %s in %s", *seeded, rows, time.Since(t0).Round(time.Millisecond))
		p, err := measure()
		if err != nil {
			return nil, err
		}
		points = append(points, p)
	}
	return points, nil
}

// connect opens a connection to the server's database for seeding rows,
// and finds the token's subject there.
func (b *bench) connect(ctx context.Context) (*pgx.Conn, string, error) {
	conn, err := pgx.Connect(ctx, b.cfg.databaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("connect to Postgres: %w", err)
	}
	subject, err := b.subjectOf(ctx, conn)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, "", err
	}
	return conn, subject, nil
}

// subjectOf finds the token's subject in the database, through a file the
// token can see.
func (b *bench) subjectOf(ctx context.Context, conn *pgx.Conn) (string, error) {
	var subject string
	if err := conn.QueryRow(ctx, `SELECT subject FROM files WHERE id = $1`, b.firstFileID(ctx)).Scan(&subject); err != nil {
		return "", fmt.Errorf("find the token's subject: %w", err)
	}
	return subject, nil
}

// firstFileID returns the id of a file this token can see, to learn the
// token's subject from the database.
func (b *bench) firstFileID(ctx context.Context) string {
	var page struct {
		Data []file `json:"data"`
	}
	if _, err := b.api.call(ctx, http.MethodGet, "/v1/files?limit=1&include_deleted=true", nil, 0, nil, &page, http.StatusOK); err == nil && len(page.Data) > 0 {
		return page.Data[0].ID
	}
	f, _, err := b.api.putFile(ctx, b.path("subject-probe"), b.data.reader(0, 16), 16, nil)
	if err != nil {
		return ""
	}
	return f.ID
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// tableWork is the cumulative index scans, rows fetched through indexes
// and pages touched (shared buffer hits and reads) on one table.
type tableWork struct{ scans, rows, pages int64 }

func tableWorkOf(ctx context.Context, conn *pgx.Conn, table string) (tableWork, error) {
	var w tableWork
	err := conn.QueryRow(ctx, `
SELECT coalesce(t.idx_scan, 0), coalesce(t.idx_tup_fetch, 0),
       coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0) +
       coalesce(io.idx_blks_hit, 0) + coalesce(io.idx_blks_read, 0)
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
WHERE t.relname = $1`, table).Scan(&w.scans, &w.rows, &w.pages)
	if err != nil {
		return w, fmt.Errorf("read statistics of %s: %w", table, err)
	}
	return w, nil
}

// quietWork returns the counters once every backend has flushed what
// it did before: this connection's seeding at once, the server's backends
// within Postgres's ten-second idle flush interval.
func quietWork(ctx context.Context, conn *pgx.Conn, table string) (tableWork, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return tableWork{}, fmt.Errorf("flush statistics: %w", err)
	}
	select {
	case <-ctx.Done():
		return tableWork{}, context.Cause(ctx)
	case <-time.After(11 * time.Second):
	}
	return tableWorkOf(ctx, conn, table)
}

// workAfter waits until the statistics show at least calls index
// scans since from (server backends flush their counters lazily, within
// about ten seconds) and returns them.
func workAfter(ctx context.Context, conn *pgx.Conn, table string, from tableWork, calls int64) (tableWork, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		w, err := tableWorkOf(ctx, conn, table)
		if err != nil || w.scans-from.scans >= calls || time.Now().After(deadline) {
			return w, err
		}
		select {
		case <-ctx.Done():
			return w, context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (w tableWork) since(from tableWork, calls int64) string {
	if w.scans-from.scans < calls {
		return "not reported in time"
	}
	per := func(v int64) float64 { return float64(v) / float64(calls) }
	return fmt.Sprintf("%.1f rows fetched, %.1f pages", per(w.rows-from.rows), per(w.pages-from.pages))
}

// alternate runs one round of a side-by-side measurement: AgentFS first in
// even rounds, direct first in odd ones, so neither side always meets a
// warm (or a busy) machine.

// versions: the first page of one file's versions, and a page from a
// cursor halfway, with 100 and then 10 k versions seeded with SQL (sharing
// the file's one blob, as reverts do).
func (b *bench) versions(ctx context.Context) ([]row, error) {
	const small, large = 200, 10_000 // a page from halfway needs 100 below it
	name := fmt.Sprintf("one file's versions p50, limit 100, %s → %s versions", count(small), count(large))
	cursorName := name + ", from a cursor halfway"
	if b.cfg.databaseURL == "" {
		return []row{{name: name, agentfs: "skipped: no -database-url", budget: "flat (≤ 1.5×)"}}, nil
	}
	conn, err := pgx.Connect(ctx, b.cfg.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f, _, err := b.api.putFile(ctx, b.path("versions"), b.data.reader(0, 1024), 1024, nil)
	if err != nil {
		return nil, err
	}
	seeded := 1
	seed := func(upto int) error {
		_, err := conn.Exec(ctx, `
INSERT INTO file_versions (file_id, version, subject, size_bytes, content_type, sha256, blob_key, agent_id, run_id, created_at)
SELECT v.file_id, g, v.subject, v.size_bytes, v.content_type, v.sha256, v.blob_key, 'seed-agent', 'seed-versions',
       v.created_at + g * interval '1 millisecond'
FROM file_versions v, generate_series($2::int, $3::int) AS g
WHERE v.file_id = $1 AND v.version = 1`, f.ID, seeded+1, upto)
		if err == nil {
			_, err = conn.Exec(ctx, `UPDATE file_versions SET superseded_at = now() WHERE file_id = $1 AND version < $2 AND superseded_at IS NULL`, f.ID, upto)
		}
		if err == nil {
			_, err = conn.Exec(ctx, `UPDATE files SET version = $2 WHERE id = $1`, f.ID, upto)
		}
		if err != nil {
			return fmt.Errorf("seed versions: %w", err)
		}
		seeded = upto
		return settleTable(ctx, conn, "file_versions")
	}
	page := func(query string) func() error {
		return func() error {
			var l struct {
				Data []json.RawMessage `json:"data"`
			}
			if _, err := b.api.call(ctx, http.MethodGet, "/v1/files/"+f.ID+"/versions?"+query, nil, 0, nil, &l, http.StatusOK); err != nil {
				return err
			}
			if len(l.Data) != 100 {
				return fmt.Errorf("a page of versions held %d, want 100", len(l.Data))
			}
			return nil
		}
	}
	type point struct{ first50, first90, half50, half90 time.Duration }
	var work, halfWork []string
	measure := func() (p point, err error) {
		var w string
		if p.first50, p.first90, w, err = b.timedCalls(ctx, conn, "file_versions", page("limit=100")); err != nil {
			return p, err
		}
		work = append(work, w)
		// The cursor of this listing is the version number the page starts below.
		if p.half50, p.half90, w, err = b.timedCalls(ctx, conn, "file_versions", page(fmt.Sprintf("limit=100&cursor=%d", seeded/2+1))); err != nil {
			return p, err
		}
		halfWork = append(halfWork, w)
		logf("  %d versions: first page p50 %s (p90 %s), halfway p50 %s (p90 %s)", seeded, fmtMS(p.first50), fmtMS(p.first90), fmtMS(p.half50), fmtMS(p.half90))
		return p, nil
	}
	points, err := atPoints([]int{small, large}, "versions", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	a, z := points[0], points[1]
	b.notes = append(b.notes, fmt.Sprintf("versions: one file, %d then %d versions; first page p90 %s → %s, from halfway %s → %s; Postgres work per call on file_versions: %s, then %s; from halfway %s, then %s.",
		small, large, fmtMS(a.first90), fmtMS(z.first90), fmtMS(a.half90), fmtMS(z.half90), work[0], work[1], halfWork[0], halfWork[1]))
	if err := b.api.deleteFile(ctx, f.ID); err != nil {
		return nil, err
	}
	return []row{flatRow(name, a.first50, z.first50), flatRow(cursorName, a.half50, z.half50)}, nil
}
