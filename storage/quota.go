package storage

import (
	"context"
	"fmt"
	"time"
)

// QuotaUsed returns the bytes the subject wrote in the window starting at
// start.
func (s *Store) QuotaUsed(ctx context.Context, subject string, start time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(bytes), 0) FROM quota_usage WHERE subject = $1 AND window_start = $2`,
		subject, start).Scan(&n)
	if err != nil {
		return 0, Translate(fmt.Errorf("read quota: %w", err))
	}
	return n, nil
}

// AddQuota counts n more bytes written by the subject in the window
// starting at start.
func (s *Store) AddQuota(ctx context.Context, subject string, start time.Time, n int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO quota_usage (subject, window_start, bytes) VALUES ($1, $2, $3)
		ON CONFLICT (subject, window_start) DO UPDATE SET bytes = quota_usage.bytes + excluded.bytes`, subject, start, n)
	if err != nil {
		return Translate(fmt.Errorf("count quota: %w", err))
	}
	return nil
}

// SweepQuota removes usage of windows that ended before cutoff.
func (s *Store) SweepQuota(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM quota_usage WHERE window_start < $1`, cutoff)
	if err != nil {
		return 0, Translate(fmt.Errorf("sweep quota: %w", err))
	}
	return tag.RowsAffected(), nil
}
