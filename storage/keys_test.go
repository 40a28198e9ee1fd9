package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func setupKeys(t *testing.T, lease, retention time.Duration) *storage.Store {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.IdempotencyLease, cfg.IdempotencyRetention = lease, retention
	return storagetest.OpenConfig(t, cfg)
}

var request = idempotency.Request{Operation: "put", Target: "a.txt"}.Sum()

func complete(t *testing.T, store *storage.Store, c *storage.Claim, content string) error {
	t.Helper()
	return store.WithTx(context.Background(), func(tx pgx.Tx) error {
		return c.Complete(context.Background(), tx, []byte(content), idempotency.Outcome{Status: 201, Body: []byte(`{}`)}, idempotency.Sealed{})
	})
}

// seed runs one statement against the store's rows, to place them in the
// past instead of waiting for time to pass.
func seed(t *testing.T, store *storage.Store, sql string, args ...any) {
	t.Helper()
	if _, err := store.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("seed %q: %v", sql, err)
	}
}

func lapse(t *testing.T, store *storage.Store, key string) {
	t.Helper()
	seed(t, store, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, key)
}

func TestClaims(t *testing.T) {
	ctx := context.Background()

	t.Run("SecondRequestWaitsThenReplays", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		c, rec, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil || c == nil || rec != nil {
			t.Fatalf("first begin: %v %v %v", c, rec, err)
		}
		defer c.Close()
		var busy *agentfs.InProgressError
		if _, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{}); !errors.As(err, &busy) || busy.RetryAfter <= 0 {
			t.Fatalf("begin while running: %v", err)
		}
		var reused *agentfs.ConflictError
		if _, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", []byte("other"), storage.KeyOrigin{}); !errors.As(err, &reused) || reused.Key != "k" {
			t.Fatalf("begin of another request: %v", err)
		}
		if err := complete(t, store, c, "content"); err != nil {
			t.Fatal(err)
		}
		_, rec, err = store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil || rec == nil || !rec.Completed || string(rec.ContentHash) != "content" || rec.Outcome.Status != 201 {
			t.Fatalf("begin after completion: %+v %v", rec, err)
		}
	})

	t.Run("LapsedClaimIsTakenOverAndTheLateOwnerCannotCommit", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		paused, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		paused.Close() // a paused process renews nothing
		lapse(t, store, "k")
		taker, rec, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil || taker == nil || rec != nil {
			t.Fatalf("takeover: %v %v %v", taker, rec, err)
		}
		defer taker.Close()
		if err := complete(t, store, paused, "late"); !errors.Is(err, storage.ErrClaimLost) {
			t.Fatalf("the paused owner committed: %v", err)
		}
		if err := paused.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := complete(t, store, taker, "taker"); err != nil {
			t.Fatalf("the new owner could not commit: %v", err)
		}
		rec, err = store.Operation(ctx, "s", "k")
		if err != nil || string(rec.ContentHash) != "taker" {
			t.Fatalf("operation: %+v %v", rec, err)
		}
	})

	t.Run("RenewedLeaseIsNotTakenOver", func(t *testing.T) {
		store := setupKeys(t, time.Second, time.Hour) // renewed every third of a second
		c, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		lapse(t, store, "k")
		storagetest.Eventually(t, 10*time.Second, "the running claim to renew its lapsed lease", func() bool {
			var live bool
			err := store.Pool().QueryRow(ctx, `SELECT lease_expires_at > now() FROM idempotency_keys WHERE key = 'k'`).Scan(&live)
			return err == nil && live
		})
		var busy *agentfs.InProgressError
		if _, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{}); !errors.As(err, &busy) {
			t.Fatalf("a live claim was taken over: %v", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		c, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operation(ctx, "s", "k"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("released key still holds something: %v", err)
		}
		again, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", []byte("another request"), storage.KeyOrigin{})
		if err != nil || again == nil {
			t.Fatalf("begin after release: %v", err)
		}
		again.Close()
	})

	t.Run("EffectRollsBackWithItsRecord", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		c, _, err := store.BeginKey(ctx, "s", "k", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		boom := errors.New("effect failed after recording")
		err = store.WithTx(ctx, func(tx pgx.Tx) error {
			if err := c.Complete(ctx, tx, nil, idempotency.Outcome{Status: 201, Body: []byte(`{}`)}, idempotency.Sealed{}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		rec, err := store.Operation(ctx, "s", "k")
		if err != nil || rec.Completed {
			t.Fatalf("a rolled-back effect left a completed record: %+v %v", rec, err)
		}
	})

	t.Run("SweepPurgesExpiredRecordsOnly", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		done, _, _ := store.BeginKey(ctx, "s", "done", "POST", "/v1/files", request, storage.KeyOrigin{})
		if err := complete(t, store, done, "x"); err != nil {
			t.Fatal(err)
		}
		running, _, _ := store.BeginKey(ctx, "s", "running", "POST", "/v1/files", request, storage.KeyOrigin{})
		defer running.Close()
		seed(t, store, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'done'`)
		n, err := store.SweepKeys(ctx)
		if err != nil || n != 1 {
			t.Fatalf("sweep removed %d, err %v; want the expired record only", n, err)
		}
		if _, err := store.Operation(ctx, "s", "running"); err != nil {
			t.Fatalf("a live claim was swept: %v", err)
		}
	})

	t.Run("SweepRemovesClaimsAbandonedForTheRetention", func(t *testing.T) {
		store := setupKeys(t, 30*time.Second, time.Hour)
		dead, _, _ := store.BeginKey(ctx, "s", "dead", "POST", "/v1/files", request, storage.KeyOrigin{})
		dead.Close()
		seed(t, store, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '61 minutes' WHERE key = 'dead'`)
		if n, err := store.SweepKeys(ctx); err != nil || n != 1 {
			t.Fatalf("sweep removed %d, err %v; want the claim abandoned longer than the retention", n, err)
		}
	})
}

func TestSweepKeepsTheKeyOfARunningBatch(t *testing.T) {
	store := setupKeys(t, 30*time.Second, time.Hour)
	ctx := context.Background()
	c, _, err := store.BeginKey(ctx, "s", "batch-key", "POST", "/v1/batch", request, storage.KeyOrigin{})
	if err != nil {
		t.Fatal(err)
	}
	var b *agentfs.Batch
	err = store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		b, err = store.CreateBatchTx(ctx, tx, &agentfs.Batch{Subject: "s", Items: []agentfs.BatchItem{{Op: agentfs.OpDelete, FileID: "f"}}})
		if err != nil {
			return err
		}
		return c.Complete(ctx, tx, nil, idempotency.Outcome{Status: 202, Body: []byte(`{}`),
			Resource: idempotency.Resource{Object: "batch", ID: b.ID}}, idempotency.Sealed{})
	})
	if err != nil {
		t.Fatal(err)
	}
	seed(t, store, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'batch-key'`)
	if n, err := store.SweepKeys(ctx); err != nil || n != 0 {
		t.Fatalf("swept %d (%v) while the batch is queued", n, err)
	}
	seed(t, store, `UPDATE batches SET status = 'succeeded' WHERE id = $1`, b.ID)
	if n, err := store.SweepKeys(ctx); err != nil || n != 1 {
		t.Fatalf("swept %d (%v) after the batch ended, want 1", n, err)
	}
}

// TestMigrationBlanksPlainLinkRecords: a share link recorded before
// records kept secrets sealed held its url in plain text; the migration
// that brought sealing takes it out (null, named as withheld) and leaves
// every other record as it was.
func TestMigrationBlanksPlainLinkRecords(t *testing.T) {
	store := setupKeys(t, time.Minute, time.Hour)
	link := `{"id":"lnk_1","object":"link","file_id":"file_1","version":null,"url":"http://x/s/PlainSecret0123456789abc","expires_at":"2026-01-01T00:00:00Z","revoked_at":null,"created_at":"2026-01-01T00:00:00Z"}` + "\n"
	file := `{"id":"file_1","object":"file","url":"http://x/v1/files/file_1/content"}` + "\n"
	for key, row := range map[string][3]string{
		"link-old": {"POST", "/v1/files/:id/links", link},
		"put-old":  {"POST", "/v1/files", file},
		"revoke":   {"DELETE", "/v1/links/:id", link},
	} {
		seed(t, store, `INSERT INTO idempotency_keys (subject, key, request_hash, content_hash, method, route, status, fence,
				response_status, response_headers, response_body, completed_at, expires_at)
			VALUES ('alice', $1, '\x00', '\x00', $2, $3, 'completed', 1, 201, '{}', convert_to($4, 'UTF8'), now(), now() + interval '1 day')`,
			key, row[0], row[1], row[2])
	}
	sql, err := os.ReadFile("migrations/011_record_secrets.sql")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // as it ran, and again: nothing more changes
		seed(t, store, string(sql))
	}
	ctx := context.Background()
	rec, err := store.Operation(ctx, "alice", "link-old")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Outcome.Body, &body); err != nil || body["url"] != nil || body["id"] != "lnk_1" ||
		len(rec.Outcome.Secrets) != 1 || rec.Outcome.Secrets[0] != "url" || rec.Sealed.Data != nil ||
		strings.Contains(string(rec.Outcome.Body), "PlainSecret") {
		t.Fatalf("the old link record: %s, secrets %v (%v)", rec.Outcome.Body, rec.Outcome.Secrets, err)
	}
	for key, want := range map[string]string{"put-old": file, "revoke": link} {
		rec, err := store.Operation(ctx, "alice", key)
		if err != nil || string(rec.Outcome.Body) != want || rec.Outcome.Secrets != nil {
			t.Fatalf("%s changed: %s %v (%v)", key, rec.Outcome.Body, rec.Outcome.Secrets, err)
		}
	}
}
