package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func TestWatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := storagetest.Config(t)
	store := storagetest.OpenConfig(t, cfg)
	at := func(pos int64) agentfs.EventCursor { return agentfs.EventCursor{Subject: "w", Position: pos} }
	paths := func(subject, session string) []string {
		t.Helper()
		ws, err := store.Watches(ctx, subject, session)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s@%d", w.Path, w.After.Position))
		}
		return out
	}

	t.Run("KeptPerSubjectAndSession", func(t *testing.T) {
		for _, w := range []agentfs.Watch{{Session: "s1", Path: "a.txt", After: at(3)}, {Session: "s1", Path: "docs/", After: at(4)},
			{Session: "s2", Path: "a.txt", After: at(5)}} {
			if err := store.AddWatch(ctx, "w", w); err != nil {
				t.Fatal(err)
			}
		}
		// Watching again keeps the first watch's position.
		if err := store.AddWatch(ctx, "w", agentfs.Watch{Session: "s1", Path: "a.txt", After: at(9)}); err != nil {
			t.Fatal(err)
		}
		if got := paths("w", "s1"); fmt.Sprint(got) != "[a.txt@3 docs/@4]" {
			t.Fatalf("s1 watches %v", got)
		}
		if got := paths("other", "s1"); len(got) != 0 {
			t.Fatalf("another subject sees %v", got)
		}
		if err := store.RemoveWatch(ctx, "w", "s1", "a.txt"); err != nil {
			t.Fatal(err)
		}
		if err := store.RemoveWatch(ctx, "w", "s1", "never.txt"); err != nil {
			t.Fatal(err)
		}
		if got := paths("w", "s1"); fmt.Sprint(got) != "[docs/@4]" {
			t.Fatalf("s1 watches %v after removing a.txt", got)
		}
		if n, err := store.EndWatches(ctx, "w", "s1"); err != nil || n != 1 {
			t.Fatalf("end: %d %v", n, err)
		}
		if got := paths("w", "s2"); fmt.Sprint(got) != "[a.txt@5]" {
			t.Fatalf("ending s1 touched s2: %v", got)
		}
	})

	t.Run("BoundedPerSession", func(t *testing.T) {
		for i := range agentfs.MaxWatchesPerSession {
			if err := store.AddWatch(ctx, "many", agentfs.Watch{Session: "s", Path: fmt.Sprintf("f%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		err := store.AddWatch(ctx, "many", agentfs.Watch{Session: "s", Path: "one-more"})
		if !errors.Is(err, agentfs.ErrTooManyWatches) {
			t.Fatalf("watch %d: %v", agentfs.MaxWatchesPerSession+1, err)
		}
		if err := store.AddWatch(ctx, "many", agentfs.Watch{Session: "s", Path: "f7"}); err != nil {
			t.Fatalf("watching a watched path again at the bound: %v", err)
		}
		if err := store.AddWatch(ctx, "many", agentfs.Watch{Session: "other", Path: "f1"}); err != nil {
			t.Fatalf("another session: %v", err)
		}
	})

	t.Run("IdleSessionsAreSwept", func(t *testing.T) {
		for _, s := range []string{"idle", "seen"} {
			if err := store.AddWatch(ctx, "sweep", agentfs.Watch{Session: s, Path: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		storagetest.Exec(t, cfg, `UPDATE watches SET seen_at = now() - $1::interval WHERE subject = 'sweep'`,
			fmt.Sprintf("%d seconds", int(store.WatchRetention().Seconds())+60))
		if err := store.TouchWatches(ctx, "sweep", "seen"); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SweepWatches(ctx); err != nil {
			t.Fatal(err)
		}
		if len(paths("sweep", "idle")) != 0 || len(paths("sweep", "seen")) != 1 {
			t.Fatalf("after the sweep: idle %v, seen %v", paths("sweep", "idle"), paths("sweep", "seen"))
		}
	})
}
