package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// preparePuts prepares a put of each path (content: the path), every one
// decided against no file, as a group of new files is.
func preparePuts(t *testing.T, store *storage.Store, paths ...string) []*storage.PendingPut {
	t.Helper()
	out := make([]*storage.PendingPut, len(paths))
	for i, p := range paths {
		pp, err := store.PreparePutAgainst(context.Background(), put(p, false), strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = pp
	}
	return out
}

// applyPuts applies puts in one transaction, as a group commit does, and
// finishes each with how it ended.
func applyPuts(ctx context.Context, store *storage.Store, puts []*storage.PendingPut) ([]*agentfs.File, []bool, error) {
	var (
		files   []*agentfs.File
		created []bool
	)
	err := store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		files, created, err = store.ApplyPutsTx(ctx, tx, puts, make([]agentfs.Origin, len(puts)))
		return err
	})
	for _, p := range puts {
		p.Finish(ctx, err)
	}
	return files, created, err
}

// eventsOf lists the subject's events, "type path" each, in feed order.
func eventsOf(t *testing.T, store *storage.Store) string {
	t.Helper()
	evs, _, err := store.ListEvents(context.Background(), "s", agentfs.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+e.Path)
	}
	return strings.Join(got, ",")
}

// A group of new files is inserted where their paths are free, without a
// lookup first; a path that a file past its expiry still holds is decided
// under its lock (the expiry recorded, then a new file), and a path a live
// file took since the puts were decided refuses the group, which leaves
// nothing behind.
func TestApplyPutsInsertsWhereThePathIsFree(t *testing.T) {
	ctx := context.Background()

	t.Run("NewFilesAndAPathPastItsExpiry", func(t *testing.T) {
		store, _ := setup(t)
		old := mustCreate(t, store, "old.txt", "old", inTx).File
		if _, err := store.Pool().Exec(ctx, `UPDATE files SET expires_at = now() - interval '1 second' WHERE id = $1`, old.ID); err != nil {
			t.Fatal(err)
		}
		files, created, err := applyPuts(ctx, store, preparePuts(t, store, "a.txt", "old.txt", "b.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for i, path := range []string{"a.txt", "old.txt", "b.txt"} {
			f := files[i]
			if f == nil || !created[i] || f.Path != path || f.Version != 1 || f.ID == old.ID {
				t.Fatalf("put %d (%s): %+v created=%v, want a new file at version 1", i, path, f, created[i])
			}
		}
		want := "file.created old.txt,file.created a.txt,file.created b.txt,file.expired old.txt,file.created old.txt"
		if got := eventsOf(t, store); got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
	})

	t.Run("NewFilesAroundAReplaceKeepTheirOrder", func(t *testing.T) {
		store, _ := setup(t)
		r := mustCreate(t, store, "r.txt", "r1", inTx).File
		replace, err := store.PreparePutAgainst(ctx, put("r.txt", true), strings.NewReader("r2"), r)
		if err != nil {
			t.Fatal(err)
		}
		puts := preparePuts(t, store, "x.txt", "y.txt", "z.txt")
		files, created, err := applyPuts(ctx, store, []*storage.PendingPut{puts[0], replace, puts[1], puts[2]})
		if err != nil {
			t.Fatal(err)
		}
		if !created[0] || created[1] || files[1].ID != r.ID || files[1].Version != 2 || !created[2] || !created[3] {
			t.Fatalf("files %+v created %v, want x, y, z new and r.txt at version 2", files, created)
		}
		want := "file.created r.txt,file.created x.txt,file.replaced r.txt,file.created y.txt,file.created z.txt"
		if got := eventsOf(t, store); got != want {
			t.Fatalf("events %q, want the puts' order %q", got, want)
		}
	})

	t.Run("APathTakenSinceRefusesTheGroup", func(t *testing.T) {
		store, _ := setup(t)
		puts := preparePuts(t, store, "c.txt", "taken.txt")
		mustCreate(t, store, "taken.txt", "theirs", alone)
		_, _, err := applyPuts(ctx, store, puts)
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) {
			t.Fatalf("err %v, want PathExistsError", err)
		}
		if live, err := store.LivePaths(ctx, "s", []string{"c.txt"}); err != nil || len(live) != 0 {
			t.Fatalf("c.txt after the refused group: %v %v, want no file", live, err)
		}
		if got := eventsOf(t, store); got != "file.created taken.txt" {
			t.Fatalf("events %q, want only the other put's", got)
		}
	})
}
