package storage_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// follow reads the subject's feed from the start, following next cursors
// with waits, until it has want events or the deadline passes; it returns
// every event it was handed, in order.
func follow(t *testing.T, store *storage.Store, subject string, want int, pause func(page int)) []*agentfs.Event {
	t.Helper()
	ctx := context.Background()
	var got []*agentfs.Event
	filter := agentfs.EventFilter{Limit: 37} // pages that end mid-stream
	deadline := time.Now().Add(2 * time.Minute)
	for page := 0; len(got) < want; page++ {
		if time.Now().After(deadline) {
			t.Fatalf("the follower has %d of %d events after two minutes", len(got), want)
		}
		events, next, err := store.AwaitEvents(ctx, subject, filter, time.Second)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		got = append(got, events...)
		filter.After = &next
		if pause != nil {
			pause(page)
		}
	}
	return got
}

// allEvents is every event of the subject in the table, by id.
func allEvents(t *testing.T, store *storage.Store, subject string) map[string]bool {
	t.Helper()
	rows, err := store.Pool().Query(context.Background(), `SELECT id FROM events WHERE subject = $1`, subject)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// checkFeed holds what a follower got to the rows: each committed event
// exactly once, in feed order.
func checkFeed(t *testing.T, store *storage.Store, subject string, got []*agentfs.Event) {
	t.Helper()
	committed := allEvents(t, store, subject)
	seen := map[string]bool{}
	for i, e := range got {
		if seen[e.ID] {
			t.Fatalf("event %s handed out twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 {
			p, q := got[i-1].Position, e.Position
			if p.Xid > q.Xid || p.Xid == q.Xid && p.Seq >= q.Seq {
				t.Fatalf("events out of order at %d: %+v then %+v", i, p, q)
			}
		}
	}
	for id := range committed {
		if !seen[id] {
			t.Fatalf("committed event %s was skipped (the follower got %d of %d)", id, len(got), len(committed))
		}
	}
	if len(seen) != len(committed) {
		t.Fatalf("the follower got %d events, %d committed", len(seen), len(committed))
	}
}

func putAt(ctx context.Context, store *storage.Store, subject, path, body string) error {
	p := agentfs.Put{Subject: subject, Path: path, ContentType: "text/plain", Replace: true, Size: int64(len(body))}
	pending, err := store.PreparePut(ctx, p, strings.NewReader(body))
	if err != nil {
		return err
	}
	f, _, err := pending.CommitAlone(ctx, agentfs.Origin{})
	if f == nil && err == nil {
		err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
			_, _, err := pending.Apply(ctx, tx, agentfs.Origin{})
			return err
		})
	}
	pending.Finish(ctx, err)
	return err
}

// TestEventFeedHasNoGapsUnderConcurrentWriters runs 8 writers of 50 writes
// each while a follower pages through the feed with waits: the follower
// ends with exactly the set of committed events, each once, in order.
// Then again while one writer holds its transaction open across the
// follower's reads, the case a plain sequence number gets wrong: that
// transaction's event has the lowest position but commits last.
func TestEventFeedHasNoGapsUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	const writers, writes = 8, 50

	t.Run("ConcurrentWriters", func(t *testing.T) {
		store, _ := setup(t)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < writes; i++ {
					if err := putAt(ctx, store, "s", fmt.Sprintf("w%d/f%d", w, i%7), fmt.Sprintf("%d-%d", w, i)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		got := follow(t, store, "s", writers*writes, nil)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		checkFeed(t, store, "s", got)
	})

	t.Run("AWriterHoldsItsTransactionOpen", func(t *testing.T) {
		store, _ := setup(t)
		if err := putAt(ctx, store, "s", "held.txt", "v1"); err != nil {
			t.Fatal(err)
		}
		// The held transaction writes its event first (the lowest position
		// of what follows) and commits only after the others.
		tx, err := store.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := store.File(ctx, "s", fileAt(t, store, "held.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.DeleteFileTx(ctx, tx, "s", f.ID, "", agentfs.Origin{}); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			<-release
			done <- tx.Commit(ctx)
		}()
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < writes/5; i++ {
					if err := putAt(ctx, store, "s", fmt.Sprintf("w%d/f%d", w, i), "x"); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		want := 1 + 1 + writers*writes/5
		got := follow(t, store, "s", want, func(page int) {
			if page == 3 { // the follower has read past the held event's place by now
				wg.Wait()
				once.Do(func() { close(release) })
			}
		})
		once.Do(func() { close(release) })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		checkFeed(t, store, "s", got)
	})
}

func fileAt(t *testing.T, store *storage.Store, path string) string {
	t.Helper()
	var id string
	if err := store.Pool().QueryRow(context.Background(), `SELECT id FROM files WHERE path = $1 AND deleted_at IS NULL`, path).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestEventCursors covers the cursor's edges: another subject's cursor,
// an expired one, and "now".
func TestEventCursors(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	if err := putAt(ctx, store, "alice", "a.txt", "a"); err != nil {
		t.Fatal(err)
	}
	_, next, err := store.ListEvents(ctx, "alice", agentfs.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentfs.ParseEventCursor(next.String(), "bob"); !errors.Is(err, agentfs.ErrInvalidEventCursor) {
		t.Fatalf("bob used alice's cursor: %v", err)
	}
	old := next
	old.At = time.Now().Add(-800 * time.Hour)
	if _, _, err := store.ListEvents(ctx, "alice", agentfs.EventFilter{After: &old, Limit: 10}); !errors.Is(err, agentfs.ErrCursorExpired) {
		t.Fatalf("a cursor older than the retention: %v", err)
	}
	// "now" starts below the oldest transaction still running anywhere in
	// the cluster: what commits later is never missed, and an event that
	// committed a moment before may come too (other tests write meanwhile).
	now, err := store.EventsStart(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := putAt(ctx, store, "alice", "b.txt", "b"); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for cur := &now; !slices.Contains(paths, "b.txt"); {
		events, next, err := store.AwaitEvents(ctx, "alice", agentfs.EventFilter{After: cur, Limit: 10}, 10*time.Second)
		if err != nil || len(events) == 0 {
			t.Fatalf("after=now then a write: %+v %v", events, err)
		}
		for _, e := range events {
			paths = append(paths, e.Path)
		}
		cur = &next
	}
	if paths[len(paths)-1] != "b.txt" || len(paths) > 2 || len(paths) == 2 && paths[0] != "a.txt" {
		t.Fatalf("after=now handed out %v, want b.txt (after a.txt at most)", paths)
	}
}
