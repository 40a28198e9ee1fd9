package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// runTotals is what the subject's run did, read from the totals kept as
// its events commit (migration 027: run_totals, run_files), in the reach
// of ctx: a few rows per folder the run touched, however many operations
// it made. It answers what aggregating the run's events and counting its
// files would, and the feed position of the run's newest event seen
// (lastPos). A run of which no event is seen is agentfs.ErrNotFound.
func (s *Store) runTotals(ctx context.Context, q querier, subject, runID string) (r *agentfs.RunSummary, lastPos int64, err error) {
	r = &agentfs.RunSummary{RunID: runID, Counts: map[string]int{}}
	args := pgx.NamedArgs{"subject": subject, "run_id": runID}
	seen := visiblePath(ctx, "folder", args)
	rows, err := q.Query(ctx, `SELECT type, sum(n)::bigint, sum(bytes_written)::bigint, min(first_at), max(last_at), max(last_pos),
			(SELECT coalesce(array_agg(DISTINCT a ORDER BY a), '{}') FROM run_totals t2, unnest(t2.agent_ids) AS u(a)
				WHERE t2.subject = @subject AND t2.run_id = @run_id AND `+visiblePath(ctx, "t2.folder", args)+`)
		FROM run_totals WHERE subject = @subject AND run_id = @run_id AND `+seen+` GROUP BY type`, args)
	if err != nil {
		return nil, 0, Translate(fmt.Errorf("run summary: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			typ         string
			n, bytes    int64
			first, last time.Time
			pos         int64
		)
		if err := rows.Scan(&typ, &n, &bytes, &first, &last, &pos, &r.AgentIDs); err != nil {
			return nil, 0, Translate(fmt.Errorf("run summary: %w", err))
		}
		r.Counts[typ] = int(n)
		r.BytesWritten += bytes
		if r.FirstAt.IsZero() || first.Before(r.FirstAt) {
			r.FirstAt = first
		}
		if last.After(r.LastAt) {
			r.LastAt = last
		}
		lastPos = max(lastPos, pos)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, Translate(fmt.Errorf("run summary: %w", err))
	}
	if len(r.Counts) == 0 {
		return nil, 0, fmt.Errorf("run summary: %w", agentfs.ErrNotFound)
	}
	r.FirstAt, r.LastAt = r.FirstAt.UTC(), r.LastAt.UTC()
	// The run's files not deleted, less those past their expiry that the
	// sweeper has not yet recorded as expired (files_expiry holds only
	// files with an expiry and not deleted).
	err = q.QueryRow(ctx, `SELECT coalesce((SELECT sum(n) FROM run_files
				WHERE subject = @subject AND run_id = @run_id AND `+seen+`), 0)
			- (SELECT count(*) FROM files WHERE expires_at IS NOT NULL AND deleted_at IS NULL AND expires_at <= now()
				AND subject = @subject AND (run_id = @run_id OR last_run_id = @run_id) AND `+visiblePath(ctx, "path", args)+`)`,
		args).Scan(&r.LiveFiles)
	if err != nil {
		return nil, 0, Translate(fmt.Errorf("run summary: live files: %w", err))
	}
	return r, lastPos, nil
}
