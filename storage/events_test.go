package storage_test

import (
	"context"
	"errors"
	"fmt"
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

// checkFeed holds what a follower of the whole feed got to the rows: each
// committed event exactly once, numbered 1, 2, 3… with no holes.
func checkFeed(t *testing.T, store *storage.Store, subject string, got []*agentfs.Event) {
	t.Helper()
	committed := allEvents(t, store, subject)
	seen := map[string]bool{}
	for i, e := range got {
		if seen[e.ID] {
			t.Fatalf("event %s handed out twice", e.ID)
		}
		seen[e.ID] = true
		if e.Position != int64(i+1) {
			t.Fatalf("event %d of the feed has position %d", i+1, e.Position)
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
// follower's reads, the case a number taken at insert gets wrong: that
// transaction writes its event first but commits last, so its event must
// come last, after the follower has already read past where it was written.
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
		// The held transaction writes its event first and commits only
		// after the others.
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
		if last := got[len(got)-1]; last.Type != agentfs.EventDeleted || last.FileID != f.ID {
			t.Fatalf("the held transaction's event is not last: %s %s", last.Type, last.Path)
		}
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
	// "now" is the end of the feed: what commits later, and nothing else.
	now, err := store.EventsStart(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := putAt(ctx, store, "alice", "b.txt", "b"); err != nil {
		t.Fatal(err)
	}
	events, _, err := store.AwaitEvents(ctx, "alice", agentfs.EventFilter{After: &now, Limit: 10}, 10*time.Second)
	if err != nil || len(events) != 1 || events[0].Path != "b.txt" {
		t.Fatalf("after=now then a write of b.txt: %+v %v", events, err)
	}
}

// TestEventsOfOneFileFollowItsVersions has writers replace and revert one
// file at once, through the one-statement path and through transactions:
// the feed lists the file's events in the order its versions were made.
func TestEventsOfOneFileFollowItsVersions(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	if err := putAt(ctx, store, "s", "one.txt", "v1"); err != nil {
		t.Fatal(err)
	}
	id := fileAt(t, store, "one.txt")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				var err error
				if (w+i)%3 == 0 {
					err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
						_, _, err := store.RevertFileTx(ctx, tx, agentfs.Revert{Subject: "s", FileID: id, Version: 1}, agentfs.Origin{})
						return err
					})
				} else {
					err = putAt(ctx, store, "s", "one.txt", fmt.Sprintf("%d-%d", w, i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f, err := store.File(ctx, "s", id)
	if err != nil {
		t.Fatal(err)
	}
	got := follow(t, store, "s", f.Version, nil) // one event per version
	checkFeed(t, store, "s", got)
	for i, e := range got {
		if e.Version != i+1 {
			t.Fatalf("event %d of the file names version %d: the feed is not in the order the versions were made", i, e.Version)
		}
	}
}

// TestDrainEndsWaits: a wait on events and one on a batch that has not
// ended both answer what there is as soon as the store drains, long before
// their time is up; a wait that starts after Drain does not wait at all.
func TestDrainEndsWaits(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	var b *agentfs.Batch
	err := store.WithTxRetry(ctx, func(tx pgx.Tx) error {
		var err error
		b, err = store.CreateBatchTx(ctx, tx, &agentfs.Batch{Subject: "s",
			Items: []agentfs.BatchItem{{Op: agentfs.OpDelete, FileID: "file_00000000000000000000000000"}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	start, err := store.EventsStart(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		what string
		err  error
	}
	answers := make(chan answer, 3)
	go func() {
		events, _, err := store.AwaitEvents(ctx, "s", agentfs.EventFilter{After: &start, Limit: 10}, time.Hour)
		answers <- answer{fmt.Sprintf("events: %d", len(events)), err}
	}()
	go func() {
		got, err := store.AwaitBatch(ctx, "s", b.ID, time.Hour)
		if err == nil {
			answers <- answer{"batch: " + got.Status, nil}
			return
		}
		answers <- answer{"batch", err}
	}()
	store.Drain()
	store.Drain() // twice is fine
	go func() {
		events, _, err := store.AwaitEvents(ctx, "s", agentfs.EventFilter{After: &start, Limit: 10}, time.Hour)
		answers <- answer{fmt.Sprintf("events: %d", len(events)), err}
	}()
	want := map[string]int{"events: 0": 2, "batch: " + agentfs.BatchQueued: 1}
	for range 3 {
		select {
		case a := <-answers:
			if a.err != nil || want[a.what] == 0 {
				t.Fatalf("a drained wait answered %s, %v", a.what, a.err)
			}
			want[a.what]--
		case <-time.After(2 * time.Minute):
			t.Fatal("a wait did not end on Drain")
		}
	}
}
