package storage

import (
	"context"
	"fmt"
	"time"
)

// This file answers the questions /metrics asks of Postgres on each scrape.
// Each is one statement that an index answers (the live upload sessions are
// a partial index; River indexes its jobs by state), so a scrape stays cheap
// however much history the tables hold.

// LiveUploadStatuses are the statuses LiveUploads counts: the sessions still
// in use. Finished sessions (completed, aborted, expired, failed) are
// history, not state, and are not counted on each scrape.
var LiveUploadStatuses = []string{"pending", "completing"}

// LiveUploads counts the upload sessions in each live status (every status
// of LiveUploadStatuses is in the map, zero when none).
func (s *Store) LiveUploads(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM uploads
		WHERE status IN ('pending', 'completing') GROUP BY status`)
	if err != nil {
		return nil, Translate(fmt.Errorf("count upload sessions: %w", err))
	}
	defer rows.Close()
	counts := make(map[string]int64, len(LiveUploadStatuses))
	for _, st := range LiveUploadStatuses {
		counts[st] = 0
	}
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, Translate(fmt.Errorf("count upload sessions: %w", err))
		}
		counts[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, Translate(fmt.Errorf("count upload sessions: %w", err))
	}
	return counts, nil
}

// QueueJobStates are the states of the batch queue's jobs that QueueStats
// counts: waiting to run (available), waiting for a time (scheduled: a
// snoozed batch; retryable: one backing off after a transient failure), and
// running. Finished jobs are River's to clean up.
var QueueJobStates = []string{"available", "scheduled", "retryable", "running"}

// QueueStats is the batch queue's backlog as River's job table shows it.
type QueueStats struct {
	// Jobs counts the jobs in each of QueueJobStates.
	Jobs map[string]int64
	// OldestWait is how long the oldest available job has been ready to
	// run without a worker taking it (0 when none waits).
	OldestWait time.Duration
}

// QueueStats reads the batch queue's backlog.
func (s *Store) QueueStats(ctx context.Context) (QueueStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT state::text, count(*),
			greatest(extract(epoch FROM now() - min(scheduled_at)), 0)::float8
		FROM river_job WHERE state IN ('available', 'scheduled', 'retryable', 'running')
		GROUP BY state`)
	if err != nil {
		return QueueStats{}, Translate(fmt.Errorf("read batch queue: %w", err))
	}
	defer rows.Close()
	st := QueueStats{Jobs: make(map[string]int64, len(QueueJobStates))}
	for _, state := range QueueJobStates {
		st.Jobs[state] = 0
	}
	for rows.Next() {
		var (
			state  string
			n      int64
			oldest float64
		)
		if err := rows.Scan(&state, &n, &oldest); err != nil {
			return QueueStats{}, Translate(fmt.Errorf("read batch queue: %w", err))
		}
		st.Jobs[state] = n
		if state == "available" {
			st.OldestWait = time.Duration(oldest * float64(time.Second))
		}
	}
	if err := rows.Err(); err != nil {
		return QueueStats{}, Translate(fmt.Errorf("read batch queue: %w", err))
	}
	return st, nil
}
