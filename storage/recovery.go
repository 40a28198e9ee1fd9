package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// recoveryInFlight bounds the upload sessions and the batches a recovery
// lists in flight (the newest).
const recoveryInFlight = 100

// RunRecovery is what the subject's run left behind (DESIGN §25), read in
// one REPEATABLE READ snapshot so that all of it holds at AsOf: the run's
// confirmed effects (its events), one page of its keys newest first (a
// keyset scan of idempotency_keys_by_run, as cheap for a run of 100 000
// keys as of 10), and its sessions and batches still in flight. Only what
// lies in the reach of ctx is seen. A run of which nothing is seen (no
// event, key, session or batch) is agentfs.ErrNotFound.
func (s *Store) RunRecovery(ctx context.Context, subject, runID string, filter agentfs.RecoveryFilter) (*agentfs.Recovery, error) {
	r := &agentfs.Recovery{RunID: runID}
	err := s.readSnapshot(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT coalesce((SELECT n FROM event_counters WHERE subject = $1), 0), now()`,
			subject).Scan(&r.AsOf.Position, &r.AsOf.At)
		if err != nil {
			return Translate(err)
		}
		r.AsOf.Subject, r.AsOf.At = subject, r.AsOf.At.UTC()
		if err := s.recoveryConfirmed(ctx, tx, subject, r); err != nil {
			return err
		}
		if r.Operations, r.Next, err = s.runKeys(ctx, tx, subject, runID, filter); err != nil {
			return err
		}
		open := agentfs.UploadFilter{RunID: runID, Open: true, Limit: recoveryInFlight}
		if r.Uploads, err = s.listUploads(ctx, tx, subject, open); err != nil {
			return err
		}
		batches := agentfs.BatchFilter{RunID: runID, Open: true, Limit: recoveryInFlight}
		if r.Batches, err = s.listBatches(ctx, tx, subject, batches); err != nil {
			return err
		}
		args := pgx.NamedArgs{"subject": subject}
		return Translate(tx.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys
			WHERE subject = @subject AND run_recorded IS NULL AND `+visibleKey(ctx, args), args).Scan(&r.PredatesRunRecord))
	})
	if err != nil {
		return nil, fmt.Errorf("run recovery: %w", err)
	}
	if r.Events == 0 && len(r.Operations) == 0 && filter.After == nil && len(r.Uploads) == 0 && len(r.Batches) == 0 {
		return nil, fmt.Errorf("run recovery: nothing of run %q: %w", runID, agentfs.ErrNotFound)
	}
	return r, nil
}

// readSnapshot runs fn in a read-only REPEATABLE READ transaction: every
// statement of it sees the one snapshot its first took.
func (s *Store) readSnapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	return withTxOptions(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// recoveryConfirmed fills in what the run's events confirm, from the
// totals kept as they commit (runTotals): the run's
// summary, how many there are and the cursor at the last.
func (s *Store) recoveryConfirmed(ctx context.Context, tx pgx.Tx, subject string, r *agentfs.Recovery) error {
	sum, lastPos, err := s.runTotals(ctx, tx, subject, r.RunID)
	switch {
	case errors.Is(err, agentfs.ErrNotFound):
		r.Summary = agentfs.RunSummary{RunID: r.RunID, Counts: map[string]int{}}
		return nil
	case err != nil:
		return err
	}
	r.Summary = *sum
	for _, n := range sum.Counts {
		r.Events += n
	}
	last := agentfs.EventCursor{Subject: subject, Position: lastPos}
	err = tx.QueryRow(ctx, `SELECT at FROM events WHERE subject = $1 AND pos = $2`, subject, lastPos).Scan(&last.At)
	if err != nil {
		return Translate(fmt.Errorf("last event: %w", err))
	}
	last.At = last.At.UTC()
	r.LastEvent = &last
	return nil
}

// runKeys is one page of the keys the run's requests claimed, newest
// first, and the cursor of the next page (nil on the last). Statuses are
// decided at the snapshot's time: a claim whose lease lapsed is abandoned.
func (s *Store) runKeys(ctx context.Context, tx pgx.Tx, subject, runID string, filter agentfs.RecoveryFilter) ([]agentfs.KeyOperation, *agentfs.Cursor, error) {
	w := newFilter("subject = @subject AND run_id = @run_id",
		pgx.NamedArgs{"subject": subject, "run_id": runID, "limit": filter.Limit + 1})
	w.cond(visibleKey(ctx, w.args))
	if c := filter.After; c != nil {
		w.when(true, "(created_at, key) < (@after_created_at, @after_key)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_key": c.ID})
	}
	rows, err := tx.Query(ctx, `SELECT key, method, route, coalesce(request_uri, ''), coalesce(paths, '{}'),
			CASE WHEN status = 'completed' THEN 'completed' WHEN lease_expires_at <= now() THEN 'abandoned' ELSE 'in_progress' END,
			coalesce(response_status, 0), coalesce(resource_object, ''), coalesce(resource_id, ''),
			coalesce(extract(epoch FROM lease_expires_at - now())::float8, 0), created_at, coalesce(completed_at, created_at)
		FROM idempotency_keys WHERE `+w.where()+` ORDER BY created_at DESC, key DESC LIMIT @limit`, w.args)
	if err != nil {
		return nil, nil, Translate(fmt.Errorf("run keys: %w", err))
	}
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentfs.KeyOperation, error) {
		var (
			o     agentfs.KeyOperation
			lease float64
		)
		err := r.Scan(&o.Key, &o.Method, &o.Route, &o.RequestURI, &o.Paths, &o.Status, &o.ResponseStatus,
			&o.ResourceObject, &o.ResourceID, &lease, &o.CreatedAt, &o.At)
		if o.Status == agentfs.KeyInProgress {
			o.RetryAfter = time.Duration(math.Ceil(max(lease, 1))) * time.Second
		}
		o.CreatedAt, o.At = o.CreatedAt.UTC(), o.At.UTC()
		return o, err
	})
	if err != nil {
		return nil, nil, Translate(fmt.Errorf("run keys: %w", err))
	}
	if len(ops) <= filter.Limit {
		return ops, nil, nil
	}
	ops = ops[:filter.Limit]
	last := ops[len(ops)-1]
	return ops, &agentfs.Cursor{CreatedAt: last.CreatedAt, ID: last.Key}, nil
}
