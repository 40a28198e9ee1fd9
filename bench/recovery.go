package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// recovery: one page of a run's recovery (GET /v1/runs/{id}/recovery,
// limit 10: its confirmed totals, the newest ten keys, its sessions and
// batches in flight) for a run of -recovery-small and then
// -recovery-large operations. Each operation is what a keyed upload of
// the run leaves: its key's record, its file and its file.created event,
// seeded with SQL like the rows of the listing and the feed. With the
// triggers off the seed numbers its events itself and then hands them to
// agentfs_run_totals, the function the numbering runs at commit, so the
// run's totals are what a commit of them would have kept.
func (b *bench) recovery(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("run recovery p50, one page (limit 10), a run of %s → %s operations", count(c.recoverySmall), count(c.recoveryLarge))
	if c.databaseURL == "" {
		return []row{{name: name, agentfs: "skipped: no -database-url", budget: "flat (≤ 1.5×)"}}, nil
	}
	conn, subject, replica, err := b.seedSession(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var totals bool
	if err := conn.QueryRow(ctx, `SELECT to_regproc('agentfs_run_totals') IS NOT NULL`).Scan(&totals); err != nil {
		return nil, fmt.Errorf("find agentfs_run_totals: %w", err)
	}
	run := "recovery-" + b.tag
	folder := "bench-recovery/" + b.tag + "/"
	base := time.Now().Add(-time.Hour)
	seeded := 0
	seed := func(upto int) error {
		err := inSteps(&seeded, upto, func(from, to int) error {
			pos0, err := eventCounter(ctx, conn, subject)
			if err != nil {
				return err
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			steps := []string{`
INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
                   agent_id, run_id, last_agent_id, last_run_id, created_at, updated_at)
SELECT 'file_rcv' || @tag || '_' || g, @subject, @folder || (g % 10) || '/' || g, 1024, 'application/octet-stream',
       'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'bench-recovery/' || @tag || '/' || g,
       'seed-agent', @run, 'seed-agent', @run, @base::timestamptz + g * interval '1 millisecond', @base::timestamptz + g * interval '1 millisecond'
FROM generate_series(@from::bigint, @to::bigint) AS g`, `
INSERT INTO events (id, subject, pos, type, file_id, path, version, size_bytes, sha256, agent_id, run_id, idempotency_key, request_id, at)
SELECT 'evt_rcv' || @tag || '_' || g, @subject, CASE WHEN @replica THEN @pos0::bigint + g - @from::bigint + 1 END, 'file.created',
       'file_rcv' || @tag || '_' || g, @folder || (g % 10) || '/' || g, 1, 1024,
       'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'seed-agent', @run, 'op-' || g, 'req_rcv' || g,
       @base::timestamptz + g * interval '1 millisecond'
FROM generate_series(@from::bigint, @to::bigint) AS g`, `
INSERT INTO idempotency_keys (subject, key, request_hash, method, route, status, fence, response_status,
                              resource_object, resource_id, created_at, completed_at, expires_at, run_id, paths, request_uri)
SELECT @subject, @tag || '-op-' || g, '\x00'::bytea, 'POST', '/v1/files', 'completed', 1, 201,
       'file', 'file_rcv' || @tag || '_' || g, @base::timestamptz + g * interval '1 millisecond',
       @base::timestamptz + g * interval '1 millisecond', now() + interval '7 days', @run,
       ARRAY[@folder || (g % 10) || '/' || g], '/v1/files?path=' || @folder || (g % 10) || '/' || g
FROM generate_series(@from::bigint, @to::bigint) AS g`}
			if replica {
				steps = append(steps, `INSERT INTO event_counters (subject, n) VALUES (@subject, @pos0::bigint + @to::bigint - @from::bigint + 1)
					ON CONFLICT (subject) DO UPDATE SET n = excluded.n`)
				if totals {
					steps = append(steps, `SELECT agentfs_run_totals(@subject, ARRAY(SELECT e FROM events e WHERE e.subject = @subject
						AND e.pos > @pos0::bigint AND e.pos <= @pos0::bigint + @to::bigint - @from::bigint + 1 ORDER BY e.pos))`)
				}
			}
			args := pgx.NamedArgs{"tag": b.tag, "subject": subject, "folder": folder, "run": run, "base": base,
				"from": from, "to": to, "pos0": pos0, "replica": replica}
			for _, sql := range steps {
				if _, err := tx.Exec(ctx, sql, args); err != nil {
					return fmt.Errorf("seed a run's operations: %w", err)
				}
			}
			return tx.Commit(ctx)
		})
		if err != nil {
			return err
		}
		for _, table := range []string{"files", "events", "idempotency_keys"} {
			if err := settleTable(ctx, conn, table); err != nil {
				return err
			}
		}
		return nil
	}
	type point struct {
		p50, p90 time.Duration
		work     string
	}
	path := "/v1/runs/" + url.PathEscape(run) + "/recovery?limit=10"
	measure := func() (point, error) {
		var p point
		var err error
		p.p50, p.p90, p.work, err = b.timedCalls(ctx, conn, "events", func() error {
			var r struct {
				Confirmed struct {
					Events    int `json:"events"`
					LiveFiles int `json:"live_files"`
				} `json:"confirmed"`
				Operations []struct {
					Status string `json:"status"`
				} `json:"operations"`
			}
			if _, err := b.api.call(ctx, http.MethodGet, path, nil, 0, nil, &r, http.StatusOK); err != nil {
				return err
			}
			if r.Confirmed.Events != seeded || r.Confirmed.LiveFiles != seeded || len(r.Operations) != min(10, seeded) {
				return fmt.Errorf("recovery of run %s: %d events, %d live files, %d operations; want %d, %d, %d",
					run, r.Confirmed.Events, r.Confirmed.LiveFiles, len(r.Operations), seeded, seeded, min(10, seeded))
			}
			return nil
		})
		if err != nil {
			return p, err
		}
		logf("  a run of %d operations: p50 %s, p90 %s", seeded, fmtMS(p.p50), fmtMS(p.p90))
		return p, nil
	}
	points, err := atPoints([]int{c.recoverySmall, c.recoveryLarge}, "operations", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	small, large := points[0], points[1]
	b.notes = append(b.notes, fmt.Sprintf("run recovery: each operation of the run is a completed key, a file and its file.created event in one of 10 folders; "+
		"p90 %s → %s; Postgres work per call on the events table: %s, then %s.", fmtMS(small.p90), fmtMS(large.p90), small.work, large.work))
	return []row{flatRow(name, small.p50, large.p50)}, nil
}
