package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// TestEventsPage reads the feed a page at a time, with filters.
func TestEventsPage(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("run-e"), client.WithAgentID("agent-e"))
	ctx := context.Background()
	start, err := c.Events(ctx, client.EventOptions{After: client.EventsNow})
	if err != nil || len(start.Data) != 0 || start.NextCursor == "" || start.HasMore {
		t.Fatalf("the end of the feed: %+v, %v", start, err)
	}
	f := mustPut(t, c, "notes/e.txt", "one", client.PutOptions{})
	mustPut(t, c, "notes/e.txt", "two", client.PutOptions{Replace: true})
	if _, err := c.Move(ctx, f.ID, "notes/e2.txt", client.MoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.direct.PutFile(ctx, "notes/other.txt", strings.NewReader("x"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	all := collect(t, c, client.EventOptions{After: start.NextCursor}, 4)
	if got := eventTypes(all.Data); got != "file.created file.replaced file.moved file.created" {
		t.Fatalf("events %s", got)
	}
	created, moved := all.Data[0], all.Data[2]
	if !strings.HasPrefix(created.ID, "evt_") || created.FileID != f.ID || created.Path != "notes/e.txt" ||
		created.Version == nil || *created.Version != 1 || created.SizeBytes == nil || *created.SizeBytes != 3 ||
		created.SHA256 == nil || *created.SHA256 != sha("one") || created.RunID == nil || *created.RunID != "run-e" ||
		created.AgentID == nil || *created.AgentID != "agent-e" || created.IdempotencyKey == nil || created.RequestID == nil {
		t.Fatalf("created %+v", created)
	}
	if moved.PreviousPath == nil || *moved.PreviousPath != "notes/e.txt" || moved.Path != "notes/e2.txt" {
		t.Fatalf("moved %+v", moved)
	}

	for _, tc := range []struct {
		name string
		opts client.EventOptions
		want string
	}{
		{"Run", client.EventOptions{RunID: "run-e"}, "file.created file.replaced file.moved"},
		{"Agent", client.EventOptions{AgentID: "agent-e"}, "file.created file.replaced file.moved"},
		{"File", client.EventOptions{FileID: f.ID}, "file.created file.replaced file.moved"},
		{"Prefix", client.EventOptions{Prefix: "notes/o"}, "file.created"},
		{"Types", client.EventOptions{Types: []string{client.EventFileMoved, client.EventFileReplaced}}, "file.replaced file.moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.After = start.NextCursor
			l, err := c.Events(ctx, tc.opts)
			if err != nil || eventTypes(l.Data) != tc.want {
				t.Fatalf("events %s, %v; want %s", eventTypes(l.Data), err, tc.want)
			}
		})
	}
	t.Run("Pages", func(t *testing.T) {
		var got []client.Event
		after := start.NextCursor
		for {
			l, err := c.Events(ctx, client.EventOptions{After: after, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l.Data...)
			if !l.HasMore {
				break
			}
			after = l.NextCursor
		}
		if eventIDs(got) != eventIDs(all.Data) {
			t.Fatalf("page by page %s, at once %s", eventIDs(got), eventIDs(all.Data))
		}
	})
	t.Run("Wait", func(t *testing.T) {
		before := len(b.proxy.requests("GET", "/v1/events"))
		l, err := c.Events(ctx, client.EventOptions{After: all.NextCursor, Wait: 1500 * time.Millisecond})
		if err != nil || len(l.Data) != 0 || l.NextCursor == "" {
			t.Fatalf("an idle wait: %+v, %v", l, err)
		}
		seen := b.proxy.requests("GET", "/v1/events")[before:]
		if len(seen) != 1 || !strings.Contains(seen[0].Query, "wait=2") {
			t.Fatalf("requests %+v, want wait rounded up to 2 s", seen)
		}
		if _, err := c.Events(ctx, client.EventOptions{Wait: 31 * time.Second}); err == nil {
			t.Fatal("a wait above 30 s was sent")
		}
	})
	t.Run("BadCursor", func(t *testing.T) {
		_, err := c.Events(ctx, client.EventOptions{After: "not-a-cursor"})
		expectProblem(t, err, 400, "INVALID_REQUEST")
		_, err = c.Events(ctx, client.EventOptions{Types: []string{"file.exploded"}})
		expectProblem(t, err, 422, "VALIDATION_FAILED")
	})
}

// collect follows the feed with waits until it has n events, and returns
// them with the cursor after the last. The feed hands an event out once
// every transaction older than it has ended, which on a shared database
// may be a moment after the write that made it returned.
func collect(t *testing.T, c *client.Client, opts client.EventOptions, n int) *client.EventList {
	t.Helper()
	out := &client.EventList{NextCursor: opts.After}
	for tries := 0; len(out.Data) < n; tries++ {
		if tries == 20 {
			t.Fatalf("only %d of %d events: %s", len(out.Data), n, eventTypes(out.Data))
		}
		opts.After, opts.Wait = out.NextCursor, 5*time.Second
		l, err := c.Events(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		out.Data, out.NextCursor = append(out.Data, l.Data...), l.NextCursor
	}
	if len(out.Data) != n {
		t.Fatalf("%d events, want %d: %s", len(out.Data), n, eventTypes(out.Data))
	}
	return out
}

func eventTypes(events []client.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

func eventIDs(events []client.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return strings.Join(out, ",")
}

// follower runs an EventFollower in the background and hands its events
// over one by one.
type follower struct {
	f      *client.EventFollower
	events chan client.Event
	done   chan error // what All ended with
}

func follow(ctx context.Context, c *client.Client, opts client.EventOptions) *follower {
	fl := &follower{f: c.FollowEvents(opts, client.FollowOptions{Wait: 10 * time.Second}),
		events: make(chan client.Event, 100), done: make(chan error, 1)}
	go func() {
		for e, err := range fl.f.All(ctx) {
			if err != nil {
				fl.done <- err
				return
			}
			fl.events <- *e
		}
		fl.done <- nil
	}()
	return fl
}

// next waits for the follower's next event; a broken follower fails the
// test after a generous bound instead of hanging it.
func (fl *follower) next(t *testing.T) client.Event {
	t.Helper()
	select {
	case e := <-fl.events:
		return e
	case err := <-fl.done:
		t.Fatalf("the follower stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the follower")
	}
	return client.Event{}
}

// noMore fails the test when the follower has handed over an event not
// taken yet.
func (fl *follower) noMore(t *testing.T) {
	t.Helper()
	select {
	case e := <-fl.events:
		t.Fatalf("an extra event %+v", e)
	default:
	}
}

// polls returns the event polls the proxy saw.
func (b *bundle) polls() []seenRequest { return b.proxy.requests("GET", "/v1/events") }

// afterOf is the after parameter of a poll.
func afterOf(t *testing.T, s seenRequest) string {
	t.Helper()
	q, err := url.ParseQuery(s.Query)
	if err != nil {
		t.Fatal(err)
	}
	return q.Get("after")
}

// TestFollowEvents: the follower receives the events written while it
// waits, in order; when the proxy drops a poll after the server answered
// it, the follower asks again from the same cursor and gets the lost
// events once, with no gap and no repeat.
func TestFollowEvents(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	w, err := client.New(b.srv.URL, b.token, client.WithRunID("run-f"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// From the feed's end before the first write (After: now could miss a
	// write that commits before the server reads "now").
	head, err := b.direct.Events(ctx, client.EventOptions{After: client.EventsNow})
	if err != nil {
		t.Fatal(err)
	}
	fl := follow(ctx, c, client.EventOptions{After: head.NextCursor, RunID: "run-f"})
	b.proxy.waitFor(t, "the first poll", func([]seenRequest) bool { return len(b.polls()) == 1 })
	// The next poll, the one after the first event, will be answered by
	// the server and then cut.
	b.proxy.inject("GET", "/v1/events", 1, dropAfterCommit)

	put := func(path, content string) {
		t.Helper()
		if _, err := w.PutFile(ctx, path, strings.NewReader(content), client.PutOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	put("notes/1.txt", "1")
	if _, err := b.direct.PutFile(ctx, "notes/not-this-run.txt", strings.NewReader("x"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := fl.next(t); e.Path != "notes/1.txt" || e.Type != client.EventFileCreated {
		t.Fatalf("first event %+v", e)
	}

	b.proxy.waitFor(t, "the second poll", func([]seenRequest) bool { return len(b.polls()) >= 2 })
	put("notes/2.txt", "2")
	put("notes/2.txt", "2b")
	var got []client.Event
	for len(got) < 2 {
		got = append(got, fl.next(t))
	}
	put("notes/3.txt", "3")
	got = append(got, fl.next(t))
	if paths := eventPaths(got); paths != "notes/2.txt notes/2.txt notes/3.txt" || eventTypes(got) != "file.created file.replaced file.created" {
		t.Fatalf("after the drop: %s (%s)", paths, eventTypes(got))
	}
	polls := b.polls()
	dropped := polls[1]
	if dropped.Status != 0 || dropped.ServerStatus != 200 {
		t.Fatalf("the second poll %+v, want answered by the server and cut", dropped)
	}
	if afterOf(t, polls[2]) != afterOf(t, dropped) || afterOf(t, dropped) == "" || afterOf(t, dropped) == client.EventsNow {
		t.Fatalf("polls %+v: the one after the drop must ask from the same cursor", polls)
	}
	fl.noMore(t)

	// Cancelling ends the follower, which says where to resume.
	cancel()
	select {
	case err := <-fl.done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the follower ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not stop on cancel")
	}
	resume := fl.f.Cursor()
	put2 := func(path string) {
		if _, err := w.PutFile(context.Background(), path, strings.NewReader("4"), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put2("notes/4.txt")
	if rest := collect(t, b.direct, client.EventOptions{After: resume, RunID: "run-f"}, 1); eventPaths(rest.Data) != "notes/4.txt" {
		t.Fatalf("events from the follower's cursor: %s; want only notes/4.txt", eventPaths(rest.Data))
	}
}

func eventPaths(events []client.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.Path)
	}
	return strings.Join(out, " ")
}

// hangUpWhenTold holds a request without forwarding it until release is
// closed, then cuts its connection: a connection dropped in the middle
// of a long poll, before the server answered anything.
func hangUpWhenTold(arrived chan<- struct{}, release <-chan struct{}) func(*faultProxy, http.ResponseWriter, *http.Request, *seenRequest) {
	return func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
		arrived <- struct{}{}
		<-release
		hangUp(w)
	}
}

// TestFollowEventsRidesOutOutages: once the feed has answered, the
// follower retries cut connections and 5xx beyond the policy's
// MaxAttempts, from its cursor, and misses nothing written meanwhile;
// before it has answered, MaxAttempts bounds it.
func TestFollowEventsRidesOutOutages(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var waits []error
	// Without keep-alive, Go's transport never repeats a cut request on a
	// fresh connection by itself, so every fault reaches the follower.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c, b := setup(t, client.WithHTTPClient(fresh),
		client.WithRetryPolicy(client.RetryPolicy{MaxAttempts: 2, InitialDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}),
		client.WithOnRetry(func(_ int, _ time.Duration, err error) {
			mu.Lock()
			waits = append(waits, err)
			mu.Unlock()
		}))
	ctx := context.Background()
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	w := b.direct
	// The feed's end before the first write: the first poll then answers
	// notes/a.txt whenever it commits. (With After: now, a write that
	// committed before the server read "now" would be skipped, and the
	// poll after it is the one held below.)
	head, err := w.Events(ctx, client.EventOptions{After: client.EventsNow})
	if err != nil {
		t.Fatal(err)
	}
	fl := follow(followCtx, c, client.EventOptions{After: head.NextCursor})
	b.proxy.waitFor(t, "the first poll", func([]seenRequest) bool { return len(b.polls()) == 1 })
	// The polls after the first event: one cut while it waits, two 503,
	// two cut before the server sees them.
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	t.Cleanup(let) // a failure before the release must not hold the proxy's Close
	b.proxy.inject("GET", "/v1/events", 1, hangUpWhenTold(arrived, release))
	b.proxy.inject("GET", "/v1/events", 2, answerProblem(503, "STORAGE_UNAVAILABLE", ""))
	b.proxy.inject("GET", "/v1/events", 2, dropBeforeForward)
	if _, err := w.PutFile(ctx, "notes/a.txt", strings.NewReader("a"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := fl.next(t); e.Path != "notes/a.txt" {
		t.Fatalf("first event %+v", e)
	}
	<-arrived
	// Written while the poll hangs: the server never saw that poll.
	if _, err := w.PutFile(ctx, "notes/b.txt", strings.NewReader("b"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	let()
	if e := fl.next(t); e.Path != "notes/b.txt" {
		t.Fatalf("after the outage %+v", e)
	}
	polls := b.polls()
	if len(polls) < 7 {
		t.Fatalf("%d polls, want the first, the answered one, five failed and the one that got notes/b.txt", len(polls))
	}
	cursor := afterOf(t, polls[1])
	for _, p := range polls[1:7] {
		if afterOf(t, p) != cursor {
			t.Fatalf("polls %+v: every retry asks from the same cursor", polls)
		}
	}
	mu.Lock()
	n := len(waits)
	mu.Unlock()
	if n != 5 {
		t.Fatalf("%d waits announced, want 5 (one per failed poll)", n)
	}
	fl.noMore(t)
	stopFollowing()
	if err := <-fl.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the follower ended with %v", err)
	}

	t.Run("BoundedBeforeTheFirstAnswer", func(t *testing.T) {
		b.proxy.inject("GET", "/v1/events", 2, answerProblem(503, "STORAGE_UNAVAILABLE", ""))
		f := c.FollowEvents(client.EventOptions{After: client.EventsNow}, client.FollowOptions{})
		var got error
		for _, err := range f.All(ctx) {
			got = err
			break
		}
		if p := expectProblem(t, got, 503, "STORAGE_UNAVAILABLE"); p.RequestID != "req_proxy" {
			t.Fatalf("problem %+v", p)
		}
		if f.Cursor() != client.EventsNow {
			t.Fatalf("cursor %q before any answer, want %q", f.Cursor(), client.EventsNow)
		}
	})
	t.Run("StopsOnProblems", func(t *testing.T) {
		f := c.FollowEvents(client.EventOptions{After: "bm90LWEtY3Vyc29y"}, client.FollowOptions{})
		for _, err := range f.All(ctx) {
			expectProblem(t, err, 400, "INVALID_REQUEST")
			break
		}
	})
}

// TestRun sums up a run whose id holds a slash.
func TestRun(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("team/run-7"), client.WithAgentID("planner"))
	ctx := context.Background()
	f := mustPut(t, c, "notes/r.txt", "12345", client.PutOptions{})
	mustPut(t, c, "notes/r.txt", "123", client.PutOptions{Replace: true})
	g := mustPut(t, c, "notes/gone.txt", "x", client.PutOptions{})
	if _, err := c.DeleteFile(ctx, g.ID, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, "team/run-7")
	if err != nil {
		t.Fatal(err)
	}
	if r.RunID != "team/run-7" || r.Object != "run" || len(r.AgentIDs) != 1 || r.AgentIDs[0] != "planner" ||
		r.Counts != (client.RunCounts{Created: 2, Replaced: 1, Deleted: 1}) || r.BytesWritten != 9 || r.LiveFiles != 1 ||
		r.FirstAt.After(r.LastAt) {
		t.Fatalf("run %+v", r)
	}
	if seen := b.proxy.where(func(s seenRequest) bool { return s.Method == "GET" && strings.HasPrefix(s.Path, "/v1/runs/") }); len(seen) != 1 {
		t.Fatalf("run requests %+v", seen)
	}
	last, err := c.ListFiles(ctx, client.ListOptions{LastRunID: "team/run-7"})
	if err != nil || len(last.Data) != 1 || last.Data[0].ID != f.ID {
		t.Fatalf("files the run last wrote: %+v, %v", last, err)
	}
	_, err = c.Run(ctx, "run-nobody")
	expectProblem(t, err, 404, "NOT_FOUND")
	if _, err := c.Run(ctx, "has space"); err == nil {
		t.Fatal("a run id with a space was sent")
	}
}
