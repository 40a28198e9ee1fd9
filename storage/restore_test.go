package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// TestRestoreItemRacesAWriter: a write to a file after its restore was
// planned fails the item with ErrPreconditionFailed and leaves the file as
// the writer left it; with force the item puts it back anyway; an item
// already applied changes nothing when it runs again.
func TestRestoreItemRacesAWriter(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	f := mustPut(t, store, "r/a.txt", "good", false)
	good := pointNow(t, store, "s")
	mustPut(t, store, "r/a.txt", "bad", true)
	items, changes, err := store.RestorePlan(ctx, "s", agentfs.DiffRequest{From: good, To: pointNow(t, store, "s"), Prefix: "r/"}, false)
	if err != nil || len(items) != 1 || len(changes) != 1 || items[0].FileID != f.ID || items[0].Undo.Version != 1 {
		t.Fatalf("plan %+v %+v (%v)", items, changes, err)
	}
	mustPut(t, store, "r/a.txt", "the writer's", true) // after the plan
	apply := func(u agentfs.Undo) (*agentfs.File, error) {
		var out *agentfs.File
		err := store.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = store.RestoreToTx(ctx, tx, "s", f.ID, u, agentfs.Origin{})
			return err
		})
		return out, err
	}
	if _, err := apply(*items[0].Undo); !errors.Is(err, agentfs.ErrPreconditionFailed) {
		t.Fatalf("restore item after a write: %v, want ErrPreconditionFailed", err)
	}
	if got := liveSHA(t, store, f.ID); got != hexSHA([]byte("the writer's")) {
		t.Fatalf("the failed item changed the file: %s", got)
	}
	forced := *items[0].Undo
	forced.Force = true
	out, err := apply(forced)
	if err != nil || out.SHA256 != hexSHA([]byte("good")) || out.Version != 4 {
		t.Fatalf("forced restore item: %+v %v", out, err)
	}
	again, err := apply(forced)
	if err != nil || again.Version != 4 {
		t.Fatalf("the item run again: %+v %v (want no new version)", again, err)
	}
}

func liveSHA(t *testing.T, store *storage.Store, id string) string {
	t.Helper()
	f, err := store.File(context.Background(), "s", id)
	if err != nil {
		t.Fatal(err)
	}
	return f.SHA256
}
