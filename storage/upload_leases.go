package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// Why an upload session never locks up and never answers falsely: two kinds
// of request hold a session for a while, each with a lease renewed while it
// runs, so that a holder that dies frees the session within one lease.
//
//   - A complete marks the session completing with a fencing token
//     (complete_fence, bumped by every complete that begins) and a lease
//     (completing_until). Only the holder of the current token commits the
//     file; a complete whose lease lapsed is taken over by the next one (or
//     the session goes back to pending for a part), and commits nothing if
//     it wakes late.
//   - A part on its way to S3 holds a row in upload_part_leases. A complete
//     does not take the part list while one is live, and a part does not
//     start while a complete holds the session: either the part lands
//     before the part list is taken, or it is told to retry. Writers of one
//     part number take turns the same way (holdForPart), so the part S3
//     keeps is the one the session records.
//
// Whoever is told to wait is told how long: what is left of the lease that
// holds it, in whole seconds, at least one.

// partLease is how long a part's lease lives without renewal: a third of
// the complete's, at least a second. A complete waits at most this long for
// the part of a request that died.
func (s *Store) partLease() time.Duration {
	return max(s.cfg.UploadCompleteLease/3, time.Second)
}

// retryAfter is the wait a request is told while a lease holds what it
// needs: what is left of the lease, in whole seconds, from 1 s to the
// lease's own length.
func retryAfter(leftSeconds float64, lease time.Duration) time.Duration {
	wait := time.Duration(math.Ceil(leftSeconds)) * time.Second
	return min(max(wait, time.Second), time.Duration(math.Ceil(lease.Seconds()))*time.Second)
}

// renewal extends a lease every third of its length until stopped, or
// until extend finds it no longer held: a key's claim, a complete's hold
// on its session, a part's lease.
type renewal struct {
	stop chan struct{}
	once sync.Once
}

func renewEvery(lease time.Duration, extend func(ctx context.Context) (held bool, err error)) *renewal {
	r := &renewal{stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), lease/3)
			held, err := extend(ctx)
			cancel()
			if err == nil && !held {
				return
			}
		}
	}()
	return r
}

// end stops renewing.
func (r *renewal) end() { r.once.Do(func() { close(r.stop) }) }

// partHold is a part's lease on its session while its bytes stream to S3.
type partHold struct {
	store   *Store
	id      int64
	renewal *renewal
}

// holdForPart takes a part lease on the session in tx for part n; start
// renews it once tx committed. Writers of one part number take turns: while
// another request's part n is on its way, this one is an
// *agentfs.UploadBusyError. Two UploadParts of one part number must never
// overlap in S3: S3 keeps the bytes of the one that ends last, while each
// writer records the ETag of its own, so the session would list a part S3
// does not hold (and complete would find it missing). A lapsed lease of the
// part belongs to a request that died or stalled: it is taken over, and
// that request, should it come to record its part, finds its lease gone.
func (s *Store) holdForPart(ctx context.Context, tx pgx.Tx, uploadID string, n int) (*partHold, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('agentfs.upload.part.' || $1 || '/' || $2::int, 0))`,
		uploadID, n); err != nil {
		return nil, Translate(err)
	}
	var left *float64
	if err := tx.QueryRow(ctx, `WITH lapsed AS (DELETE FROM upload_part_leases
			WHERE upload_id = $1 AND part_number = $2 AND lease_until <= clock_timestamp())
		SELECT max(extract(epoch FROM lease_until - clock_timestamp()))::float8 FROM upload_part_leases
		WHERE upload_id = $1 AND part_number = $2 AND lease_until > clock_timestamp()`, uploadID, n).Scan(&left); err != nil {
		return nil, Translate(err)
	}
	if left != nil {
		return nil, &agentfs.UploadBusyError{Reason: fmt.Sprintf("part %d of this upload is on its way in another request", n),
			RetryAfter: retryAfter(*left, s.partLease())}
	}
	h := &partHold{store: s}
	err := tx.QueryRow(ctx, `INSERT INTO upload_part_leases (upload_id, part_number, lease_until)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3)) RETURNING id`,
		uploadID, n, s.partLease().Seconds()).Scan(&h.id)
	return h, Translate(err)
}

func (h *partHold) start() { h.renewal = renewEvery(h.store.partLease(), h.extend) }

func (h *partHold) extend(ctx context.Context) (bool, error) {
	tag, err := h.store.pool.Exec(ctx, `UPDATE upload_part_leases
		SET lease_until = clock_timestamp() + make_interval(secs => $2) WHERE id = $1`,
		h.id, h.store.partLease().Seconds())
	return tag.RowsAffected() > 0, Translate(err)
}

// endTx ends the lease in tx, the transaction that records the part; held
// is false when the lease was gone: it lapsed, and another writer of the
// part (or a complete) took it over.
func (h *partHold) endTx(ctx context.Context, tx pgx.Tx) (held bool, err error) {
	tag, err := tx.Exec(ctx, `DELETE FROM upload_part_leases WHERE id = $1`, h.id)
	return tag.RowsAffected() == 1, Translate(err)
}

// release stops renewing and, unless the part's transaction ended the lease
// already (ended), removes it.
func (h *partHold) release(ctx context.Context, ended bool) {
	h.renewal.end()
	if !ended {
		_, _ = h.store.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM upload_part_leases WHERE id = $1`, h.id)
	}
}

// completeHeld reports whether a live complete holds the session, and for
// how long a request must wait for it.
func (s *Store) completeHeld(ctx context.Context, q querier, id string) (wait time.Duration, held bool, err error) {
	var left float64
	err = q.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM completing_until - clock_timestamp()), 0)::float8
		FROM uploads WHERE id = $1 AND status = 'completing'`, id).Scan(&left)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil // it ended meanwhile
	}
	if err != nil {
		return 0, false, Translate(err)
	}
	return retryAfter(left, s.cfg.UploadCompleteLease), left > 0, nil
}
