package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pointsDiffChanges is how many files a measured diff lists (DESIGN §11:
// "a diff with 10 changes").
const pointsDiffChanges = 10

// pointsDiffBudget is the bound on that diff's p50 at the large point.
const pointsDiffBudget = 50 * time.Millisecond

// checkpoint is the part of a Checkpoint the measurements look at.
type checkpoint struct {
	ID     string `json:"id"`
	Cursor string `json:"cursor"`
}

// points: the points-in-time rows of DESIGN §11 at -points-small and then
// -points-large files: POST /v1/checkpoints; a page of GET /v1/files?as_of=
// (limit 100) at a checkpoint taken there; GET /v1/diff from a checkpoint
// after 10 replaces made through the API. The files are seeded with SQL,
// by the statement shape of an upload's (files, file_versions, events,
// search_texts in one statement per chunk; the events numbered, and
// file_states written, by the database's own deferred trigger at commit),
// empty files whose blobs are not in S3: no measured call reads a blob.
func (b *bench) points(ctx context.Context) ([]row, error) {
	c := b.cfg
	span := fmt.Sprintf("%s → %s files", count(c.pointsSmall), count(c.pointsLarge))
	names := []string{"checkpoint create p50, " + span, "as-of listing page p50 (limit 100), " + span,
		fmt.Sprintf("diff of %d changes p50, %s", pointsDiffChanges, span)}
	if c.databaseURL == "" {
		var rows []row
		for _, n := range names {
			rows = append(rows, row{name: n, agentfs: "skipped: no -database-url", budget: "flat (≤ 1.5×)"})
		}
		return rows, nil
	}
	conn, subject, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	prefix := "bench-points/" + b.tag + "/"
	seeded := 0
	seed := func(upto int) error {
		if err := b.seedPointFiles(ctx, conn, subject, prefix, &seeded, upto); err != nil {
			return err
		}
		for _, table := range []string{"files", "file_versions", "events", "file_states"} {
			if err := settleTable(ctx, conn, table); err != nil {
				return err
			}
		}
		return nil
	}
	var first checkpoint // the checkpoint of the first point, read again at the second
	measure := func() (pointsAt, error) { return b.measurePoints(ctx, conn, prefix, seeded, &first) }
	points, err := atPoints([]int{c.pointsSmall, c.pointsLarge}, "files (SQL in the shape of an upload's statement, file_states by the trigger)", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	return b.pointRows(names, points[0], points[1]), nil
}

// measurePoints measures the points rows at seeded files; first is the
// checkpoint of the first point (set there), whose page is read again at
// the second.
func (b *bench) measurePoints(ctx context.Context, conn *pgx.Conn, prefix string, seeded int, first *checkpoint) (pointsAt, error) {
	var p pointsAt
	var err error
	if p.create, err = b.timeCheckpoints(ctx, conn, prefix); err != nil {
		return p, err
	}
	here, err := b.createCheckpoint(ctx, prefix)
	if err != nil {
		return p, err
	}
	if first.ID == "" {
		*first = here
	}
	if p.page, p.work, err = b.timeAsOfPage(ctx, conn, prefix, here.ID); err != nil {
		return p, err
	}
	if here.ID != first.ID {
		if p.oldPage, _, err = b.timeAsOfPage(ctx, conn, prefix, first.ID); err != nil {
			return p, err
		}
	}
	if p.diff, err = b.timeDiff(ctx, conn, prefix, seeded); err != nil {
		return p, err
	}
	logf("  %d files: checkpoint create p50 %s, as-of page p50 %s, diff of %d p50 %s", seeded, fmtMS(p.create), fmtMS(p.page), pointsDiffChanges, fmtMS(p.diff))
	return p, nil
}

// pointsAt is what points measured at one number of files.
type pointsAt struct {
	create, page, diff time.Duration
	oldPage            time.Duration // a page at the first point's checkpoint (second point only)
	work               string        // Postgres work per as-of page on file_states
}

// pointRows are the rows and notes of points measured at s and then l.
func (b *bench) pointRows(names []string, s, l pointsAt) []row {
	c := b.cfg
	b.notes = append(b.notes, fmt.Sprintf("points: the files were seeded with SQL, rows as an upload writes them (files, file_versions, events, search_texts; "+
		"positions and file_states by the deferred events trigger at commit), empty files with no blob in S3, which no measured call reads; "+
		"an as-of page at the %s-file checkpoint, read at %s files: p50 %s (%.2f× the page at its own point).",
		count(c.pointsSmall), count(c.pointsLarge), fmtMS(l.oldPage), float64(l.oldPage)/float64(s.page)))
	b.notes = append(b.notes, fmt.Sprintf("points, Postgres work per as-of page on file_states: %s, then %s.", s.work, l.work))
	diff := flatRow(names[2], s.diff, l.diff)
	diff.budget = fmt.Sprintf("flat (≤ 1.5×); ≤ %s at the large point", fmtMS(pointsDiffBudget))
	if l.diff > pointsDiffBudget {
		diff.verdict = "misses"
	}
	return []row{flatRow(names[0], s.create, l.create), flatRow(names[1], s.page, l.page), diff}
}

// seedPointFiles seeds empty files under prefix up to upto, 10,000 to a
// statement (and a transaction, so that the deferred trigger runs at each
// commit), in the shape of storage's writeFiles statement.
func (b *bench) seedPointFiles(ctx context.Context, conn *pgx.Conn, subject, prefix string, seeded *int, upto int) error {
	const step = 10_000
	for *seeded < upto {
		from, to := *seeded+1, min(*seeded+step, upto)
		_, err := conn.Exec(ctx, `
WITH i AS (SELECT g, 'file_pts' || @tag || '_' || g AS id,
                  @prefix || 'd' || lpad((g % 1000)::text, 3, '0') || '/f' || lpad(g::text, 7, '0') || '.txt' AS path,
                  'bench-points/' || @tag || '/' || g AS blob_key
           FROM generate_series(@from::bigint, @to::bigint) AS g),
f AS (INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
                         agent_id, run_id, last_agent_id, last_run_id)
      SELECT id, @subject, path, 0, 'text/plain', @empty, blob_key, 'seed-agent', 'seed-points', 'seed-agent', 'seed-points'
      FROM i ORDER BY g RETURNING *),
v AS (INSERT INTO file_versions (file_id, version, subject, size_bytes, content_type, sha256, blob_key, agent_id, run_id, created_at)
      SELECT id, version, subject, size_bytes, content_type, sha256, blob_key, last_agent_id, last_run_id, updated_at FROM f),
e AS (INSERT INTO events (subject, type, file_id, path, previous_path, version, size_bytes, sha256,
                          agent_id, run_id, idempotency_key, request_id, batch_id)
      SELECT f.subject, 'file.created', f.id, f.path, NULL, f.version, f.size_bytes, f.sha256,
             f.last_agent_id, f.last_run_id, NULL, 'req_seedpts' || i.g, NULL
      FROM f JOIN i ON i.id = f.id ORDER BY i.g),
t AS (INSERT INTO search_texts (blob_key, subject, kind, body) SELECT blob_key, subject, 0, '' FROM f)
SELECT 1`, pgx.NamedArgs{"tag": b.tag, "prefix": prefix, "subject": subject, "from": from, "to": to,
			"empty": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"})
		if err != nil {
			return fmt.Errorf("seed point files: %w", err)
		}
		*seeded = to
	}
	return nil
}

// createCheckpoint is POST /v1/checkpoints of prefix.
func (b *bench) createCheckpoint(ctx context.Context, prefix string) (checkpoint, error) {
	var cp checkpoint
	body := fmt.Sprintf(`{"prefix":%q}`, prefix)
	_, err := b.api.call(ctx, http.MethodPost, "/v1/checkpoints", strings.NewReader(body), int64(len(body)), jsonHeader(""), &cp, http.StatusCreated)
	if err == nil && (cp.ID == "" || cp.Cursor == "") {
		err = fmt.Errorf("POST /v1/checkpoints: answer lacks id or cursor: %+v", cp)
	}
	return cp, err
}

// timeCheckpoints times checkpoint creation (each call a new checkpoint).
func (b *bench) timeCheckpoints(ctx context.Context, conn *pgx.Conn, prefix string) (time.Duration, error) {
	p50, _, _, err := b.timedCalls(ctx, conn, "checkpoints", func() error {
		_, err := b.createCheckpoint(ctx, prefix)
		return err
	})
	return p50, err
}

// timeAsOfPage times the first page of the files under prefix as of the
// checkpoint id: 100 files, and more.
func (b *bench) timeAsOfPage(ctx context.Context, conn *pgx.Conn, prefix, id string) (time.Duration, string, error) {
	query := "/v1/files?limit=100&as_of=" + url.QueryEscape(id) + "&prefix=" + url.QueryEscape(prefix)
	p50, _, work, err := b.timedCalls(ctx, conn, "file_states", func() error {
		var page struct {
			Data    []file `json:"data"`
			HasMore bool   `json:"has_more"`
		}
		if _, err := b.api.call(ctx, http.MethodGet, query, nil, 0, nil, &page, http.StatusOK); err != nil {
			return err
		}
		if len(page.Data) != 100 || !page.HasMore {
			return fmt.Errorf("GET %s: %d files, has_more %v; want 100 and more", query, len(page.Data), page.HasMore)
		}
		return nil
	})
	return p50, work, err
}

// timeDiff takes a checkpoint, replaces pointsDiffChanges of the seeded
// files through the API, then times the diff from the checkpoint to now.
func (b *bench) timeDiff(ctx context.Context, conn *pgx.Conn, prefix string, seeded int) (time.Duration, error) {
	from, err := b.createCheckpoint(ctx, prefix)
	if err != nil {
		return 0, err
	}
	hdr := http.Header{"Content-Type": {"text/plain"}}
	for k := range pointsDiffChanges {
		g := 1 + k*(seeded/pointsDiffChanges)
		p := fmt.Sprintf("%sd%03d/f%07d.txt", prefix, g%1000, g)
		body := fmt.Sprintf("changed after %s\n", from.ID)
		_, err := b.api.call(ctx, http.MethodPost, "/v1/files?if_exists=replace&path="+url.QueryEscape(p),
			strings.NewReader(body), int64(len(body)), hdr, nil, http.StatusOK)
		if err != nil {
			return 0, err
		}
	}
	query := "/v1/diff?from=" + url.QueryEscape(from.ID) + "&prefix=" + url.QueryEscape(prefix)
	p50, _, _, err := b.timedCalls(ctx, conn, "file_states", func() error {
		var page struct {
			Data []struct {
				Change string `json:"change"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		if _, err := b.api.call(ctx, http.MethodGet, query, nil, 0, nil, &page, http.StatusOK); err != nil {
			return err
		}
		if len(page.Data) != pointsDiffChanges || page.HasMore {
			return fmt.Errorf("GET %s: %d changes, has_more %v; want %d", query, len(page.Data), page.HasMore, pointsDiffChanges)
		}
		for _, ch := range page.Data {
			if ch.Change != "modified" {
				return fmt.Errorf("GET %s: a change %q, want modified", query, ch.Change)
			}
		}
		return nil
	})
	return p50, err
}
