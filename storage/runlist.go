package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// ListRuns returns up to limit of the subject's runs, newest activity
// first (the run whose latest event is newest), each summarised as
// RunSummary does; before, when positive, keeps the runs whose latest
// event lies before that feed position (the page goes on from the
// previous page's last run). Only the events in the reach of ctx count: a
// scoped token sees the runs that touched its folders, and what they did
// there. A run that acts again while a caller pages moves to the front,
// so a later page does not show it twice.
func (s *Store) ListRuns(ctx context.Context, subject string, before int64, limit int) ([]*agentfs.RunSummary, error) {
	args := pgx.NamedArgs{"subject": subject, "before": before, "limit": limit}
	seen := visiblePath(ctx, "path", args)
	rows, err := s.pool.Query(ctx, `WITH r AS (
			SELECT run_id, max(pos) AS last_pos, min(at) AS first_at, max(at) AS last_at,
				coalesce(array_agg(DISTINCT agent_id) FILTER (WHERE agent_id IS NOT NULL), '{}') AS agents,
				coalesce(sum(size_bytes) FILTER (WHERE type IN ('file.created', 'file.replaced')), 0) AS bytes,
				count(*) FILTER (WHERE type = 'file.created') AS created,
				count(*) FILTER (WHERE type = 'file.replaced') AS replaced,
				count(*) FILTER (WHERE type = 'file.deleted') AS deleted,
				count(*) FILTER (WHERE type = 'file.restored') AS restored,
				count(*) FILTER (WHERE type = 'file.moved') AS moved,
				count(*) FILTER (WHERE type = 'file.reverted') AS reverted
			FROM events WHERE subject = @subject AND run_id IS NOT NULL AND `+seen+`
			GROUP BY run_id HAVING @before::bigint <= 0 OR max(pos) < @before::bigint
			ORDER BY last_pos DESC LIMIT @limit)
		SELECT r.*, (SELECT count(*) FROM files WHERE files.subject = @subject
			AND (files.run_id = r.run_id OR files.last_run_id = r.run_id) AND `+liveFile+` AND `+seen+`)
		FROM r ORDER BY last_pos DESC`, args)
	return collect(rows, err, "list runs", scanRunRow)
}

func scanRunRow(row pgx.CollectableRow) (*agentfs.RunSummary, error) {
	r := &agentfs.RunSummary{}
	var first, last time.Time
	var created, replaced, deleted, restored, moved, reverted int
	err := row.Scan(&r.RunID, &r.LastPosition, &first, &last, &r.AgentIDs, &r.BytesWritten,
		&created, &replaced, &deleted, &restored, &moved, &reverted, &r.LiveFiles)
	if err != nil {
		return nil, err
	}
	r.FirstAt, r.LastAt = first.UTC(), last.UTC()
	r.Counts = map[string]int{agentfs.EventCreated: created, agentfs.EventReplaced: replaced, agentfs.EventDeleted: deleted,
		agentfs.EventRestored: restored, agentfs.EventMoved: moved, agentfs.EventReverted: reverted}
	return r, nil
}

// PlanRunUndo is what undoing the subject's run would do now, changing
// nothing: RunUndoPlan read outside any write (POST
// /v1/runs/{run_id}/revert with dry_run).
func (s *Store) PlanRunUndo(ctx context.Context, subject, runID string, force bool) ([]agentfs.BatchItem, error) {
	return s.RunUndoPlan(ctx, s.pool, subject, runID, force)
}

// Draining is closed once Drain is called: a stream that outlives single
// waits (GET /v1/events/stream) ends on it.
func (s *Store) Draining() <-chan struct{} { return s.draining }
