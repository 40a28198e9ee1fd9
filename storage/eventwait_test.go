package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// uniqueSubject is a subject no other test uses: every schema of the test
// database shares the notification channel, and a waiter hears the events
// of every subject with its name.
func uniqueSubject(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

// putBy writes path as agent/run, replacing a live file there.
func putBy(t *testing.T, store *storage.Store, subject, path, agent, run string) {
	t.Helper()
	ctx := context.Background()
	body := fmt.Sprintf("%s by %s in %s at %d", path, agent, run, time.Now().UnixNano()) // never a no-op replace
	p := agentfs.Put{Subject: subject, Path: path, ContentType: "text/plain", Replace: true, Size: int64(len(body)),
		By: agentfs.Attribution{AgentID: agent, RunID: run}}
	pending, err := store.PreparePut(ctx, p, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	origin := agentfs.Origin{By: p.By}
	f, _, err := pending.CommitAlone(ctx, origin)
	if f == nil && err == nil {
		err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
			_, _, err := pending.Apply(ctx, tx, origin)
			return err
		})
	}
	pending.Finish(ctx, err)
	if err != nil {
		t.Fatal(err)
	}
}

// waitResult is how one AwaitEvents ended.
type waitResult struct {
	events []*agentfs.Event
	err    error
}

// await starts a wait for subject's events after cursor, matching filter.
func await(ctx context.Context, store *storage.Store, subject string, after agentfs.EventCursor, filter agentfs.EventFilter, wait time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	filter.After, filter.Limit = &after, 100
	go func() {
		events, _, err := store.AwaitEvents(ctx, subject, filter, wait)
		out <- waitResult{events, err}
	}()
	return out
}

// listening makes sure the store's listener listens, with one wait that a
// write ends: a waiter that starts before it listens looks again once it
// does, which would blur the counts of looks. It returns the subject's
// feed position after that write, where a test's waiters start.
func listening(t *testing.T, store *storage.Store, subject string) agentfs.EventCursor {
	t.Helper()
	warm := await(context.Background(), store, subject, eventsStart(t, store, subject),
		agentfs.EventFilter{RunID: "run-warm"}, time.Minute)
	putBy(t, store, subject, "warm.txt", "ag-warm", "run-warm")
	received(t, "the first waiter", warm)
	return eventsStart(t, store, subject)
}

// eventsStart is the subject's feed position now.
func eventsStart(t *testing.T, store *storage.Store, subject string) agentfs.EventCursor {
	t.Helper()
	start, err := store.EventsStart(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// listeningSubject is a fresh subject that store listens on, where its
// feed starts, and how many looks at the feed the store counted so far.
func listeningSubject(t *testing.T, store *storage.Store) (subject string, start agentfs.EventCursor, base int64) {
	t.Helper()
	subject = uniqueSubject(t)
	start = listening(t, store, subject)
	return subject, start, store.Counters().EventLooks
}

// awaitLooked starts a wait of up to two minutes, as await does, and
// returns once the store's waiters have looked at the feed looks times
// (the new waiter's first look among them), so that every later look
// counts a wake.
func awaitLooked(ctx context.Context, t *testing.T, store *storage.Store, subject string, after agentfs.EventCursor,
	filter agentfs.EventFilter, looks int64) <-chan waitResult {
	t.Helper()
	ch := await(ctx, store, subject, after, filter, 2*time.Minute)
	looksReach(t, store, looks)
	return ch
}

// looksReach waits until the store's waiters have looked at the feed n
// times in all.
func looksReach(t *testing.T, store *storage.Store, n int64) {
	t.Helper()
	storagetest.Eventually(t, time.Minute, fmt.Sprintf("%d looks at the feed", n), func() bool {
		return store.Counters().EventLooks >= n
	})
}

func received(t *testing.T, name string, ch <-chan waitResult) []*agentfs.Event {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", name, r.err)
		}
		return r.events
	case <-time.After(time.Minute):
		t.Fatalf("%s was not woken by an event it matches", name)
	}
	return nil
}

// TestEventWaitersWakeOnlyForWhatTheyCanMatch has waiters with a filter
// on each field wait while events they cannot match commit, then one event
// each that matches: every waiter gets its event, and the feed is looked at
// once per waiter as it starts and once per waiter woken by its event,
// never for the events no filter matched (counted by the store, not timed).
// A waiter whose filter never matches looks once in all.
func TestEventWaitersWakeOnlyForWhatTheyCanMatch(t *testing.T) {
	store, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subject := uniqueSubject(t)
	putBy(t, store, subject, "watched.txt", "ag-noise", "run-noise")
	watched := fileAt(t, store, "watched.txt")
	start := listening(t, store, subject)
	base, broad := store.Counters().EventLooks, store.Counters().BroadWakes
	never := awaitLooked(ctx, t, store, subject, start, agentfs.EventFilter{RunID: "run-never"}, base+1)
	waiters := []struct {
		name   string
		filter agentfs.EventFilter
		ch     <-chan waitResult
	}{
		{name: "run_id", filter: agentfs.EventFilter{RunID: "run-a"}},
		{name: "agent_id", filter: agentfs.EventFilter{AgentID: "ag-b"}},
		{name: "prefix", filter: agentfs.EventFilter{Prefix: "wanted/"}},
		{name: "type", filter: agentfs.EventFilter{Types: []string{agentfs.EventReplaced}}},
		{name: "file_id", filter: agentfs.EventFilter{FileID: watched}},
	}
	for i := range waiters {
		waiters[i].ch = awaitLooked(ctx, t, store, subject, start, waiters[i].filter, base+2+int64(i))
	}
	for i := range 20 { // new files: created, by nobody waited for, outside wanted/
		putBy(t, store, subject, fmt.Sprintf("noise/%d.txt", i), "ag-noise", "run-noise")
	}
	putBy(t, store, subject, "noise/a.txt", "ag-noise", "run-a")
	putBy(t, store, subject, "noise/b.txt", "ag-b", "run-noise")
	putBy(t, store, subject, "wanted/c.txt", "ag-noise", "run-noise")
	putBy(t, store, subject, "watched.txt", "ag-noise", "run-noise") // replaced: the type and file_id waiters
	want := map[string]string{"run_id": "noise/a.txt", "agent_id": "noise/b.txt", "prefix": "wanted/c.txt",
		"type": "watched.txt", "file_id": "watched.txt"}
	for _, w := range waiters {
		events := received(t, "the "+w.name+" waiter", w.ch)
		if len(events) != 1 || events[0].Path != want[w.name] {
			t.Fatalf("the %s waiter got %d events (first %+v), want only %s", w.name, len(events), events, want[w.name])
		}
	}
	// Each waiter looked as it started and once more when its event woke
	// it; the one that matches nothing only as it started. A wake no
	// filter decided (the listener listening again after a lost
	// connection, as a loaded machine can make it) costs each waiter then
	// waiting one look more: counted apart, it is not a filter's doing.
	extra := store.Counters().BroadWakes - broad
	if n := store.Counters().EventLooks - base - extra; n != int64(1+2*len(waiters)) {
		t.Fatalf("the waiters looked at the feed %d times (and %d more after broad wakes), want %d: events they cannot match woke them",
			n, extra, 1+2*len(waiters))
	}
	cancel()
	if r := <-never; len(r.events) != 0 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the waiter that matches nothing ended with %d events, %v", len(r.events), r.err)
	}
}

// TestEventWaitersOfAStatementTooLargeToList: a statement whose events do
// not fit in one notification wakes every waiter of its subject, and the
// one its events match gets them all; a waiter that matches none of them
// looks again and goes on waiting.
func TestEventWaitersOfAStatementTooLargeToList(t *testing.T) {
	store, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subject, start, base := listeningSubject(t, store)
	never := awaitLooked(ctx, t, store, subject, start, agentfs.EventFilter{RunID: "run-never"}, base+1)
	target := awaitLooked(ctx, t, store, subject, start, agentfs.EventFilter{RunID: "run-big"}, base+2)
	// 20 events of 900-byte paths, one statement: more than a NOTIFY holds.
	_, err := store.Pool().Exec(ctx, `INSERT INTO events (subject, type, file_id, path, run_id)
		SELECT $1, 'file.created', 'file_' || lpad(g::text, 26, '0'), repeat('p', 900) || g, 'run-big'
		FROM generate_series(1, 20) g`, subject)
	if err != nil {
		t.Fatalf("a statement of events larger than a notification: %v", err)
	}
	if events := received(t, "the waiter of the large statement", target); len(events) != 20 {
		t.Fatalf("the waiter got %d of the statement's 20 events", len(events))
	}
	looksReach(t, store, base+4) // the other waiter was woken too, and looked
	select {
	case r := <-never:
		t.Fatalf("a waiter that matches none of the events ended: %d events, %v", len(r.events), r.err)
	default:
	}
	cancel()
	<-never
}

// TestEventWaitersPerSubjectBound: past MaxWaitersPerSubject waits of one
// subject, another wait of it fails with ErrTooManyWaiters at once, while
// another subject still waits; when a wait ends, its place is free.
func TestEventWaitersPerSubjectBound(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.MaxWaitersPerSubject = 2
	store := storagetest.OpenConfig(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subject, start, base := listeningSubject(t, store)
	first := awaitLooked(ctx, t, store, subject, start, agentfs.EventFilter{RunID: "run-1"}, base+1)
	second := awaitLooked(ctx, t, store, subject, start, agentfs.EventFilter{}, base+2)
	if _, _, err := store.AwaitEvents(ctx, subject, agentfs.EventFilter{After: &start, Limit: 10}, time.Minute); !errors.Is(err, agentfs.ErrTooManyWaiters) {
		t.Fatalf("a third wait of the subject: %v, want ErrTooManyWaiters", err)
	}
	other := await(ctx, store, subject+"-other", start, agentfs.EventFilter{}, time.Second)
	if r := <-other; r.err != nil {
		t.Fatalf("another subject's wait: %v", r.err)
	}
	putBy(t, store, subject, "one.txt", "ag", "run-1") // ends both waits
	received(t, "the first waiter", first)
	received(t, "the second waiter", second)
	storagetest.Eventually(t, time.Minute, "a free place once a wait ended", func() bool {
		_, _, err := store.AwaitEvents(ctx, subject, agentfs.EventFilter{After: &start, Limit: 10}, time.Millisecond)
		return err == nil
	})
}

// TestEventWaitersAfterALostNotification kills the waiting instance's
// listening connection and holds its way to Postgres while another
// instance commits the event the waiter waits for: the notification is
// lost with the connection, and the waiter gets the event once the
// listener is back (every waiter looks again then), with nothing polling
// meanwhile.
func TestEventWaitersAfterALostNotification(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	writer := storagetest.OpenConfig(t, cfg)
	proxy := storagetest.NewProxy(t, storagetest.PostgresAddr(t))
	viaProxy := storagetest.WithPostgresAt(t, cfg, proxy.Addr())
	waiter := storagetest.OpenConfig(t, viaProxy)
	ctx := context.Background()
	subject, start, base := listeningSubject(t, waiter)
	ch := awaitLooked(ctx, t, waiter, subject, start, agentfs.EventFilter{RunID: "run-lost"}, base+1)

	// Every connection of the waiting instance stays open but passes
	// nothing; its listener is killed, and cannot listen again until the
	// proxy lets bytes through.
	proxy.Stall()
	var killed int
	// The kill waits (up to a minute) for the backend to be gone, so it
	// cannot hand on the notification below as it dies.
	err := writer.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 60000)) FROM pg_stat_activity
		WHERE client_port = ANY($1) AND (query LIKE 'LISTEN %' OR query = 'SELECT 1')`, proxy.TargetPorts()).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("killed %d listening connections of the waiting instance (%v), want 1", killed, err)
	}
	putBy(t, writer, subject, "lost.txt", "ag", "run-lost") // nobody hears this one
	putBy(t, writer, subject, "after.txt", "ag", "run-other")
	if n := waiter.Counters().EventLooks - base; n != 1 {
		t.Fatalf("the waiter looked %d times before its listener was back, want 1", n)
	}
	proxy.Restore()
	events := received(t, "the waiter whose notification was lost", ch)
	if len(events) != 1 || events[0].Path != "lost.txt" {
		t.Fatalf("after the listener came back the waiter got %+v, want lost.txt alone", events)
	}
}
