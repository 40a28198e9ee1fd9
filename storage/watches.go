package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// The paths the /mcp door's sessions watch (migration 016): what a
// session subscribed to on one instance, for the instance that streams its
// notifications.

// AddWatch records that the subject's session watches w.Path from w.After
// on. Watching a path again keeps the first watch (and its position); a
// session that already watches agentfs.MaxWatchesPerSession paths is
// agentfs.ErrTooManyWatches.
func (s *Store) AddWatch(ctx context.Context, subject string, w agentfs.Watch) error {
	args := pgx.NamedArgs{"subject": subject, "session": w.Session, "path": w.Path,
		"after": w.After.Position, "max": agentfs.MaxWatchesPerSession}
	tag, err := s.pool.Exec(ctx, `UPDATE watches SET seen_at = now()
		WHERE subject = @subject AND session = @session AND path = @path`, args)
	if err != nil {
		return Translate(fmt.Errorf("add watch: %w", err))
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	tag, err = s.pool.Exec(ctx, `INSERT INTO watches (subject, session, path, after_pos)
		SELECT @subject, @session, @path, @after
		WHERE (SELECT count(*) FROM watches WHERE subject = @subject AND session = @session) < @max
		ON CONFLICT (subject, session, path) DO UPDATE SET seen_at = now()`, args)
	if err != nil {
		return Translate(fmt.Errorf("add watch: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return agentfs.ErrTooManyWatches
	}
	return nil
}

// RemoveWatch ends the session's watch of path; one that does not exist
// is no error.
func (s *Store) RemoveWatch(ctx context.Context, subject, session, path string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM watches WHERE subject = $1 AND session = $2 AND path = $3`,
		subject, session, path)
	if err != nil {
		return Translate(fmt.Errorf("remove watch: %w", err))
	}
	return nil
}

// Watches lists what the subject's session watches, oldest first.
func (s *Store) Watches(ctx context.Context, subject, session string) ([]agentfs.Watch, error) {
	rows, err := s.pool.Query(ctx, `SELECT path, after_pos, created_at FROM watches
		WHERE subject = $1 AND session = $2 ORDER BY created_at, path`, subject, session)
	if err != nil {
		return nil, Translate(fmt.Errorf("list watches: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (agentfs.Watch, error) {
		w := agentfs.Watch{Session: session, After: agentfs.EventCursor{Subject: subject}}
		err := row.Scan(&w.Path, &w.After.Position, &w.After.At)
		w.After.At = w.After.At.UTC()
		return w, err
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("list watches: %w", err))
	}
	return out, nil
}

// TouchWatches renews the session's watches: they are kept while it is
// seen.
func (s *Store) TouchWatches(ctx context.Context, subject, session string) error {
	_, err := s.pool.Exec(ctx, `UPDATE watches SET seen_at = now() WHERE subject = $1 AND session = $2`,
		subject, session)
	if err != nil {
		return Translate(fmt.Errorf("touch watches: %w", err))
	}
	return nil
}

// EndWatches drops every watch of the session (it ended), reporting how
// many there were.
func (s *Store) EndWatches(ctx context.Context, subject, session string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM watches WHERE subject = $1 AND session = $2`, subject, session)
	if err != nil {
		return 0, Translate(fmt.Errorf("end watches: %w", err))
	}
	return tag.RowsAffected(), nil
}

// SweepWatches drops the watches of sessions not seen for longer than the
// retention (WatchRetention): a client that went away without ending its
// session.
func (s *Store) SweepWatches(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM watches WHERE seen_at < now() - make_interval(secs => $1)`,
		s.cfg.WatchRetention.Seconds())
	if err != nil {
		return 0, Translate(fmt.Errorf("sweep watches: %w", err))
	}
	return tag.RowsAffected(), nil
}

// WatchRetention is how long a session's watches outlive its last sight.
func (s *Store) WatchRetention() time.Duration { return s.cfg.WatchRetention }
