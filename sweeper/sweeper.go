// Package sweeper runs the periodic clean-up tasks of AgentFS in one place
// (serve wires them: expired idempotency records, expired upload sessions,
// deleted files past purge_after, old quota windows, unreferenced blobs).
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
