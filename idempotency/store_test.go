package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func setup(t *testing.T, lease, retention time.Duration) (*idempotency.Store, *storage.Store) {
	t.Helper()
	t.Parallel()
	store := storagetest.Open(t)
	keys, err := idempotency.NewStore(store.Pool(), lease, retention)
	if err != nil {
		t.Fatal(err)
	}
	return keys, store
}

var request = idempotency.Request{Operation: "put", Target: "a.txt"}.Sum()

func complete(t *testing.T, store *storage.Store, c *idempotency.Claim, content string) error {
	t.Helper()
	return storage.WithTx(context.Background(), store.Pool(), func(tx pgx.Tx) error {
		return c.Complete(context.Background(), tx, []byte(content), idempotency.Outcome{Status: 201, Body: []byte(`{}`)})
	})
}

func TestClaims(t *testing.T) {
	ctx := context.Background()

	t.Run("SecondRequestWaitsThenReplays", func(t *testing.T) {
		keys, store := setup(t, 30*time.Second, time.Hour)
		c, rec, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil || c == nil || rec != nil {
			t.Fatalf("first begin: %v %v %v", c, rec, err)
		}
		defer c.Close()
		var busy *idempotency.InProgressError
		if _, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request); !errors.As(err, &busy) || busy.RetryAfter <= 0 {
			t.Fatalf("begin while running: %v", err)
		}
		if _, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", []byte("other")); !errors.Is(err, idempotency.ErrConflict) {
			t.Fatalf("begin of another request: %v", err)
		}
		if err := complete(t, store, c, "content"); err != nil {
			t.Fatal(err)
		}
		_, rec, err = keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil || rec == nil || !rec.Completed || string(rec.ContentHash) != "content" || rec.Outcome.Status != 201 {
			t.Fatalf("begin after completion: %+v %v", rec, err)
		}
	})

	t.Run("LapsedClaimIsTakenOverAndTheLateOwnerCannotCommit", func(t *testing.T) {
		keys, store := setup(t, time.Second, time.Hour)
		paused, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil {
			t.Fatal(err)
		}
		paused.Close() // a paused process renews nothing
		time.Sleep(1200 * time.Millisecond)
		taker, rec, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil || taker == nil || rec != nil {
			t.Fatalf("takeover: %v %v %v", taker, rec, err)
		}
		defer taker.Close()
		if err := complete(t, store, paused, "late"); !errors.Is(err, idempotency.ErrClaimLost) {
			t.Fatalf("the paused owner committed: %v", err)
		}
		if err := paused.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := complete(t, store, taker, "taker"); err != nil {
			t.Fatalf("the new owner could not commit: %v", err)
		}
		rec, err = keys.Operation(ctx, "s", "k")
		if err != nil || string(rec.ContentHash) != "taker" {
			t.Fatalf("operation: %+v %v", rec, err)
		}
	})

	t.Run("RenewedLeaseIsNotTakenOver", func(t *testing.T) {
		keys, _ := setup(t, time.Second, time.Hour)
		c, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		time.Sleep(2 * time.Second) // two leases, renewed every third of one
		var busy *idempotency.InProgressError
		if _, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request); !errors.As(err, &busy) {
			t.Fatalf("a live claim was taken over: %v", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		keys, _ := setup(t, 30*time.Second, time.Hour)
		c, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := keys.Operation(ctx, "s", "k"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("released key still holds something: %v", err)
		}
		again, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", []byte("another request"))
		if err != nil || again == nil {
			t.Fatalf("begin after release: %v", err)
		}
		again.Close()
	})

	t.Run("EffectRollsBackWithItsRecord", func(t *testing.T) {
		keys, store := setup(t, 30*time.Second, time.Hour)
		c, _, err := keys.Begin(ctx, "s", "k", "POST", "/v1/files", request)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		boom := errors.New("effect failed after recording")
		err = storage.WithTx(ctx, store.Pool(), func(tx pgx.Tx) error {
			if err := c.Complete(ctx, tx, nil, idempotency.Outcome{Status: 201, Body: []byte(`{}`)}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		rec, err := keys.Operation(ctx, "s", "k")
		if err != nil || rec.Completed {
			t.Fatalf("a rolled-back effect left a completed record: %+v %v", rec, err)
		}
	})

	t.Run("SweepPurgesExpiredRecordsOnly", func(t *testing.T) {
		keys, store := setup(t, time.Second, time.Second)
		done, _, _ := keys.Begin(ctx, "s", "done", "POST", "/v1/files", request)
		if err := complete(t, store, done, "x"); err != nil {
			t.Fatal(err)
		}
		running, _, _ := keys.Begin(ctx, "s", "running", "POST", "/v1/files", request)
		defer running.Close()
		time.Sleep(1100 * time.Millisecond)
		n, err := keys.Sweep(ctx)
		if err != nil || n != 1 {
			t.Fatalf("sweep removed %d, err %v; want the expired record only", n, err)
		}
		if _, err := keys.Operation(ctx, "s", "running"); err != nil {
			t.Fatalf("a live claim was swept: %v", err)
		}
	})
}

func TestSweepKeepsTheKeyOfARunningBatch(t *testing.T) {
	keys, store := setup(t, time.Second, time.Second)
	ctx := context.Background()
	c, _, err := keys.Begin(ctx, "s", "batch-key", "POST", "/v1/batch", request)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.CreateBatch(ctx, &agentfs.Batch{Subject: "s", Items: []agentfs.BatchItem{{Op: agentfs.OpDelete, FileID: "f"}}},
		func(ctx context.Context, tx pgx.Tx, b *agentfs.Batch) error {
			return c.Complete(ctx, tx, nil, idempotency.Outcome{Status: 202, Body: []byte(`{}`),
				Resource: idempotency.Resource{Object: "batch", ID: b.ID}})
		})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if n, err := keys.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("swept %d (%v) while the batch is queued", n, err)
	}
	if _, err := store.Pool().Exec(ctx, `UPDATE batches SET status = 'succeeded' WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := keys.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("swept %d (%v) after the batch ended, want 1", n, err)
	}
}

func TestDispositionOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   string
		want   idempotency.Disposition
	}{
		{200, "", idempotency.Keep}, {201, "", idempotency.Keep},
		{404, "NOT_FOUND", idempotency.Keep}, {409, "PATH_EXISTS", idempotency.Keep},
		{412, "PRECONDITION_FAILED", idempotency.Keep}, {451, "CONTENT_BLOCKED", idempotency.Keep},
		{422, "SIZE_MISMATCH", idempotency.Keep}, {422, "PARTS_MISSING", idempotency.Keep},
		{422, "CHECKSUM_MISMATCH", idempotency.Release}, {408, "REQUEST_TIMEOUT", idempotency.Release},
		{429, "RATE_LIMITED", idempotency.Release}, {500, "INTERNAL", idempotency.Release},
		{503, "STORAGE_UNAVAILABLE", idempotency.Release}, {413, "PAYLOAD_TOO_LARGE", idempotency.Release}, {409, "OPERATION_IN_PROGRESS", idempotency.Release},
	} {
		if got := idempotency.DispositionOf(tc.status, tc.code); got != tc.want {
			t.Errorf("%d %s: %v, want %v", tc.status, tc.code, got, tc.want)
		}
	}
}
