package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// seedSession connects to the database to seed rows with SQL (connect)
// and turns the triggers off for that session. The events trigger
// notifies waiting followers, once per row; with the triggers off
// (session_replication_role = replica, a superuser setting, which the
// throwaway cluster's role may change) a million seeded rows do not queue
// a million notifications. Without it they do, slowly: replica says
// whether the triggers are off, and so whether the seed must number its
// events itself (pos after the subject's last, then the counter moves
// past them), as the deferred numbering trigger would at commit.
func (b *bench) seedSession(ctx context.Context) (conn *pgx.Conn, subject string, replica bool, err error) {
	conn, subject, err = b.connect(ctx)
	if err != nil {
		return nil, "", false, err
	}
	replica = true
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		logf("  seeding with the triggers on: %v", err)
		replica = false
	}
	return conn, subject, replica, nil
}

// eventCounter is the number of the subject's last event.
func eventCounter(ctx context.Context, conn *pgx.Conn, subject string) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT n FROM event_counters WHERE subject = $1), 0)`, subject).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("events counter: %w", err)
	}
	return n, nil
}
