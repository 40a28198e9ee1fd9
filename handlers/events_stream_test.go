package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// sseMessage is one message of a Server-Sent Events stream.
type sseMessage struct {
	id, event, data string
	comment         bool
}

// sseStream is an open GET /v1/events/stream.
type sseStream struct {
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// openStream opens the event stream of token with query, resuming from
// lastID when it is set, and checks the response is a stream.
func openStream(t *testing.T, base, token, query, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events/stream?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open stream: %v", err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("open stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
	s.lines.Buffer(make([]byte, 1<<20), 1<<20)
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() { s.cancel(); s.res.Body.Close() }

// next reads the next message, or ok=false when the stream ended.
func (s *sseStream) next() (m sseMessage, ok bool) {
	seen := false
	for s.lines.Scan() {
		line := s.lines.Text()
		if line == "" {
			if seen {
				return m, true
			}
			continue
		}
		seen = true
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
			m.comment = true
		case "id":
			m.id = value
		case "event":
			m.event = value
		case "data":
			m.data = value
		}
	}
	return m, false
}

// nextEvent skips heartbeats up to the next event (ok=false: the stream
// ended), failing the test when a message is malformed.
func (s *sseStream) nextEvent(t *testing.T) (api.Event, string, bool) {
	t.Helper()
	for {
		m, ok := s.next()
		if !ok {
			return api.Event{}, "", false
		}
		if m.data == "" {
			if !m.comment {
				t.Fatalf("a message with neither data nor comment: %+v", m)
			}
			continue
		}
		var e api.Event
		if err := json.Unmarshal([]byte(m.data), &e); err != nil {
			t.Fatalf("data is not an Event: %v: %s", err, m.data)
		}
		if m.event != e.Type || m.id == "" {
			t.Fatalf("event %q id %q for an event of type %s", m.event, m.id, e.Type)
		}
		return e, m.id, true
	}
}

func streamServer(t *testing.T) (*apitest.Server, string) {
	t.Helper()
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{StreamHeartbeat: 200 * time.Millisecond}})
	return srv, srv.Token(t, "alice", "read", "write", "share", "delegate")
}

// TestEventStreamResumesWithoutGapOrRepeat: a client that drops its
// connection every few events and reconnects with Last-Event-ID, while
// another writes 60 files concurrently, sees every event exactly once,
// in feed order.
func TestEventStreamResumesWithoutGapOrRepeat(t *testing.T) {
	srv, tok := streamServer(t)
	c := apitest.NewClient(t, srv.URL, tok)
	const n = 60
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			c.Do("POST", fmt.Sprintf("/v1/files?path=s/%02d.txt", i), "x").Expect(t, 201)
		}
	}()
	var got []string
	last := ""
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		s := openStream(t, srv.URL, tok, "", last)
		for range 7 {
			e, id, ok := s.nextEvent(t)
			if !ok {
				t.Fatal("the stream ended by itself")
			}
			got, last = append(got, e.ID), id
			if len(got) == n {
				break
			}
		}
		s.close()
	}
	<-done
	feed := eventList(t, nil, c, "limit=1000")
	want := pluck(feed.Data, func(e api.Event) string { return e.ID })
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the stream across reconnects saw %d events:\n%v\nthe feed has %d:\n%v", len(got), got, len(want), want)
	}
	// Resuming from the last id sends nothing more (a heartbeat only).
	s := openStream(t, srv.URL, tok, "", last)
	if m, ok := s.next(); !ok || !m.comment || m.data != "" || m.id == "" {
		t.Fatalf("after the last event the stream sent %+v (ok %v), want a heartbeat with its cursor", m, ok)
	}
}

// TestEventStreamLive: an event committed after the stream opened at
// after=now arrives, matching the filters; a heartbeat's id resumes after
// what the stream had seen.
func TestEventStreamLive(t *testing.T) {
	srv, tok := streamServer(t)
	c := apitest.NewClient(t, srv.URL, tok)
	c.Do("POST", "/v1/files?path=old.txt", "x").Expect(t, 201)
	s := openStream(t, srv.URL, tok, "after=now&prefix=live/&type=file.created", "")
	beat, ok := s.next()
	if !ok || !beat.comment || beat.id == "" {
		t.Fatalf("the stream did not start with a heartbeat carrying its cursor: %+v", beat)
	}
	c.Do("POST", "/v1/files?path=other/a.txt", "x").Expect(t, 201) // outside the filter
	f := upload(t, c, "live/a.txt", "x").Expect(t, 201).File(t)
	e, _, ok := s.nextEvent(t)
	if !ok || e.FileID != f.ID || e.Type != "file.created" {
		t.Fatalf("live event %+v (ok %v), want the creation of %s", e, ok, f.ID)
	}
	// From the first heartbeat's id: exactly the one matching event.
	s2 := openStream(t, srv.URL, tok, "prefix=live/", beat.id)
	if e2, _, ok := s2.nextEvent(t); !ok || e2.ID != e.ID {
		t.Fatalf("resumed from the heartbeat: %+v, want %s", e2, e.ID)
	}
}

// TestEventStreamScopedToken: a token scoped to P/ streams the events of
// P/ and nothing of Q/ or of the sibling P-old/.
func TestEventStreamScopedToken(t *testing.T) {
	srv, tok := streamServer(t)
	root := apitest.NewClient(t, srv.URL, tok)
	child := mint(t, root, map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P"}, "expires_in": 3600})
	for _, p := range []string{"Q/a.txt", "P-old/b.txt", "P/c.txt", "Q/d.txt", "P/e.txt"} {
		upload(t, root, p, "x").Expect(t, 201)
	}
	s := openStream(t, srv.URL, *child.Token, "", "")
	var paths []string
	for {
		m, ok := s.next()
		if !ok {
			t.Fatal("the stream ended")
		}
		if m.comment && m.data == "" {
			break // caught up: the heartbeat after every event it may see
		}
		var e api.Event
		_ = json.Unmarshal([]byte(m.data), &e)
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, ",") != "P/c.txt,P/e.txt" {
		t.Fatalf("the scoped stream showed %v, want P/c.txt,P/e.txt", paths)
	}
	upload(t, root, "Q/late.txt", "x").Expect(t, 201)
	upload(t, root, "P/late.txt", "x").Expect(t, 201)
	if e, _, ok := s.nextEvent(t); !ok || e.Path != "P/late.txt" {
		t.Fatalf("the scoped stream's next event is %+v, want P/late.txt", e)
	}
	// A bad Last-Event-ID is a problem, not a stream.
	apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/events/stream", nil, "Last-Event-ID", "nope").
		ExpectProblem(t, 400, "INVALID_HEADER")
	apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/events/stream?type=file.bogus", nil).
		ExpectProblem(t, 422, "VALIDATION_FAILED")
}

// TestEventStreamClosesWhenTheTokenIsRevoked: revoking a streaming token
// ends its stream.
func TestEventStreamClosesWhenTheTokenIsRevoked(t *testing.T) {
	srv, tok := streamServer(t)
	root := apitest.NewClient(t, srv.URL, tok)
	child := mint(t, root, map[string]any{"scopes": []string{"read"}, "expires_in": 3600})
	s := openStream(t, srv.URL, *child.Token, "after=now", "")
	if m, ok := s.next(); !ok || !m.comment {
		t.Fatalf("no first heartbeat: %+v", m)
	}
	root.Do("DELETE", "/v1/tokens/"+child.ID, nil).Expect(t, 200)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, ok := s.next(); !ok {
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream of a revoked token is still open after 30 s")
	}
	apitest.NewClient(t, srv.URL, *child.Token).Do("GET", "/v1/events/stream", nil).ExpectProblem(t, 401, "UNAUTHENTICATED")
}

// TestEventStreamAcrossInstances: behind a load balancer a stream may be
// served by either instance. One opened on B sees a write made on A as it
// commits, and a reconnect to A with B's Last-Event-ID goes on with
// exactly the events after it.
func TestEventStreamAcrossInstances(t *testing.T) {
	a, tok := streamServer(t)
	b := apitest.NewServer(t, apitest.Options{Config: &a.Config, Limits: handlers.Limits{StreamHeartbeat: 200 * time.Millisecond}})
	onA := apitest.NewClient(t, a.URL, tok)
	s := openStream(t, b.URL, tok, "after=now", "")
	if m, ok := s.next(); !ok || !m.comment {
		t.Fatalf("no first heartbeat from B: %+v", m)
	}
	first := upload(t, onA, "lb/1.txt", "x").Expect(t, 201).File(t)
	e, id, ok := s.nextEvent(t)
	if !ok || e.FileID != first.ID {
		t.Fatalf("B streamed %+v, want the creation of %s made on A", e, first.ID)
	}
	s.close()
	var want []string
	for _, p := range []string{"lb/2.txt", "lb/3.txt", "lb/4.txt"} {
		want = append(want, upload(t, onA, p, "x").Expect(t, 201).File(t).Path)
	}
	s = openStream(t, a.URL, tok, "after=now", id) // Last-Event-ID wins over after
	var got []string
	for range want {
		e, _, ok := s.nextEvent(t)
		if !ok {
			t.Fatal("the stream on A ended")
		}
		got = append(got, e.Path)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("A resumed with %v, want %v", got, want)
	}
	if m, ok := s.next(); !ok || m.data != "" {
		t.Fatalf("after the three events A sent %+v, want a heartbeat", m)
	}
}
