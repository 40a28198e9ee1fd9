package storage_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestSweepsRemoveOnlyWhatNothingReferences builds every kind of blob a
// store holds — live, superseded (an earlier version), of a deleted file
// still kept, of a file due for purge, of a pending upload session, and an
// orphan — then sweeps with no grace: the purged and orphaned ones go; the
// superseded one stays while its version is kept and goes with it.
func TestSweepsRemoveOnlyWhatNothingReferences(t *testing.T) {
	store, b := setup(t)
	ctx := context.Background()
	mustPut := func(path, body string, replace bool) putResult {
		t.Helper()
		res, err := putFile(ctx, store, put(path, replace), strings.NewReader(body), alone)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	live := mustPut("live.txt", "live", false).File
	old := mustPut("replaced.txt", "v1", false).File
	replaced := mustPut("replaced.txt", "v2", true).File
	kept := mustPut("kept.txt", "kept", false).File
	if _, err := deleteFile(ctx, store, "s", kept.ID); err != nil {
		t.Fatal(err)
	}
	purged := mustPut("purged.txt", "purged", false).File
	if _, err := deleteFile(ctx, store, "s", purged.ID); err != nil {
		t.Fatal(err)
	}
	err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE files SET purge_after = now() - interval '1 second' WHERE id = $1`, purged.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	up := createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: "up.bin", SizeBytes: 3,
		ContentType: "application/octet-stream", PartSize: 5 << 20, TTL: time.Hour})
	putPart(t, store, up.ID, 1, "abc")
	s3 := storagetest.S3(t, b.cfg)
	if _, err := s3.PutObject(ctx, b.cfg.S3Bucket, "blobs/orphan", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	if n, err := store.PurgeDeleted(ctx); err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want 1", n, err)
	}
	if _, err := store.File(ctx, "s", purged.ID); err == nil {
		t.Fatal("the purged file's row is still there")
	}
	if n, err := store.SweepBlobs(ctx, 0); err != nil || n != 1 {
		t.Fatalf("blob sweep removed %d (%v), want the orphan alone", n, err)
	}
	keys := strings.Join(storagetest.ObjectKeys(t, b.cfg), " ")
	for _, gone := range []string{purged.BlobKey, "blobs/orphan"} {
		if strings.Contains(keys, gone) {
			t.Errorf("%s survived the sweep", gone)
		}
	}
	for _, f := range []struct{ key, want string }{{live.BlobKey, "live"}, {replaced.BlobKey, "v2"}, {kept.BlobKey, "kept"},
		{old.BlobKey, "v1"}} {
		r, err := store.OpenBlob(ctx, f.key, 0, int64(len(f.want)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(got) != f.want {
			t.Errorf("referenced blob %s: %q %v", f.key, got, err)
		}
	}
	f, _, err := completeUpload(ctx, store, "s", up.ID, agentfs.CompleteRequest{})
	if err != nil || f.SizeBytes != 3 {
		t.Fatalf("the pending upload lost its parts to the sweep: %v", err)
	}

	// Once its version is dropped, the superseded blob goes too.
	if n, err := store.SweepVersions(ctx, 0, 100); err != nil || n != 1 {
		t.Fatalf("version sweep removed %d (%v), want version 1 of replaced.txt", n, err)
	}
	if n, err := store.SweepBlobs(ctx, 0); err != nil || n != 1 {
		t.Fatalf("blob sweep removed %d (%v), want the superseded blob", n, err)
	}
	if strings.Contains(strings.Join(storagetest.ObjectKeys(t, b.cfg), " "), old.BlobKey) {
		t.Error("the superseded blob survived the sweep after its version")
	}
}

// TestSweepKeepsRecentBlobs proves the grace period protects writes in
// flight, whose blobs no row references yet.
func TestSweepKeepsRecentBlobs(t *testing.T) {
	store, b := setup(t)
	ctx := context.Background()
	if _, err := storagetest.S3(t, b.cfg).PutObject(ctx, b.cfg.S3Bucket, "blobs/in-flight", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := store.SweepBlobs(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("swept %d (%v) within the grace period", n, err)
	}
}
