package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestOneTransactionNumbersEveryEvent: the events of one transaction take
// consecutive positions in the order they were written, and file_states
// holds what was live at each of them, as when every event committed on
// its own (migration 025 numbers them a transaction at a time), with
// several events of one file in the transaction.
func TestOneTransactionNumbersEveryEvent(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	a := mustPut(t, store, "dir/a.txt", "a1", false)
	b := mustPut(t, store, "dir/b.txt", "b1", false)
	p0 := pointNow(t, store, "s")
	err := store.WithTx(ctx, func(tx pgx.Tx) error {
		if _, _, err := store.MoveFileTx(ctx, tx, agentfs.Move{Subject: "s", FileID: a.ID, Path: "dir/m.txt"}, agentfs.Origin{}); err != nil {
			return err
		}
		if _, _, err := store.DeleteFileTx(ctx, tx, "s", b.ID, "", agentfs.Origin{}); err != nil {
			return err
		}
		if _, _, err := store.DeleteFileTx(ctx, tx, "s", a.ID, "", agentfs.Origin{}); err != nil {
			return err
		}
		if _, _, err := store.RestoreFileTx(ctx, tx, "s", a.ID, agentfs.Origin{}); err != nil {
			return err
		}
		_, _, err := store.MoveFileTx(ctx, tx, agentfs.Move{Subject: "s", FileID: a.ID, Path: "dir/n.txt"}, agentfs.Origin{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p5 := pointNow(t, store, "s")
	if p5.Position != p0.Position+5 {
		t.Fatalf("the transaction's 5 events end at position %d, want %d", p5.Position, p0.Position+5)
	}
	at := func(k int64) agentfs.Point { return agentfs.Point{Position: p0.Position + k, At: time.Now()} }
	for k, want := range []string{
		"dir/a.txt@1 dir/b.txt@1", // p0
		"dir/b.txt@1 dir/m.txt@1", // moved
		"dir/m.txt@1",             // b deleted
		"",                        // a deleted
		"dir/m.txt@1",             // a restored
		"dir/n.txt@1",             // moved again
	} {
		if got := pathsAsOf(t, store, at(int64(k)), "dir/"); got != want {
			t.Errorf("as of p0+%d: %q, want %q", k, got, want)
		}
	}
	events, _, err := store.ListEvents(ctx, "s", agentfs.EventFilter{After: &agentfs.EventCursor{Subject: "s", Position: p0.Position, At: time.Now()}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	want := "file.moved file.deleted file.deleted file.restored file.moved"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("the transaction's events in position order: %s, want %s", got, want)
	}
}

// TestForkBound: a fork of more files than AGENTFS_FORK_MAX_FILES is
// refused, naming the bound, and writes nothing; one within it copies.
func TestForkBound(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.ForkMaxFiles = 2
	store := storagetest.OpenConfig(t, cfg)
	ctx := context.Background()
	for _, p := range []string{"big/a", "big/b", "big/c", "small/a", "small/b"} {
		mustPut(t, store, p, p, false)
	}
	fork := func(from, to string) (*agentfs.Fork, error) {
		var f *agentfs.Fork
		err := store.WithTx(ctx, func(tx pgx.Tx) (err error) {
			f, err = store.CreateForkTx(ctx, tx, agentfs.NewFork{Subject: "s", From: from, To: to}, pointNow(t, store, "s"), agentfs.Origin{})
			return err
		})
		return f, err
	}
	_, err := fork("big/", "big-copy/")
	var pe *agentfs.PointError
	if !errors.As(err, &pe) || pe.Field != "from" || !strings.Contains(pe.Reason, "at most 2 files (AGENTFS_FORK_MAX_FILES)") {
		t.Fatalf("a fork of 3 files under a bound of 2: %v, want a PointError on from naming the bound", err)
	}
	if got := pathsAsOf(t, store, pointNow(t, store, "s"), "big-copy/"); got != "" {
		t.Fatalf("the refused fork left %q", got)
	}
	f, err := fork("small/", "small-copy/")
	if err != nil || f.Files != 2 {
		t.Fatalf("a fork of 2 files under a bound of 2: %+v, %v", f, err)
	}
	if got := pathsAsOf(t, store, pointNow(t, store, "s"), "small-copy/"); got != "small-copy/a@1 small-copy/b@1" {
		t.Fatalf("the fork made %q", got)
	}
}
