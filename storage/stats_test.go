package storage_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestLiveUploadsCountsOnlySessionsInUse seeds a session in every status:
// the live ones are counted by status, the finished ones are not.
func TestLiveUploadsCountsOnlySessionsInUse(t *testing.T) {
	store, b := setup(t)
	ctx := context.Background()
	got, err := store.LiveUploads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["pending"] != 0 || got["completing"] != 0 {
		t.Fatalf("no sessions: %v, want pending and completing at 0", got)
	}
	statuses := []string{"pending", "pending", "completing", "completed", "aborted", "expired", "failed"}
	for i, status := range statuses {
		storagetest.Exec(t, b.cfg, `INSERT INTO uploads (id, subject, path, size_bytes, content_type, replace,
				part_size, part_count, status, s3_upload_id, blob_key, expires_at)
			VALUES ($1, 's', $2, 10, 'text/plain', false, 5242880, 1, $3, 'x', 'blobs/x', now() + interval '1 hour')`,
			fmt.Sprintf("upl_%d", i), fmt.Sprintf("p%d", i), status)
	}
	if got, err = store.LiveUploads(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["pending"] != 2 || got["completing"] != 1 {
		t.Fatalf("live sessions: %v, want pending 2, completing 1 and nothing else", got)
	}
}

// TestQueueStatsReadsTheBatchQueue seeds jobs in River's table, one ready
// for an hour: the stats count each live state and say how long the oldest
// ready job has waited.
func TestQueueStatsReadsTheBatchQueue(t *testing.T) {
	store, b := setup(t)
	ctx := context.Background()
	st, err := store.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.OldestWait != 0 || len(st.Jobs) != 4 || st.Jobs["available"] != 0 {
		t.Fatalf("empty queue: %+v", st)
	}
	seed := func(state, scheduled string, n int) {
		for i := 0; i < n; i++ {
			storagetest.Exec(t, b.cfg, `INSERT INTO river_job (state, max_attempts, scheduled_at, args, kind, attempted_at)
				VALUES ($1::river_job_state, 1, now() - $2::interval, '{}', 'agentfs_batch',
					CASE WHEN $1 = 'running' THEN now() END)`, state, scheduled)
		}
	}
	seed("available", "1 hour", 1)
	seed("available", "1 minute", 2)
	seed("scheduled", "-1 hour", 1) // due in an hour
	seed("retryable", "-1 minute", 1)
	seed("running", "2 hours", 1) // running for long: not waiting
	storagetest.Exec(t, b.cfg, `INSERT INTO river_job (state, max_attempts, args, kind, finalized_at)
		VALUES ('completed', 1, '{}', 'agentfs_batch', now())`)
	if st, err = store.QueueStats(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"available": 3, "scheduled": 1, "retryable": 1, "running": 1}
	if fmt.Sprint(st.Jobs) != fmt.Sprint(want) {
		t.Fatalf("jobs by state: %v, want %v", st.Jobs, want)
	}
	// Seeded an hour in the past: at least that, and less than the running
	// job's two hours, which is not a wait.
	if st.OldestWait < time.Hour || st.OldestWait >= 2*time.Hour {
		t.Fatalf("oldest wait %v, want the hour the oldest ready job has waited", st.OldestWait)
	}
}

// deadlineTracer records, for each statement, whether it ran under a
// deadline.
type deadlineTracer struct {
	mu      sync.Mutex
	started int
	bounded int
	ended   int
}

func (d *deadlineTracer) counts() (started, bounded, ended int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started, d.bounded, d.ended
}

func (d *deadlineTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started++
	if _, ok := ctx.Deadline(); ok {
		d.bounded++
	}
	return ctx
}

func (d *deadlineTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended++
}

// TestTracersComposeWithTheStatementBound gives the store an observer of
// its statements: it hears every one, each still under the deadline the
// statement bound sets (Config.DBTimeout).
func TestTracersComposeWithTheStatementBound(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	obs := &deadlineTracer{}
	cfg.Tracers = []pgx.QueryTracer{obs}
	store := storagetest.OpenConfig(t, cfg)
	ctx := context.Background()           // no deadline of its own
	started0, bounded0, _ := obs.counts() // migrations run unbounded
	if _, err := store.LiveUploads(ctx); err != nil {
		t.Fatal(err)
	}
	started, bounded, ended := obs.counts()
	if started == started0 || ended != started {
		t.Fatalf("the observer heard %d starts and %d ends, want the same number, and a new one", started, ended)
	}
	if started-started0 != bounded-bounded0 {
		t.Fatalf("%d of %d statements ran without the statement bound's deadline",
			(started-started0)-(bounded-bounded0), started-started0)
	}
}
