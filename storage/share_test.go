package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// readBlob is the content of the blob behind f, or the error of reading it.
func readBlob(ctx context.Context, store *storage.Store, f *agentfs.File) (string, error) {
	r, err := store.OpenBlob(ctx, f.BlobKey, 0, f.SizeBytes)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// copyFile prepares and commits a copy of srcID at path, as a batch copy
// item does.
func copyFile(ctx context.Context, store *storage.Store, srcID, path string) (*agentfs.File, error) {
	p, err := store.PrepareCopy(ctx, srcID, put(path, false))
	if err != nil {
		return nil, err
	}
	var f *agentfs.File
	err = store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		f, _, err = p.Apply(ctx, tx, agentfs.Origin{})
		return err
	})
	p.Finish(ctx, err)
	return f, err
}

// purgeNow makes a deleted file due for purge.
func purgeNow(t *testing.T, b *testBundle, id string) {
	t.Helper()
	storagetest.Exec(t, b.cfg, `UPDATE files SET purge_after = now() - interval '1 second' WHERE id = $1`, id)
}

func TestCopySharesTheSourceBlob(t *testing.T) {
	ctx := context.Background()

	t.Run("WritesNoObjectAndKeepsTheSourceContent", func(t *testing.T) {
		store, b := setup(t)
		src, err := putFile(ctx, store, put("src.txt", false), strings.NewReader("shared bytes"), alone)
		if err != nil {
			t.Fatal(err)
		}
		var copies []*agentfs.File
		for _, path := range []string{"c1.txt", "c2.txt", "c3.txt"} {
			f, err := copyFile(ctx, store, src.File.ID, path)
			if err != nil {
				t.Fatalf("copy to %s: %v", path, err)
			}
			copies = append(copies, f)
		}
		if keys := storagetest.ObjectKeys(t, b.cfg); len(keys) != 1 {
			t.Fatalf("%d objects after three copies, want the source's alone: %v", len(keys), keys)
		}
		for _, f := range copies {
			if f.ID == src.File.ID || f.BlobKey != src.File.BlobKey || f.SHA256 != src.File.SHA256 ||
				f.SizeBytes != src.File.SizeBytes || f.Version != 1 || f.ETag() == "" {
				t.Fatalf("copy %+v of %+v", f, src.File)
			}
			if got, err := readBlob(ctx, store, f); err != nil || got != "shared bytes" {
				t.Fatalf("copy %s reads %q %v", f.Path, got, err)
			}
		}
		tags, err := store.BlobTags(ctx, src.File.BlobKey)
		if err != nil || tags["file-id"] != src.File.ID {
			t.Fatalf("the shared blob's tags became %v (%v); they name the file that wrote it", tags, err)
		}
	})

	t.Run("DeletingAndPurgingTheSourceKeepsTheCopy", func(t *testing.T) {
		store, b := setup(t)
		src, err := putFile(ctx, store, put("src.txt", false), strings.NewReader("kept"), alone)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := copyFile(ctx, store, src.File.ID, "copy.txt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deleteFile(ctx, store, "s", src.File.ID); err != nil {
			t.Fatal(err)
		}
		purgeNow(t, b, src.File.ID)
		if n, err := store.PurgeDeleted(ctx); err != nil || n != 1 {
			t.Fatalf("purge: %d %v", n, err)
		}
		if _, err := store.SweepBlobs(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := readBlob(ctx, store, cp); err != nil || got != "kept" {
			t.Fatalf("the copy reads %q %v after its source was purged", got, err)
		}
		// Once the copy goes too, nothing references the blob: it is swept.
		if _, err := deleteFile(ctx, store, "s", cp.ID); err != nil {
			t.Fatal(err)
		}
		purgeNow(t, b, cp.ID)
		if _, err := store.PurgeDeleted(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := storagetest.ObjectKeys(t, b.cfg); len(keys) != 0 {
			t.Fatalf("objects %v left once every file sharing the blob was purged", keys)
		}
	})

	t.Run("ACopyOfASourcePurgedBeforeItCommitsFails", func(t *testing.T) {
		store, b := setup(t)
		src, err := putFile(ctx, store, put("src.txt", false), strings.NewReader("gone"), alone)
		if err != nil {
			t.Fatal(err)
		}
		p, err := store.PrepareCopy(ctx, src.File.ID, put("copy.txt", false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deleteFile(ctx, store, "s", src.File.ID); err != nil {
			t.Fatal(err)
		}
		purgeNow(t, b, src.File.ID)
		if _, err := store.PurgeDeleted(ctx); err != nil {
			t.Fatal(err)
		}
		err = store.WithTx(ctx, func(tx pgx.Tx) error { _, _, err := p.Apply(ctx, tx, agentfs.Origin{}); return err })
		p.Finish(ctx, err)
		if !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("a copy of a purged source committed: %v", err)
		}
	})
}

// TestASweepWaitsForAWriteSharingABlob runs each write that shares an
// existing version's blob (a copy, a revert) up to the end of its
// transaction, then the sweep that would remove that version (the purge of
// the source, the version sweep) and a blob sweep before the write
// commits, and one after: the version's removal waits for the write to
// commit, so each blob sweep finds the version or the write's row and
// keeps the blob. Without the wait, the blob went between the version's
// removal and the write's commit, and the write's file pointed at nothing.
func TestASweepWaitsForAWriteSharingABlob(t *testing.T) {
	ctx := context.Background()
	type shared struct {
		name string
		// prepare makes the source and returns the write, to run in tx,
		// and the sweep that removes the version the write shares.
		prepare func(t *testing.T, store *storage.Store, b *testBundle) (write func(tx pgx.Tx) (*agentfs.File, error), sweep func() error)
	}
	// source puts src.txt and returns its id.
	source := func(t *testing.T, store *storage.Store) string {
		t.Helper()
		src, err := putFile(ctx, store, put("src.txt", false), strings.NewReader("content"), alone)
		if err != nil {
			t.Fatal(err)
		}
		return src.File.ID
	}
	// copyOf prepares a copy of file id to copy.txt and returns its write.
	copyOf := func(t *testing.T, store *storage.Store, id string) func(pgx.Tx) (*agentfs.File, error) {
		t.Helper()
		p, err := store.PrepareCopy(ctx, id, put("copy.txt", false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Finish(ctx, nil) })
		return func(tx pgx.Tx) (*agentfs.File, error) {
			f, _, err := p.Apply(ctx, tx, agentfs.Origin{})
			return f, err
		}
	}
	// supersede replaces src.txt, so that its first version is one a
	// version sweep removes.
	supersede := func(t *testing.T, store *storage.Store) func() error {
		t.Helper()
		if _, err := putFile(ctx, store, put("src.txt", true), strings.NewReader("newer"), alone); err != nil {
			t.Fatal(err)
		}
		return func() error {
			_, err := store.SweepVersions(ctx, time.Hour, 1)
			return err
		}
	}
	for _, tc := range []shared{
		{"CopyAgainstAPurge", func(t *testing.T, store *storage.Store, b *testBundle) (func(pgx.Tx) (*agentfs.File, error), func() error) {
			id := source(t, store)
			write := copyOf(t, store, id)
			if _, err := deleteFile(ctx, store, "s", id); err != nil {
				t.Fatal(err)
			}
			purgeNow(t, b, id)
			return write, func() error {
				_, err := store.PurgeDeleted(ctx)
				return err
			}
		}},
		{"CopyAgainstAVersionSweep", func(t *testing.T, store *storage.Store, b *testBundle) (func(pgx.Tx) (*agentfs.File, error), func() error) {
			write := copyOf(t, store, source(t, store))
			return write, supersede(t, store)
		}},
		{"RevertAgainstAVersionSweep", func(t *testing.T, store *storage.Store, b *testBundle) (func(pgx.Tx) (*agentfs.File, error), func() error) {
			id := source(t, store)
			return func(tx pgx.Tx) (*agentfs.File, error) {
				f, _, err := store.RevertFileTx(ctx, tx, agentfs.Revert{Subject: "s", FileID: id, Version: 1}, agentfs.Origin{})
				return f, err
			}, supersede(t, store)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, b := setup(t)
			write, sweep := tc.prepare(t, store, b)
			swept := make(chan error, 1)
			var f *agentfs.File
			err := store.WithTx(ctx, func(tx pgx.Tx) (err error) {
				if f, err = write(tx); err != nil {
					return err
				}
				var pid int
				if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					return err
				}
				go func() { swept <- sweep() }()
				// The sweep either finishes (it did not wait) or waits for
				// this transaction.
				storagetest.Eventually(t, 20*time.Second, "the sweep to end or to wait for the write", func() bool {
					if len(swept) > 0 {
						return true
					}
					var waiting bool
					err := store.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
						WHERE $1 = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting)
					return err == nil && waiting
				})
				// A blob sweep now, before the write commits, must still
				// find the version the write shares.
				_, err = store.SweepBlobs(ctx, 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-swept; err != nil {
				t.Fatal(err)
			}
			if _, err := store.SweepBlobs(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if got, err := readBlob(ctx, store, f); err != nil || got != "content" {
				t.Fatalf("the write's file %s reads %q %v after the sweeps", f.ID, got, err)
			}
		})
	}
}
