// Package batch runs batches: it queues them durably in Postgres (River,
// with its tables migrated beside AgentFS's) and applies their items in the
// background, each through the admission core, which commits an item's
// effect with its status and only while the item is still pending, so a
// batch resumed after a crash, or held by two workers at once, never
// applies an item twice. Items that cannot depend on each other run at
// once and commit together; each item runs after every earlier item it may
// depend on (schedule.go).
package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/jobqueue"
	"github.com/agentfs/agentfs/storage"
)

// Args is the queued job of one batch: only its id; the items and their
// content stay in Postgres.
type Args struct {
	BatchID string `json:"batch_id"`
}

// Kind names the job kind in the queue.
func (Args) Kind() string { return "agentfs_batch" }

// insertOpts keeps a batch's job alive however often a transient failure
// sends it back: a batch ends only when every item did.
var insertOpts = &river.InsertOpts{MaxAttempts: 100000}

// Enqueuer puts batches on the queue in the transaction that creates them
// (admission.Queue).
type Enqueuer struct {
	client *river.Client[pgx.Tx]
}

// NewEnqueuer returns an insert-only queue client on pool.
func NewEnqueuer(pool *pgxpool.Pool, log *slog.Logger) (*Enqueuer, error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("batch: queue client: %w", err)
	}
	return &Enqueuer{client: client}, nil
}

// Enqueue queues the batch in tx: it runs once tx commits, never otherwise.
func (e *Enqueuer) Enqueue(ctx context.Context, tx pgx.Tx, batchID string) error {
	if _, err := e.client.InsertTx(ctx, tx, Args{BatchID: batchID}, insertOpts); err != nil {
		return storage.Translate(fmt.Errorf("queue batch: %w", err))
	}
	return nil
}

// Config tunes the runner. The env tags name the variables agentfs serve
// reads each setting from (package envconfig).
type Config struct {
	// Workers is how many batches run at once on this instance.
	Workers int `env:"AGENTFS_BATCH_WORKERS" envDefault:"2"`
	// RescueAfter bounds how long a batch orphaned by a dead process waits
	// before another worker resumes it (plus the queue's 30 s rescue
	// interval). River rescues only jobs with a finite timeout, so a worker
	// runs a batch in slices of two thirds of it and re-queues the rest at
	// once: a long batch is never cut off, only continued.
	RescueAfter time.Duration `env:"AGENTFS_BATCH_RESCUE_AFTER" envDefault:"30s"`
	// ItemConcurrency bounds the items prepared at once (key claimed, bytes
	// on their way to S3) on this instance, shared by the batches it runs
	// (0: 8). Each holds a Postgres connection for a moment; the
	// transactions that commit them are one per running batch.
	ItemConcurrency int `env:"AGENTFS_BATCH_ITEM_CONCURRENCY" envDefault:"8" envMax:"1024"`
	Log             *slog.Logger
	// OtherKinds register the job kinds other River clients on the same
	// tables run (webhook.AddKind). Whichever client leads runs River's
	// maintenance for all of them, and its rescuer discards a stuck job of
	// a kind it does not know instead of rescuing it.
	OtherKinds []func(*river.Workers) error
}

// AddKind registers the batch job kind with another River client's
// workers, for its maintenance only (it never fetches the batches'
// queue): a batch orphaned by a dead process is then rescued whichever
// client leads.
func AddKind(workers *river.Workers) error { return river.AddWorkerSafely(workers, &worker{}) }

// Runner runs queued batches.
type Runner struct {
	store  *storage.Store
	core   *admission.Core
	cfg    Config
	client *river.Client[pgx.Tx]
	// slots holds a token per item being prepared on this instance.
	slots chan struct{}
}

// NewRunner returns a runner whose items go through core; Start runs it.
func NewRunner(store *storage.Store, core *admission.Core, cfg Config) (*Runner, error) {
	if store == nil || core == nil || cfg.Log == nil {
		return nil, errors.New("batch: store, core and Log are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 30 * time.Second
	}
	if cfg.ItemConcurrency <= 0 {
		cfg.ItemConcurrency = 8
	}
	r := &Runner{store: store, core: core, cfg: cfg, slots: make(chan struct{}, cfg.ItemConcurrency)}
	client, err := jobqueue.New(store.QueuePool(), jobqueue.Config{Name: "batch", Queue: river.QueueDefault, Workers: cfg.Workers,
		Own:        func(w *river.Workers) error { return river.AddWorkerSafely(w, &worker{r: r}) },
		Others:     cfg.OtherKinds,
		JobTimeout: cfg.RescueAfter * 2 / 3, RescueAfter: cfg.RescueAfter, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	r.client = client
	return r, nil
}

// Start runs the workers until Stop.
func (r *Runner) Start(ctx context.Context) error { return r.client.Start(ctx) }

// Stop lets running batches reach a safe point and stops the workers.
func (r *Runner) Stop(ctx context.Context) error { return r.client.Stop(ctx) }

// worker runs batch jobs.
type worker struct {
	river.WorkerDefaults[Args]
	r *Runner
}

// NextRetry backs off a batch that met a transient failure (storage down,
// an item key in progress elsewhere): full jitter up to a delay that
// doubles from 1 s to 30 s.
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	ceiling := min(30*time.Second, time.Second<<min(job.Attempt, 5))
	return time.Now().Add(time.Duration(rand.Int64N(int64(ceiling))) + 100*time.Millisecond)
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return w.r.run(ctx, job.Args.BatchID)
}

// run applies a batch's pending items (runItems), then settles its state.
// A session advisory lock (released if this process dies) keeps a second
// worker, handed the job by a rescue, waiting while the first is alive.
func (r *Runner) run(ctx context.Context, id string) error {
	unlock, mine, err := r.store.LockBatch(ctx, id)
	if err != nil {
		return err
	}
	if !mine {
		return river.JobSnooze(10 * time.Second)
	}
	defer unlock()
	b, err := r.store.StartBatch(ctx, id)
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil // purged
	}
	if err != nil || b.Terminal() {
		return err
	}
	switch err := r.runItems(ctx, b); {
	case errors.Is(err, errSliceOver), errors.Is(err, errNotPending):
		return river.JobSnooze(0) // continue at once, from the items still pending
	case err != nil:
		return err
	}
	return r.store.FinishBatch(ctx, id)
}
