package storage_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

func createCheckpoint(ctx context.Context, store *storage.Store, req agentfs.NewCheckpoint) (*agentfs.Checkpoint, error) {
	var c *agentfs.Checkpoint
	err := store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		c, err = store.CreateCheckpointTx(ctx, tx, req, agentfs.Origin{})
		return err
	})
	return c, err
}

// TestCheckpointNamesRace: checkpoints made at once with one name, one
// wins and every other gets CheckpointExistsError.
func TestCheckpointNamesRace(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	mustPut(t, store, "a.txt", "1", false)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = createCheckpoint(ctx, store, agentfs.NewCheckpoint{Subject: "s", Name: "before"})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		var exists *agentfs.CheckpointExistsError
		switch {
		case err == nil:
			won++
		case !errors.As(err, &exists):
			t.Errorf("a losing create: %v, want CheckpointExistsError", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d creates won, want exactly 1", won)
	}
	c, err := store.Checkpoint(ctx, "s", "before")
	if err != nil || c.Position != 1 {
		t.Fatalf("the checkpoint: %+v %v, want it at position 1", c, err)
	}
	if _, err := store.Checkpoint(ctx, "other", "before"); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("another subject's checkpoint: %v", err)
	}
	// Its event names no file, and the run ledger's feed shows it.
	events, _, err := store.ListEvents(ctx, "s", agentfs.EventFilter{Limit: 10})
	if err != nil || len(events) != 2 || events[1].Type != agentfs.EventCheckpointCreated || events[1].CheckpointID != c.ID || events[1].FileID != "" {
		t.Fatalf("events %+v %v, want file.created then checkpoint.created", events, err)
	}
}

// TestCheckpointsPinVersions: the sweeper's version retention, max
// versions and purge skip what a checkpoint kept, and sweep it once the
// checkpoint is gone.
func TestCheckpointsPinVersions(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	a := mustPut(t, store, "keep/a.txt", "a1", false)
	o := mustPut(t, store, "other/o.txt", "o1", false)
	if _, err := createCheckpoint(ctx, store, agentfs.NewCheckpoint{Subject: "s", Name: "c1", Prefix: "keep/"}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"a2", "a3"} {
		mustPut(t, store, "keep/a.txt", body, true)
	}
	mustPut(t, store, "other/o.txt", "o2", true)
	// Retention 0 and at most 1 version: everything non-current would go.
	n, err := store.SweepVersions(ctx, 0, 1)
	if err != nil || n != 2 {
		t.Fatalf("swept %d versions (%v), want 2: a.txt v2 and o.txt v1", n, err)
	}
	if _, err := store.Version(ctx, "s", a.ID, 1); err != nil {
		t.Fatalf("a.txt v1, current at the checkpoint, was swept: %v", err)
	}
	if _, err := store.Version(ctx, "s", o.ID, 1); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("o.txt v1 (outside the checkpoint's prefix): %v, want swept", err)
	}
	// A purge skips a deleted file the checkpoint keeps.
	if _, err := deleteFile(ctx, store, "s", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pool().Exec(ctx, `UPDATE files SET purge_after = now() - interval '1 second' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := store.PurgeDeleted(ctx); err != nil || n != 0 {
		t.Fatalf("purged %d (%v) while a checkpoint keeps the file", n, err)
	}
	deleteC1 := func() error {
		return store.WithTx(ctx, func(tx pgx.Tx) error {
			_, err := store.DeleteCheckpointTx(ctx, tx, "s", "c1", agentfs.Origin{})
			return err
		})
	}
	if err := deleteC1(); err != nil {
		t.Fatal(err)
	}
	if n, err := store.PurgeDeleted(ctx); err != nil || n != 1 {
		t.Fatalf("purged %d (%v) once the checkpoint is gone, want 1", n, err)
	}
	if err := deleteC1(); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
}
