package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// ChannelEvents carries, for each statement that inserted events, the md5
// of their subject and what filters look at of each (a trigger on events
// notifies it as the statement's transaction commits); the event waiters
// (eventwait.go) follow it.
const ChannelEvents = "agentfs_events"

// eventColumns are an event row as scanEvent reads it, for a reader whose
// reach is ctx's: a move from outside its folders shows no previous path.
func eventColumns(ctx context.Context, args pgx.NamedArgs) string {
	previous := `coalesce(previous_path, '')`
	if v := visiblePath(ctx, "previous_path", args); v != "true" {
		previous = `CASE WHEN ` + v + ` THEN previous_path ELSE '' END`
	}
	return `pos, id, subject, type, file_id, path, ` + previous + `,
	coalesce(version, 0), coalesce(size_bytes, 0), coalesce(sha256, ''), coalesce(agent_id, ''), coalesce(run_id, ''),
	coalesce(idempotency_key, ''), coalesce(request_id, ''), coalesce(batch_id, ''), at, coalesce(checkpoint_id, ''),
	coalesce(fork_id, ''), coalesce(origin, '')`
}

func scanEvent(row pgx.Row) (*agentfs.Event, error) {
	var e agentfs.Event
	err := row.Scan(&e.Position, &e.ID, &e.Subject, &e.Type, &e.FileID, &e.Path, &e.PreviousPath,
		&e.Version, &e.SizeBytes, &e.SHA256, &e.Origin.By.AgentID, &e.Origin.By.RunID,
		&e.Origin.Key, &e.Origin.RequestID, &e.Origin.BatchID, &e.At, &e.CheckpointID,
		&e.Origin.ForkID, &e.Origin.Via)
	if err != nil {
		return nil, Translate(err)
	}
	return &e, nil
}

// ListEvents returns up to filter.Limit of the subject's events after the
// filter's cursor, oldest first, and the cursor to continue from.
//
// Positions are handed out in commit order with no holes (the events_pos
// trigger of migration 009), so no event can ever appear before the
// position a page ends at: a follower of the cursors never skips an event
// that commits late, and never sees one twice.
func (s *Store) ListEvents(ctx context.Context, subject string, filter agentfs.EventFilter) ([]*agentfs.Event, agentfs.EventCursor, error) {
	next := agentfs.EventCursor{Subject: subject, At: time.Now().UTC()}
	if filter.After != nil {
		next = *filter.After
		if next.At.Before(time.Now().Add(-s.cfg.EventRetention)) {
			return nil, next, agentfs.ErrCursorExpired
		}
	}
	w := newFilter("subject = @subject AND pos > @after", pgx.NamedArgs{"subject": subject, "after": next.Position, "limit": filter.Limit})
	w.cond(visiblePath(ctx, "path", w.args))
	w.when(filter.RunID != "", "run_id = @run_id", pgx.NamedArgs{"run_id": filter.RunID})
	w.when(filter.AgentID != "", "agent_id = @agent_id", pgx.NamedArgs{"agent_id": filter.AgentID})
	w.when(filter.FileID != "", "file_id = @file_id", pgx.NamedArgs{"file_id": filter.FileID})
	w.when(filter.Prefix != "", `path LIKE @prefix ESCAPE '\'`, pgx.NamedArgs{"prefix": likePrefix(filter.Prefix)})
	w.when(len(filter.Types) > 0, "type = ANY(@types)", pgx.NamedArgs{"types": filter.Types})
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns(ctx, w.args)+` FROM events WHERE `+w.where()+
		` ORDER BY pos LIMIT @limit`, w.args)
	if err != nil {
		return nil, next, Translate(fmt.Errorf("list events: %w", err))
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, next, Translate(fmt.Errorf("list events: %w", err))
	}
	if n := len(events); n > 0 {
		next.Position, next.At = events[n-1].Position, events[n-1].At
	} else {
		next.At = time.Now().UTC() // nothing after it yet: the cursor is as fresh as this read
	}
	return events, next, nil
}

// AwaitEvents is ListEvents that, when there is nothing to hand out yet,
// waits up to wait for the subject's next events to commit. It looks again
// only when a notification says an event its filter can match committed,
// or when the listening connection is back after it may have missed one
// (eventwait.go); a subject already waiting Config.MaxWaitersPerSubject
// times on this instance gets agentfs.ErrTooManyWaiters.
func (s *Store) AwaitEvents(ctx context.Context, subject string, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error) {
	if wait <= 0 {
		return s.ListEvents(ctx, subject, filter)
	}
	// Registered before the first look: what commits from then on wakes
	// this loop.
	w, err := s.waiters.add(subject, filter, ReachedPrefixes(ctx))
	if err != nil {
		return nil, agentfs.EventCursor{}, err
	}
	defer s.waiters.remove(w)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		events, next, err := s.ListEvents(ctx, subject, filter)
		s.counters.eventLooks.Add(1)
		if err != nil || len(events) > 0 {
			return events, next, err
		}
		select {
		case <-ctx.Done():
			return nil, next, ctx.Err()
		case <-deadline.C:
			return nil, next, nil
		case <-s.draining:
			return nil, next, nil
		case <-w.woke:
		}
	}
}

// EventsStart is a cursor at the current end of the subject's feed: its
// follower gets exactly what commits from now on.
func (s *Store) EventsStart(ctx context.Context, subject string) (agentfs.EventCursor, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT n FROM event_counters WHERE subject = $1), 0)`, subject).Scan(&n)
	if err != nil {
		return agentfs.EventCursor{}, Translate(fmt.Errorf("events start: %w", err))
	}
	return agentfs.EventCursor{Subject: subject, At: time.Now().UTC(), Position: n}, nil
}

// SweepEvents removes events older than the retention, and reports how
// many.
func (s *Store) SweepEvents(ctx context.Context) (int64, error) {
	const chunk = 5000
	return s.inChunks(ctx, "sweep events", chunk, `DELETE FROM events WHERE (subject, pos) IN (
		SELECT subject, pos FROM events WHERE at < now() - make_interval(secs => $1) LIMIT $2)`,
		s.cfg.EventRetention.Seconds(), chunk)
}

// RunSummary is what the subject's run did, from its events, or
// agentfs.ErrNotFound when no event carries the run id.
func (s *Store) RunSummary(ctx context.Context, subject, runID string) (*agentfs.RunSummary, error) {
	return s.runSummary(ctx, s.pool, subject, runID)
}

func (s *Store) runSummary(ctx context.Context, q querier, subject, runID string) (*agentfs.RunSummary, error) {
	r, _, err := s.runTotals(ctx, q, subject, runID)
	return r, err
}
