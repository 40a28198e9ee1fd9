// Package sweeper runs the periodic clean-up tasks of AgentFS in one place
// (server.New wires them: expired idempotency records, expired upload sessions,
// deleted files past purge_after, old quota windows, unreferenced blobs,
// resource subscriptions of /mcp sessions gone idle).
// Every task is safe to run on several instances at once, so no leader is
// needed: each removes only what has expired or what no row references,
// and the tasks that change rows take them with SKIP LOCKED.
package sweeper

import (
	"context"
	"log/slog"
	"time"
)

// Task is one clean-up; Run reports how many things it removed.
type Task struct {
	Name string
	Run  func(ctx context.Context) (int64, error)
}

// Run runs every task once per interval until ctx ends.
func Run(ctx context.Context, log *slog.Logger, every time.Duration, tasks ...Task) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		Once(ctx, log, tasks...)
	}
}

// Once runs every task once, logging what each removed or why it failed.
func Once(ctx context.Context, log *slog.Logger, tasks ...Task) {
	for _, task := range tasks {
		n, err := task.Run(ctx)
		switch {
		case err != nil:
			log.WarnContext(ctx, "sweep failed", "task", task.Name, "err", err)
		case n > 0:
			log.InfoContext(ctx, "swept", "task", task.Name, "removed", n)
		}
	}
}

// Store is what the sweeper cleans: each method removes what expired and
// reports how much.
type Store interface {
	SweepKeys(ctx context.Context) (int64, error)
	ExpireUploads(ctx context.Context) (int, error)
	ExpireFiles(ctx context.Context) (int64, error)
	PurgeDeleted(ctx context.Context) (int64, error)
	SweepVersions(ctx context.Context, retention time.Duration, maxVersions int) (int64, error)
	SweepEvents(ctx context.Context) (int64, error)
	SweepWatches(ctx context.Context) (int64, error)
	SweepQuota(ctx context.Context, cutoff time.Time) (int64, error)
	SweepBlobs(ctx context.Context, grace time.Duration) (int64, error)
}

// Config is how often the sweeper runs and how long things are kept. The
// env tags name the variables agentfs serve reads the sweeper's own
// settings from (package envconfig); the quota window and the version
// bounds are the API's (handlers.Limits), handed over by server.New.
type Config struct {
	// Interval is how often every task runs (Run); when it is 0 a server
	// runs none periodically (its tests run them with Sweep).
	Interval time.Duration `env:"AGENTFS_SWEEP_INTERVAL" envDefault:"5m"`
	// BlobGrace is how old an unreferenced blob must be before it goes:
	// longer than any write in flight.
	BlobGrace time.Duration `env:"AGENTFS_BLOB_GRACE" envDefault:"6h"`
	// QuotaWindow is the byte quota's window; windows that ended more than
	// an hour ago go.
	QuotaWindow time.Duration
	// VersionRetention and MaxVersions bound the non-current versions kept
	// per file.
	VersionRetention time.Duration
	MaxVersions      int
}

// Tasks are every clean-up of store, in an order where each frees what
// the next removes: expired idempotency records and upload sessions, files
// past their expiry (recorded deleted), deleted files past purge_after,
// versions past their retention, events past theirs, old quota windows, and
// blobs nothing references any more.
func Tasks(store Store, cfg Config) []Task {
	return []Task{
		{Name: "idempotency records", Run: store.SweepKeys},
		{Name: "expired uploads", Run: func(ctx context.Context) (int64, error) {
			n, err := store.ExpireUploads(ctx)
			return int64(n), err
		}},
		{Name: "expired files", Run: store.ExpireFiles},
		{Name: "purged deleted files", Run: store.PurgeDeleted},
		{Name: "old versions", Run: func(ctx context.Context) (int64, error) {
			return store.SweepVersions(ctx, cfg.VersionRetention, cfg.MaxVersions)
		}},
		{Name: "old events", Run: store.SweepEvents},
		{Name: "idle resource subscriptions", Run: store.SweepWatches},
		{Name: "old quota windows", Run: func(ctx context.Context) (int64, error) {
			return store.SweepQuota(ctx, time.Now().Add(-cfg.QuotaWindow-time.Hour))
		}},
		{Name: "unreferenced blobs", Run: func(ctx context.Context) (int64, error) {
			return store.SweepBlobs(ctx, cfg.BlobGrace)
		}},
	}
}
