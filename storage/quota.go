package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReserveQuota reserves want bytes of the subject's quota of limit bytes
// in the window starting at start, before they are accepted, so that
// concurrent writes on any instance can never take more than limit
// between them. It returns how many bytes it reserved, and how many the
// window then holds: want when they fit; otherwise, with partial, exactly
// what is left (maybe 0), and without it 0. The window's row is locked
// while the reservation is decided, so deciding and taking are one step.
func (s *Store) ReserveQuota(ctx context.Context, subject string, start time.Time, want, limit int64, partial bool) (got, used int64, err error) {
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		// The upsert creates the window's row or locks it, and reads the
		// bytes as the last committed reservation left them.
		if err := tx.QueryRow(ctx, `INSERT INTO quota_usage (subject, window_start, bytes) VALUES ($1, $2, 0)
			ON CONFLICT (subject, window_start) DO UPDATE SET bytes = quota_usage.bytes
			RETURNING bytes`, subject, start).Scan(&used); err != nil {
			return err
		}
		if got = reservable(want, max(0, limit-used), partial); got == 0 {
			return nil
		}
		used += got
		_, err := tx.Exec(ctx, `UPDATE quota_usage SET bytes = $3 WHERE subject = $1 AND window_start = $2`, subject, start, used)
		return err
	})
	if err != nil {
		return 0, 0, Translate(fmt.Errorf("reserve quota: %w", err))
	}
	return got, used, nil
}

// ReleaseQuota gives back n bytes reserved in the window starting at start
// that a write did not use (it failed, replayed, or read less).
func (s *Store) ReleaseQuota(ctx context.Context, subject string, start time.Time, n int64) error {
	if n <= 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE quota_usage SET bytes = greatest(0, bytes - $3)
		WHERE subject = $1 AND window_start = $2`, subject, start, n)
	if err != nil {
		return Translate(fmt.Errorf("release quota: %w", err))
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

// reservable is how much of want a reservation takes when left is what
// the budget still holds: want when it fits; otherwise, with partial,
// exactly what is left (maybe 0), and without it 0.
func reservable(want, left int64, partial bool) int64 {
	switch {
	case want <= left:
		return want
	case partial:
		return left
	}
	return 0
}
