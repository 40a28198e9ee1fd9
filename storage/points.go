package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// ResolvePoint finds the position a point names in the subject's history
// (DESIGN §18): now is the current end of the feed; a cursor its position;
// a checkpoint (by id or name; another subject's is not found) its
// position, however old; a time the last event committed at or before it.
// A cursor or time older than the event retention is
// agentfs.ErrCursorExpired, a point after the present a *agentfs.PointError.
func (s *Store) ResolvePoint(ctx context.Context, subject string, spec agentfs.PointSpec) (agentfs.Point, error) {
	now := time.Now().UTC()
	switch spec.Kind {
	case agentfs.PointCheckpointID, agentfs.PointCheckpointName:
		return s.checkpointPoint(ctx, subject, spec)
	case agentfs.PointTime:
		return s.timePoint(ctx, subject, spec, now)
	}
	end, err := s.feedEnd(ctx, subject)
	if err != nil {
		return agentfs.Point{}, err
	}
	if spec.Kind == agentfs.PointNow {
		return agentfs.Point{Position: end, At: now}, nil
	}
	c := spec.Cursor
	switch {
	case c.At.Before(now.Add(-s.cfg.EventRetention)):
		return agentfs.Point{}, agentfs.ErrCursorExpired
	case c.Position > end || c.At.After(now.Add(time.Minute)):
		return agentfs.Point{}, &agentfs.PointError{Field: spec.Field, Reason: agentfs.ErrPointInFuture.Error()}
	}
	return agentfs.Point{Position: c.Position, At: c.At}, nil
}

// feedEnd is the position of the subject's last committed event.
func (s *Store) feedEnd(ctx context.Context, subject string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT n FROM event_counters WHERE subject = $1), 0)`, subject).Scan(&n)
	if err != nil {
		return 0, Translate(fmt.Errorf("resolve point: %w", err))
	}
	return n, nil
}

func (s *Store) timePoint(ctx context.Context, subject string, spec agentfs.PointSpec, now time.Time) (agentfs.Point, error) {
	switch {
	case spec.Time.After(now):
		return agentfs.Point{}, &agentfs.PointError{Field: spec.Field, Reason: agentfs.ErrPointInFuture.Error()}
	case spec.Time.Before(now.Add(-s.cfg.EventRetention)):
		return agentfs.Point{}, agentfs.ErrCursorExpired
	}
	// Positions follow commit times, so the last event committed at or
	// before t is the one with the latest committed_at up to t; when the
	// retention removed it, the one before the first kept event after t.
	var pos int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(
			(SELECT pos FROM events WHERE subject = @subject AND committed_at <= @t ORDER BY committed_at DESC LIMIT 1),
			(SELECT pos - 1 FROM events WHERE subject = @subject AND committed_at > @t ORDER BY committed_at LIMIT 1),
			(SELECT n FROM event_counters WHERE subject = @subject), 0)`,
		pgx.NamedArgs{"subject": subject, "t": spec.Time}).Scan(&pos)
	if err != nil {
		return agentfs.Point{}, Translate(fmt.Errorf("resolve point: %w", err))
	}
	return agentfs.Point{Position: pos, At: spec.Time}, nil
}

func (s *Store) checkpointPoint(ctx context.Context, subject string, spec agentfs.PointSpec) (agentfs.Point, error) {
	col := "id"
	if spec.Kind == agentfs.PointCheckpointName {
		col = "name"
	}
	var p agentfs.Point
	err := s.pool.QueryRow(ctx, `SELECT id, pos, created_at FROM checkpoints
		WHERE subject = $1 AND `+col+` = $2`, subject, spec.Raw).Scan(&p.CheckpointID, &p.Position, &p.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return agentfs.Point{}, fmt.Errorf("resolve point %s: %w", spec.Field, agentfs.ErrNotFound)
	}
	if err != nil {
		return agentfs.Point{}, Translate(fmt.Errorf("resolve point: %w", err))
	}
	return p, nil
}

// stateColumns are a file as it was over one interval of file_states (s),
// with what does not change over its life from files (f) and its version's
// attribution (v), in scanFile's order.
const stateColumns = `s.file_id, s.subject, s.path, s.size_bytes, s.content_type, s.sha256, s.version, s.blob_key,
	coalesce(f.agent_id, ''), coalesce(f.run_id, ''), coalesce(v.agent_id, ''), coalesce(v.run_id, ''),
	f.created_at, coalesce(v.created_at, f.updated_at), NULL::timestamptz, NULL::timestamptz, s.expires_at, false,
	f.blocked, f.block_reason, f.mode, coalesce(f.mtime, v.created_at, f.updated_at), f.kind, coalesce(f.forked_from_id, ''), coalesce(f.forked_from_version, 0)`

const stateFrom = `file_states s JOIN files f ON f.id = s.file_id
	LEFT JOIN file_versions v ON v.file_id = s.file_id AND v.version = s.version`

// liveAt is the condition of a file_states row live at @pos and @at: its
// interval holds the position and it had not expired by the point's time.
const liveAt = `s.from_pos <= @pos AND (s.to_pos IS NULL OR s.to_pos > @pos)
	AND (s.expires_at IS NULL OR s.expires_at > @at)`

// FilesAsOf lists the subject's files live at a point, in path order, each
// with the path and version it had then: one scan of file_states_by_path,
// whose cost follows the page and the history of the paths it crosses,
// not the number of files.
func (s *Store) FilesAsOf(ctx context.Context, subject string, filter agentfs.AsOfFilter) ([]*agentfs.File, error) {
	w := newFilter("s.subject = @subject AND "+liveAt, pgx.NamedArgs{"subject": subject,
		"pos": filter.Point.Position, "at": filter.Point.At, "limit": filter.Limit})
	w.when(filter.Prefix != "", `s.path LIKE @prefix ESCAPE '\'`, pgx.NamedArgs{"prefix": likePrefix(filter.Prefix)})
	w.when(filter.After != "", "s.path > @after", pgx.NamedArgs{"after": filter.After})
	w.cond(visiblePath(ctx, "s.path", w.args))
	out, err := s.scanFiles(s.pool.Query(ctx, `SELECT `+stateColumns+` FROM `+stateFrom+` WHERE `+w.where()+
		` ORDER BY s.path LIMIT @limit`, w.args))
	if err != nil {
		return nil, fmt.Errorf("list files as of: %w", err)
	}
	return out, nil
}

// FileAsOf is the subject's file id as it was at a point, or
// agentfs.ErrNotFound when it was not live then.
func (s *Store) FileAsOf(ctx context.Context, subject, id string, p agentfs.Point) (*agentfs.File, error) {
	args := pgx.NamedArgs{"id": id, "subject": subject, "pos": p.Position, "at": p.At}
	f, err := s.scanFile(s.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM `+stateFrom+`
		WHERE s.file_id = @id AND s.subject = @subject AND `+liveAt+` AND `+visiblePath(ctx, "s.path", args), args))
	if err != nil {
		return nil, fmt.Errorf("file as of: %w", err)
	}
	return f, nil
}
