package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentfs/agentfs/api"
)

// Event is one effect on a file (schema Event), committed in the same
// transaction as the effect itself: the feed shows exactly what
// happened, once. A replay or a no-op makes none.
type Event = api.Event

// Event types (Event.Type, EventOptions.Types).
const (
	EventFileCreated  = api.EventFileCreated
	EventFileReplaced = api.EventFileReplaced
	EventFileDeleted  = api.EventFileDeleted
	EventFileRestored = api.EventFileRestored
	EventFileMoved    = api.EventFileMoved
	EventFileReverted = api.EventFileReverted
	EventFileExpired  = api.EventFileExpired
	EventFilePurged   = api.EventFilePurged
)

// EventList is one page of events, oldest first (schema EventList); its
// NextCursor is EventOptions.After for the next page, or for the next
// poll when Data was empty.
type EventList = api.EventList

// EventsNow is the EventOptions.After that starts at the current end of
// the feed: exactly the events that commit from then on.
const EventsNow = "now"

// MaxEventWait is the longest EventOptions.Wait the server accepts.
const MaxEventWait = 30 * time.Second

// EventOptions filter and page the event feed. Filters combine with AND.
type EventOptions struct {
	// After is a previous page's NextCursor, EventsNow, or empty for the
	// oldest event the server keeps.
	After   string
	RunID   string // events caused by requests with this X-Run-ID
	AgentID string // events caused by requests with this X-Agent-ID
	FileID  string // events of this file
	Prefix  string // events whose path starts with this string
	// Types keeps these event types only (EventFileCreated, ...).
	Types []string
	// Limit is the page size, 1-1000; zero means the server's default (100).
	Limit int
	// Wait holds the request, up to MaxEventWait in whole seconds, until
	// at least one matching event commits. FollowEvents sets it itself.
	Wait time.Duration
}

// query renders the options; wait is sent as given.
func (o EventOptions) query(wait time.Duration) (url.Values, error) {
	if wait < 0 || wait > MaxEventWait {
		return nil, fmt.Errorf("events: Wait %v is outside 0 to %v", wait, MaxEventWait)
	}
	q := pageQuery(o.Limit, "")
	for name, v := range map[string]string{"after": o.After, "run_id": o.RunID, "agent_id": o.AgentID,
		"file_id": o.FileID, "prefix": o.Prefix, "type": strings.Join(o.Types, ",")} {
		setQuery(q, name, v)
	}
	if secs := int64((wait + time.Second - 1) / time.Second); secs > 0 {
		q.Set("wait", strconv.FormatInt(secs, 10))
	}
	return q, nil
}

// Events returns one page of the subject's events, oldest first (GET
// /v1/events). With opts.Wait the server holds the request until a
// matching event commits or the wait ends. Following NextCursor never
// skips an event and never returns one twice; FollowEvents does it for
// you. A cursor older than the server's event retention is the problem
// CURSOR_EXPIRED (410): start again without After.
func (c *Client) Events(ctx context.Context, opts EventOptions) (*EventList, error) {
	q, err := opts.query(opts.Wait)
	if err != nil {
		return nil, err
	}
	r := newRequest(routeEvents, "/v1/events")
	r.query = q
	return callJSON[EventList](ctx, c, r)
}

// EventFollower follows the event feed from a cursor on, for as long as
// its caller wants: it long-polls for new events, follows each page's
// next cursor, and rides out dropped connections and server restarts by
// asking again from the last cursor it holds, so the events it yields
// have no gap and no repeat. Make one with FollowEvents; it is not safe
// for concurrent use.
type EventFollower struct {
	c    *Client
	opts EventOptions
	wait time.Duration

	mu        sync.Mutex
	cursor    string  // the feed position after every event handed out
	pending   []Event // the rest of the last page, not handed out yet
	pageStart string  // the cursor the last page was asked with
	connected bool    // some poll has succeeded
}

// FollowOptions adjust FollowEvents.
type FollowOptions struct {
	// Wait is how long each poll is held open by the server, 1 s to
	// MaxEventWait; zero means MaxEventWait. A proxy that cuts idle
	// requests sooner needs a shorter one.
	Wait time.Duration
}

// FollowEvents returns a follower of the events that match opts, from
// opts.After on (EventsNow for only what happens from now on, empty for
// the oldest event kept). opts.Wait is ignored: see FollowOptions.
//
//	f := c.FollowEvents(client.EventOptions{RunID: "run-1", After: client.EventsNow}, client.FollowOptions{})
//	for e, err := range f.All(ctx) {
//		if err != nil {
//			log.Printf("stopped; resume with After: %s", f.Cursor())
//			break
//		}
//		fmt.Println(e.Type, e.Path)
//	}
func (c *Client) FollowEvents(opts EventOptions, fopts FollowOptions) *EventFollower {
	wait := fopts.Wait
	if wait == 0 {
		wait = MaxEventWait
	}
	return &EventFollower{c: c, opts: opts, wait: wait, cursor: opts.After}
}

// Cursor returns where the follower stands: following again from it
// (EventOptions.After) yields exactly the events this follower has not
// yielded yet. It is empty (the oldest event) or EventsNow until the first
// poll has answered. When a loop over All is broken off in the middle of
// a page, the events of that page already yielded would come again from
// this cursor; All itself never stops in the middle of a page (see All).
func (f *EventFollower) Cursor() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) > 0 {
		return f.pageStart
	}
	return f.cursor
}

// All yields events as they commit, oldest first, until ctx ends or a
// failure that retrying cannot mend (a problem such as CURSOR_EXPIRED,
// UNAUTHENTICATED or VALIDATION_FAILED), which it yields with a nil event
// before it stops; when ctx ends it yields ctx.Err().
//
// Failures that can mend are retried from the last cursor, with the
// client's backoff (full jitter, doubling up to RetryPolicy.MaxDelay, the
// server's Retry-After as a floor; WithOnRetry hears of every wait):
// dropped connections, 408, 429 and 5xx. Until the first poll has
// answered they count against RetryPolicy.MaxAttempts, so a wrong URL
// fails; once the feed has answered, they are retried without limit, so
// a server restart or an outage of any length is waited out.
//
// Events already received are yielded even after ctx ends: a page is
// always handed out whole, so that Cursor is exact when All returns. All
// may be called again (after an error, say) to go on from Cursor.
func (f *EventFollower) All(ctx context.Context) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		for {
			if e := f.next(); e != nil {
				if !yield(e, nil) {
					return
				}
				continue
			}
			if err := f.poll(ctx); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// next hands out the next event of the last page, or nil.
func (f *EventFollower) next() *Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return nil
	}
	e := f.pending[0]
	f.pending = f.pending[1:]
	return &e
}

// poll asks for the page after the cursor, retrying what can mend, and
// keeps it for next.
func (f *EventFollower) poll(ctx context.Context) error {
	f.mu.Lock()
	opts := f.opts
	opts.After = f.cursor
	f.mu.Unlock()
	q, err := opts.query(f.wait)
	if err != nil {
		return err
	}
	waits := newDelays(f.c.policy, f.c.rand)
	for failures := 1; ; failures++ {
		page, err := f.c.eventsOnce(ctx, q)
		if err == nil {
			f.mu.Lock()
			f.pageStart, f.cursor, f.pending, f.connected = opts.After, page.NextCursor, page.Data, true
			f.mu.Unlock()
			return nil
		}
		var transient *transientError
		if !errors.As(err, &transient) {
			return err
		}
		f.mu.Lock()
		limited := !f.connected
		f.mu.Unlock()
		if limited && failures >= f.c.policy.MaxAttempts {
			return transient.err
		}
		waits.atLeast(transient.retryAfter)
		wait := waits.NextBackOff()
		if f.c.onRetry != nil {
			f.c.onRetry(failures, wait, transient.err)
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
}

// transientError is a poll's failure that asking again can mend.
type transientError struct {
	err        error
	retryAfter time.Duration
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// maxEventPageBytes bounds one page of events read into memory: 1000
// events of the longest paths and ids.
const maxEventPageBytes = 16 << 20

// eventsOnce is one GET /v1/events without retries. A failure that
// asking again can mend comes back as a *transientError: a connection
// that failed or was cut mid-answer, or a problem the retry policy
// retries.
func (c *Client) eventsOnce(ctx context.Context, q url.Values) (*EventList, error) {
	r := newRequest(routeEvents, "/v1/events")
	r.query = q
	res, v, err := c.attempt(ctx, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if v == retry {
			return nil, &transientError{err: err, retryAfter: retryAfterOf(err)}
		}
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxEventPageBytes+1))
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &transientError{err: c.opError(r, fmt.Errorf("read events: %w", err))}
	case len(body) > maxEventPageBytes:
		return nil, c.opError(r, fmt.Errorf("a page of events longer than %d bytes", maxEventPageBytes))
	}
	var l EventList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, c.opError(r, fmt.Errorf("decode events: %w", err))
	}
	if l.NextCursor == "" {
		return nil, c.opError(r, errors.New("the page of events has no next_cursor"))
	}
	return &l, nil
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run is what one run did, from its events (schema Run).
type Run = api.Run

// RunCounts are a run's effects by kind.
type RunCounts = api.RunCounts

// Run returns the summary of the run runID (GET /v1/runs/{run_id}); a
// run with no event of this subject is NOT_FOUND. A "/" in the run id is
// sent escaped, as one path segment.
func (c *Client) Run(ctx context.Context, runID string) (*Run, error) {
	if err := checkTagValue("run id", runID); err != nil {
		return nil, err
	}
	return callJSON[Run](ctx, c, newRequest(routeRun, runPath(runID)))
}
