// Package batch runs batches: it stores them, queues them durably in
// Postgres (River, with its tables migrated beside AgentFS's), and applies
// their items in order in the background. Each item's effect and its status
// commit in one transaction that applies the item only while it is still
// pending, so a batch resumed after a crash, or held by two workers at once,
// never applies an item twice.
package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
)

// Args is the queued job of one batch: only its id; the items and their
// content stay in Postgres.
type Args struct {
	BatchID string `json:"batch_id"`
}

// Kind names the job kind in the queue.
func (Args) Kind() string { return "agentfs_batch" }

// Config tunes the queue.
type Config struct {
	// Workers is how many batches run at once on this instance.
	Workers int
	// RescueAfter bounds how long a batch orphaned by a dead process waits
	// before another worker resumes it (plus the queue's 30 s rescue
	// interval). River rescues only jobs with a finite timeout, so a worker
	// runs a batch in slices of two thirds of it and re-queues the rest at
	// once: a long batch is never cut off, only continued.
	RescueAfter time.Duration
	// Render is the response a standalone upload would have returned for a
	// file, recorded for item keys so either route replays the other.
	Render func(f *agentfs.File, created bool) idempotency.Outcome
	Log    *slog.Logger
}

// Queue stores, queues and runs batches.
type Queue struct {
	store  *storage.Store
	keys   *idempotency.Store
	cfg    Config
	client *river.Client[pgx.Tx]
}

// New returns a queue; Start runs its workers.
func New(store *storage.Store, keys *idempotency.Store, cfg Config) (*Queue, error) {
	if store == nil || keys == nil || cfg.Render == nil || cfg.Log == nil {
		return nil, errors.New("batch: store, keys, Render and Log are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 30 * time.Second
	}
	q := &Queue{store: store, keys: keys, cfg: cfg}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{q: q}); err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(store.QueuePool()), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		JobTimeout:           cfg.RescueAfter * 2 / 3,
		RescueStuckJobsAfter: cfg.RescueAfter,
		Logger:               cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("batch: queue client: %w", err)
	}
	q.client = client
	return q, nil
}

// Start runs the workers until Stop.
func (q *Queue) Start(ctx context.Context) error { return q.client.Start(ctx) }

// Stop lets running batches reach a safe point and stops the workers.
func (q *Queue) Stop(ctx context.Context) error { return q.client.Stop(ctx) }

// Create stores a batch and queues it in one transaction with hook (which
// records the request's idempotency key).
func (q *Queue) Create(ctx context.Context, b *agentfs.Batch, hook storage.BatchHook) (*agentfs.Batch, error) {
	return q.store.CreateBatch(ctx, b, func(ctx context.Context, tx pgx.Tx, b *agentfs.Batch) error {
		if _, err := q.client.InsertTx(ctx, tx, Args{BatchID: b.ID}, &river.InsertOpts{MaxAttempts: 100000}); err != nil {
			return storage.Translate(fmt.Errorf("queue batch: %w", err))
		}
		if hook != nil {
			return hook(ctx, tx, b)
		}
		return nil
	})
}

// Batch returns the subject's batch with its items' outcomes.
func (q *Queue) Batch(ctx context.Context, subject, id string) (*agentfs.Batch, error) {
	return q.store.Batch(ctx, subject, id)
}

// worker runs batch jobs.
type worker struct {
	river.WorkerDefaults[Args]
	q *Queue
}

// NextRetry backs off a batch that met a transient failure (storage down,
// an item key in progress elsewhere): full jitter up to a delay that
// doubles from 1 s to 30 s.
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	ceiling := min(30*time.Second, time.Second<<min(job.Attempt, 5))
	return time.Now().Add(time.Duration(rand.Int64N(int64(ceiling))) + 100*time.Millisecond)
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return w.q.run(ctx, job.Args.BatchID)
}

// run applies a batch's pending items in order, then settles its state. A
// session advisory lock (released if this process dies) keeps a second
// worker, handed the job by a rescue, waiting while the first is alive.
func (q *Queue) run(ctx context.Context, id string) error {
	conn, err := q.store.Pool().Acquire(ctx)
	if err != nil {
		return storage.Translate(err)
	}
	defer conn.Release()
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('agentfs.batch.' || $1))`, id).Scan(&mine); err != nil {
		return storage.Translate(err)
	}
	if !mine {
		return river.JobSnooze(10 * time.Second)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('agentfs.batch.' || $1))`, id)
	}()
	b, err := q.store.StartBatch(ctx, id)
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil // purged
	}
	if err != nil || b.Terminal() {
		return err
	}
	for _, it := range b.Items {
		if it.Status != agentfs.ItemPending {
			continue
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < q.cfg.RescueAfter/6 {
			return river.JobSnooze(0) // this slice is over; continue at once
		}
		if err := q.apply(ctx, b, it); err != nil {
			q.cfg.Log.WarnContext(ctx, "batch item will be retried", "batch_id", b.ID, "index", it.Index, "err", err)
			return err
		}
	}
	return q.store.FinishBatch(ctx, id)
}
