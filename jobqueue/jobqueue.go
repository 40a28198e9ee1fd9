// Package jobqueue makes the River client of a background door (a batch
// runner, a webhook deliverer) on the store's queue pool: its own job kind
// worked, the other doors' kinds known, so that whichever client leads
// rescues or discards any door's jobs.
package jobqueue

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Config is one door's River client.
type Config struct {
	// Name starts the client's errors ("batch", "webhook").
	Name string
	// Queue is the queue it works, with Workers jobs at once.
	Queue   string
	Workers int
	// Own registers the kind it works; Others the kinds of the other
	// clients on the same tables, for their maintenance only.
	Own    func(*river.Workers) error
	Others []func(*river.Workers) error
	// A job runs at most JobTimeout; one whose instance died is rescued
	// after RescueAfter.
	JobTimeout, RescueAfter time.Duration
	Log                     *slog.Logger
}

// New returns the client on pool; Start runs it.
func New(pool *pgxpool.Pool, cfg Config) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	for _, add := range append([]func(*river.Workers) error{cfg.Own}, cfg.Others...) {
		if err := add(workers); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		Logger:               cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: queue client: %w", cfg.Name, err)
	}
	return client, nil
}
