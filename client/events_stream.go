package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
)

// EventStream follows the event feed over Server-Sent Events (GET
// /v1/events/stream): one connection the server pushes each event down
// as it commits, instead of FollowEvents' long polls. A dropped
// connection is opened again with Last-Event-ID, so the events it yields
// have no gap and no repeat. Make one with StreamEvents; it is not safe
// for concurrent use.
type EventStream struct {
	c    *Client
	opts EventOptions

	mu        sync.Mutex
	last      string // the id of the last message: where a reconnect resumes
	connected bool
}

// StreamEvents returns a stream of the events that match opts, from
// opts.After on (EventsNow, a cursor, or empty for the oldest kept
// event); opts.Limit and opts.Wait are ignored.
//
//	s := c.StreamEvents(client.EventOptions{Prefix: "reports/", After: client.EventsNow})
//	for e, err := range s.All(ctx) {
//		if err != nil {
//			log.Printf("stopped; resume with After: %s", s.Cursor())
//			break
//		}
//		fmt.Println(e.Type, e.Path)
//	}
func (c *Client) StreamEvents(opts EventOptions) *EventStream {
	return &EventStream{c: c, opts: opts}
}

// Cursor is where the stream stands, for EventOptions.After of a later
// stream or follower: the cursor of the last event yielded, or of the
// last heartbeat (which the server sends with the cursor it is at); empty
// or opts.After before the first message.
func (s *EventStream) Cursor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == "" {
		return s.opts.After
	}
	return s.last
}

// All yields events as they commit, oldest first, until ctx ends (it
// yields ctx.Err()) or a problem that asking again cannot mend
// (CURSOR_EXPIRED, UNAUTHENTICATED when the token is revoked, ...), which
// it yields with a nil event. Connections that fail or end are opened
// again with the client's backoff, as FollowEvents retries its polls:
// counted against RetryPolicy.MaxAttempts until the stream first opened,
// without limit after.
func (s *EventStream) All(ctx context.Context) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		waits := newDelays(s.c.policy, s.c.rand)
		for failures := 1; ; failures++ {
			err := s.once(ctx, yield)
			if errors.Is(err, errStopped) {
				return
			}
			var transient *transientError
			s.mu.Lock()
			limited := !s.connected
			s.mu.Unlock()
			if ctx.Err() != nil || !errors.As(err, &transient) || limited && failures >= s.c.policy.MaxAttempts {
				yield(nil, cmpErr(ctx.Err(), err))
				return
			}
			waits.atLeast(transient.retryAfter)
			wait := waits.NextBackOff()
			if s.c.onRetry != nil {
				s.c.onRetry(failures, wait, transient.err)
			}
			if err := sleepCtx(ctx, wait); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// errStopped says the caller's loop broke off.
var errStopped = errors.New("stopped by the caller")

func cmpErr(first, second error) error {
	if first != nil {
		return first
	}
	return second
}

// once is one connection: it yields the events it reads until the
// connection ends (a *transientError) or the caller stops (errStopped).
func (s *EventStream) once(ctx context.Context, yield func(*Event, error) bool) error {
	opts := s.opts
	q, err := opts.query(0)
	if err != nil {
		return err
	}
	q.Del("limit")
	r := newRequest(routeStreamEvents, "/v1/events/stream")
	r.query = q
	if last := s.Cursor(); last != "" && last != EventsNow && last != opts.After {
		r.header.Set("Last-Event-ID", last)
	}
	res, v, err := s.c.attempt(ctx, r)
	if err != nil {
		if v == retry {
			return &transientError{err: err, retryAfter: retryAfterOf(err)}
		}
		return err
	}
	defer res.Body.Close()
	s.mu.Lock()
	s.connected = true
	s.mu.Unlock()
	lines := bufio.NewScanner(res.Body)
	lines.Buffer(make([]byte, 64<<10), maxEventPageBytes)
	var id, data string
	for lines.Scan() {
		name, value, _ := strings.Cut(lines.Text(), ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			id = value
		case "data":
			data = value
		case "":
			if lines.Text() != "" {
				continue // a comment: a heartbeat
			}
			if err := s.dispatch(id, data, yield); err != nil {
				return err
			}
			id, data = "", ""
		}
	}
	return &transientError{err: s.c.opError(r, fmt.Errorf("the event stream ended: %w", cmpErr(lines.Err(), errors.New("closed"))))}
}

// dispatch hands out one message: its id is where the stream stands, its
// data (if any) an event.
func (s *EventStream) dispatch(id, data string, yield func(*Event, error) bool) error {
	var e *Event
	if data != "" {
		e = new(Event)
		if err := json.Unmarshal([]byte(data), e); err != nil {
			return fmt.Errorf("decode a streamed event: %w", err)
		}
	}
	if id != "" {
		s.mu.Lock()
		s.last = id
		s.mu.Unlock()
	}
	if e != nil && !yield(e, nil) {
		return errStopped
	}
	return nil
}
