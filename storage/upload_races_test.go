package storage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// setupLeases opens a store whose complete lease is lease (a part's is a
// third of it). A lease of an hour is never renewed during a test: its
// holder behaves like a paused process.
func setupLeases(t *testing.T, lease time.Duration) *storage.Store {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.UploadCompleteLease = lease
	return storagetest.OpenConfig(t, cfg)
}

// racingSession opens a one-part session of subject "s" at path holding
// content, with its part sent.
func racingSession(t *testing.T, store *storage.Store, path, content string) *agentfs.Upload {
	t.Helper()
	u := createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: path, SizeBytes: int64(len(content)),
		ContentType: "text/plain", PartSize: agentfs.MinPartSize, TTL: time.Hour})
	putPart(t, store, u.ID, 1, content)
	return u
}

// expectBusy fails unless err is an *agentfs.UploadBusyError whose wait is
// a whole number of seconds from 1 to most.
func expectBusy(t *testing.T, err error, most time.Duration) {
	t.Helper()
	var busy *agentfs.UploadBusyError
	if !errors.As(err, &busy) {
		t.Fatalf("got %v, want the session busy", err)
	}
	if busy.RetryAfter < time.Second || busy.RetryAfter > most || busy.RetryAfter%time.Second != 0 {
		t.Fatalf("busy %q for %v, want 1 s to %v in whole seconds", busy.Reason, busy.RetryAfter, most)
	}
}

// commitComplete commits a prepared complete as the admission core does.
func commitComplete(ctx context.Context, store *storage.Store, pc *storage.PendingComplete) (f *agentfs.File, err error) {
	err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
		f, _, err = pc.Apply(ctx, tx, agentfs.Origin{})
		return err
	})
	pc.Finish(ctx, err)
	return f, err
}

// recordPart records a sent part as the admission core does.
func recordPart(ctx context.Context, store *storage.Store, p *storage.PendingPart) error {
	err := store.WithTx(ctx, func(tx pgx.Tx) error { return p.Apply(ctx, tx) })
	p.Finish(ctx, err)
	return err
}

func sessionStatus(t *testing.T, store *storage.Store, id string) *agentfs.Upload {
	t.Helper()
	u, err := store.Upload(context.Background(), "s", id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// mustPrepare prepares the complete of session id, failing the test when
// it cannot.
func mustPrepare(t *testing.T, store *storage.Store, id string) *storage.PendingComplete {
	t.Helper()
	pc, err := store.PrepareComplete(context.Background(), "s", id, agentfs.CompleteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// completesWith completes session id and checks the file it makes holds
// want; what names the step in the failure.
func completesWith(t *testing.T, store *storage.Store, id, want, what string) {
	t.Helper()
	f, _, err := completeUpload(context.Background(), store, "s", id, agentfs.CompleteRequest{})
	if err != nil || fileContent(t, store, f) != want {
		t.Fatalf("%s: %v", what, err)
	}
}

// fileContent reads a file's bytes and checks its sha256 says so.
func fileContent(t *testing.T, store *storage.Store, f *agentfs.File) string {
	t.Helper()
	r, err := store.OpenBlob(context.Background(), f.BlobKey, 0, f.SizeBytes)
	b := testkit.ReadAll(t, r, err)
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
		t.Fatalf("file %s: sha256 %s does not name its bytes", f.ID, f.SHA256)
	}
	return string(b)
}

func TestUploadCompleteLease(t *testing.T) {
	ctx := context.Background()

	t.Run("RenewedWhileASlowCompleteRuns", func(t *testing.T) {
		store := setupLeases(t, 3*time.Second) // renewed every second
		u := racingSession(t, store, "slow.txt", "slow bytes")
		pc := mustPrepare(t, store, u.ID)
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		storagetest.Eventually(t, 10*time.Second, "the running complete to renew its lapsed lease", func() bool {
			var live bool
			err := store.Pool().QueryRow(ctx, `SELECT completing_until > now() FROM uploads WHERE id = $1`, u.ID).Scan(&live)
			return err == nil && live
		})
		_, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		expectBusy(t, err, 3*time.Second)
		f, err := commitComplete(ctx, store, pc)
		if err != nil || fileContent(t, store, f) != "slow bytes" {
			t.Fatalf("the renewed complete did not commit: %v", err)
		}
		var until *time.Time
		if err := store.Pool().QueryRow(ctx, `SELECT completing_until FROM uploads WHERE id = $1`, u.ID).Scan(&until); err != nil || until != nil {
			t.Fatalf("a completed session keeps a lease: %v %v", until, err)
		}
	})

	t.Run("LapsedLeaseIsTakenOverAndTheLateCompleteCommitsNothing", func(t *testing.T) {
		store := setupLeases(t, time.Hour)
		u := racingSession(t, store, "late.txt", "late bytes")
		late := mustPrepare(t, store, u.ID)
		_, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		expectBusy(t, err, time.Hour)
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		taker, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		if err != nil {
			t.Fatalf("a lapsed complete was not taken over: %v", err)
		}
		if _, err := commitComplete(ctx, store, late); !errors.Is(err, agentfs.ErrUploadCompleting) {
			t.Fatalf("the late complete committed: %v", err)
		}
		if got := sessionStatus(t, store, u.ID); got.Status != agentfs.UploadCompleting {
			t.Fatalf("the late complete's end left the session %s, not the taker's", got.Status)
		}
		f, err := commitComplete(ctx, store, taker)
		if err != nil || fileContent(t, store, f) != "late bytes" {
			t.Fatalf("the taker could not commit: %v", err)
		}
		if got := sessionStatus(t, store, u.ID); got.Status != agentfs.UploadCompleted || got.FileID != f.ID {
			t.Fatalf("session %s with file %q", got.Status, got.FileID)
		}
		files, err := store.ListFiles(ctx, "s", agentfs.FileFilter{Path: "late.txt", IncludeDeleted: true, Limit: 10})
		if err != nil || len(files) != 1 {
			t.Fatalf("%d files at the path (%v)", len(files), err)
		}
	})

	t.Run("LapsedLeaseLetsPartsInAndTheLateCompleteCommitsNothing", func(t *testing.T) {
		store := setupLeases(t, time.Hour)
		u := racingSession(t, store, "reopened.txt", "old bytes!")
		late := mustPrepare(t, store, u.ID)
		_, err := sendPart(ctx, store, "s", u.ID, 1, "new bytes!")
		expectBusy(t, err, time.Hour)
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		if _, err := sendPart(ctx, store, "s", u.ID, 1, "old bytes!"); err != nil {
			t.Fatalf("a part to a session whose complete died: %v", err)
		}
		if _, err := commitComplete(ctx, store, late); !errors.Is(err, agentfs.ErrUploadCompleting) {
			t.Fatalf("the late complete committed: %v", err)
		}
		completesWith(t, store, u.ID, "old bytes!", "complete after the takeover")
	})

	t.Run("AbortWaitsForALiveCompleteNotForALapsedOne", func(t *testing.T) {
		store := setupLeases(t, time.Hour)
		u := racingSession(t, store, "abort.txt", "abort me")
		pc := mustPrepare(t, store, u.ID)
		abort := func() error {
			return store.WithTx(ctx, func(tx pgx.Tx) error {
				_, _, err := store.AbortUploadTx(ctx, tx, "s", u.ID)
				return err
			})
		}
		expectBusy(t, abort(), time.Hour)
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		if err := abort(); err != nil {
			t.Fatalf("abort of a session whose complete died: %v", err)
		}
		if _, err := commitComplete(ctx, store, pc); !errors.Is(err, agentfs.ErrUploadCompleting) {
			t.Fatalf("the late complete committed an aborted session: %v", err)
		}
		if got := sessionStatus(t, store, u.ID); got.Status != agentfs.UploadAborted {
			t.Fatalf("session %s", got.Status)
		}
	})
}

func TestUploadPartsRacingCompletes(t *testing.T) {
	ctx := context.Background()

	t.Run("APartOnItsWayHoldsOffTheComplete", func(t *testing.T) {
		store := setupLeases(t, 3*time.Second) // a part's lease is 1 s
		u := createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: "inflight.txt", SizeBytes: 10,
			ContentType: "text/plain", PartSize: agentfs.MinPartSize, TTL: time.Hour})
		body, w := io.Pipe()
		sent := make(chan error, 1)
		go func() {
			p, err := store.SendPart(ctx, "s", u.ID, 1, body, 10, nil)
			if err == nil {
				err = recordPart(ctx, store, p)
			}
			sent <- err
		}()
		storagetest.Eventually(t, 10*time.Second, "the part to hold its session", func() bool {
			var n int
			return store.Pool().QueryRow(ctx, `SELECT count(*) FROM upload_part_leases WHERE upload_id = $1`, u.ID).Scan(&n) == nil && n == 1
		})
		// Without the part's lease this complete would take a part list
		// without part 1 and answer PARTS_MISSING.
		_, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		expectBusy(t, err, time.Second)
		if _, err := io.WriteString(w, "0123456789"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if err := <-sent; err != nil {
			t.Fatalf("the part on its way: %v", err)
		}
		var leases int
		if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM upload_part_leases`).Scan(&leases); err != nil || leases != 0 {
			t.Fatalf("%d part leases left (%v)", leases, err)
		}
		completesWith(t, store, u.ID, "0123456789", "complete after the part")
	})

	t.Run("APartWhileCompletingIsToldToRetryThenCompleted", func(t *testing.T) {
		store := setupLeases(t, 3*time.Second)
		u := racingSession(t, store, "completing.txt", "0123456789")
		pc := mustPrepare(t, store, u.ID)
		_, err := sendPart(ctx, store, "s", u.ID, 1, "0123456789")
		expectBusy(t, err, 3*time.Second)
		if _, err := commitComplete(ctx, store, pc); err != nil {
			t.Fatal(err)
		}
		_, err = sendPart(ctx, store, "s", u.ID, 1, "0123456789")
		var state *agentfs.UploadStateError
		if !errors.As(err, &state) || state.Status != agentfs.UploadCompleted {
			t.Fatalf("a part after the complete committed: %v", err)
		}
	})

	t.Run("ALapsedPartLeaseDoesNotHoldOffTheComplete", func(t *testing.T) {
		store := setupLeases(t, time.Hour) // a part's lease of 20 min, never renewed here
		u := racingSession(t, store, "stalled.txt", "0123456789")
		stalled, err := store.SendPart(ctx, "s", u.ID, 1, strings.NewReader("0123456789"), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		expectBusy(t, err, 20*time.Minute)
		seed(t, store, `UPDATE upload_part_leases SET lease_until = now() - interval '1 second' WHERE upload_id = $1`, u.ID)
		pc, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		if err != nil {
			t.Fatalf("a dead part's lease held the complete off: %v", err)
		}
		expectBusy(t, recordPart(ctx, store, stalled), time.Hour)
		f, err := commitComplete(ctx, store, pc)
		if err != nil || fileContent(t, store, f) != "0123456789" {
			t.Fatalf("complete: %v", err)
		}
	})

	t.Run("CompletesOfOnePathTakeTurns", func(t *testing.T) {
		store := setupLeases(t, 3*time.Second)
		first := racingSession(t, store, "turns.txt", "first")
		second := racingSession(t, store, "turns.txt", "second")
		pc := mustPrepare(t, store, first.ID)
		_, err := store.PrepareComplete(ctx, "s", second.ID, agentfs.CompleteRequest{})
		expectBusy(t, err, 3*time.Second)
		if got := sessionStatus(t, store, second.ID); got.Status != agentfs.UploadPending || got.Assembled {
			t.Fatalf("the waiting session is %s, assembled %v", got.Status, got.Assembled)
		}
		winner, err := commitComplete(ctx, store, pc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.PrepareComplete(ctx, "s", second.ID, agentfs.CompleteRequest{})
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) || exists.ExistingFileID != winner.ID {
			t.Fatalf("the second complete: %v", err)
		}
		// Decided before its parts were assembled: it still takes parts.
		if got := sessionStatus(t, store, second.ID); got.Status != agentfs.UploadPending || got.Assembled {
			t.Fatalf("the loser is %s, assembled %v", got.Status, got.Assembled)
		}
		putPart(t, store, second.ID, 1, "second")
		replace := true
		f, _, err := completeUpload(ctx, store, "s", second.ID, agentfs.CompleteRequest{Replace: &replace})
		if err != nil || f.ID != winner.ID || fileContent(t, store, f) != "second" {
			t.Fatalf("the loser completed as a replace: %v", err)
		}
	})

	t.Run("ALapsedCompleteOfThePathDoesNotHoldOffAnother", func(t *testing.T) {
		store := setupLeases(t, time.Hour)
		dead := racingSession(t, store, "dead.txt", "dead")
		live := racingSession(t, store, "dead.txt", "live")
		mustPrepare(t, store, dead.ID)
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, dead.ID)
		completesWith(t, store, live.ID, "live", "complete next to a dead one")
	})

	t.Run("AnAssembledSessionTakesOnlyTheSameBytes", func(t *testing.T) {
		store := setupLeases(t, 3*time.Second)
		u := racingSession(t, store, "assembled.txt", "0123456789")
		pc := mustPrepare(t, store, u.ID)
		// A file takes the path after the complete decided, before it
		// commits: the complete fails late, its parts already assembled.
		p, err := store.PreparePut(ctx, agentfs.Put{Subject: "s", Path: "assembled.txt", ContentType: "text/plain", Size: 5}, strings.NewReader("other"))
		if err != nil {
			t.Fatal(err)
		}
		holder, _, err := p.CommitAlone(ctx, agentfs.Origin{})
		p.Finish(ctx, err)
		if err != nil {
			t.Fatal(err)
		}
		var exists *agentfs.PathExistsError
		if _, err := commitComplete(ctx, store, pc); !errors.As(err, &exists) {
			t.Fatalf("the late complete: %v", err)
		}
		if got := sessionStatus(t, store, u.ID); got.Status != agentfs.UploadPending || !got.Assembled {
			t.Fatalf("session %s, assembled %v", got.Status, got.Assembled)
		}
		again, err := sendPart(ctx, store, "s", u.ID, 1, "0123456789")
		if sum := sha256.Sum256([]byte("0123456789")); err != nil || again.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("the same bytes again: %+v %v", again, err)
		}
		_, err = sendPart(ctx, store, "s", u.ID, 1, "9876543210")
		var settled *agentfs.PartAssembledError
		if !errors.As(err, &settled) || settled.Number != 1 {
			t.Fatalf("other bytes for an assembled part: %v", err)
		}
		replace := true
		f, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{Replace: &replace})
		if err != nil || f.ID != holder.ID || fileContent(t, store, f) != "0123456789" {
			t.Fatalf("complete of the assembled session: %v", err)
		}
	})
}

// TestUploadAssemblyNotRecorded: a complete that died after S3 assembled
// the parts and before it could record so leaves a pending session whose
// multipart upload is gone. A part sent to it is told the truth (retry,
// then compared with the part assembled), never that the session was
// aborted.
func TestUploadAssemblyNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := storagetest.Config(t)
	store := storagetest.OpenConfig(t, cfg)
	content := strings.Repeat("assemble", agentfs.MinPartSize/8) // one part of 5 MiB: S3 may drop the connection mid-body
	u := racingSession(t, store, "unrecorded.bin", content)
	u = sessionStatus(t, store, u.ID)
	core := minio.Core{Client: storagetest.S3(t, cfg)}
	if _, err := core.CompleteMultipartUpload(ctx, cfg.S3Bucket, u.BlobKey, u.S3UploadID,
		[]minio.CompletePart{{PartNumber: 1, ETag: u.Parts[0].ETag}}, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := sendPart(ctx, store, "s", u.ID, 1, content)
	expectBusy(t, err, time.Second)
	if got := sessionStatus(t, store, u.ID); got.Status != agentfs.UploadPending || !got.Assembled {
		t.Fatalf("session %s, assembled %v", got.Status, got.Assembled)
	}
	if _, err := sendPart(ctx, store, "s", u.ID, 1, content); err != nil {
		t.Fatalf("the same bytes again: %v", err)
	}
	_, err = sendPart(ctx, store, "s", u.ID, 1, strings.Repeat("x", len(content)))
	var settled *agentfs.PartAssembledError
	if !errors.As(err, &settled) {
		t.Fatalf("other bytes: %v", err)
	}
	completesWith(t, store, u.ID, content, "complete")
}
