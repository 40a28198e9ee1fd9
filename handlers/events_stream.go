package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// defaultStreamHeartbeat is Limits.StreamHeartbeat when it is zero.
const defaultStreamHeartbeat = 15 * time.Second

// streamEvents is GET /v1/events/stream: the feed as Server-Sent Events,
// each event `id: CURSOR`, `event: TYPE`, `data: EVENT`. It follows the
// cursors as GET /v1/events does (the same reader, the same waiters: no
// gap, no repeat), from after or, on a reconnect, from Last-Event-ID,
// which wins. A quiet stream sends a comment every heartbeat with the
// cursor it is at as its id (so a client that saw no event resumes from
// there, and its cursor never grows old). Every heartbeat it looks again
// whether its token still stands: a revoked token's stream ends. It ends too when the
// server shuts down; the client reconnects with Last-Event-ID.
func (a *API) streamEvents(c echo.Context) error {
	filter, _, err := a.bindEventFilter(c)
	if err != nil {
		return err
	}
	if err := resumeFrom(c, &filter); err != nil {
		return err
	}
	ctx, who := c.Request().Context(), caller(c)
	// The first look before the status: a bad cursor is a problem.
	events, next, err := a.deps.Ledger.AwaitEvents(ctx, who, filter, 0)
	if err != nil {
		return eventsProblem(err)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx and friends: do not hold the stream back
	c.Response().WriteHeader(200)
	if c.Request().Method == "HEAD" {
		return nil
	}
	out := newClientWriter(c.Response(), a.deps.Limits.WriteIdleTimeout)
	defer out.done()
	beat := a.deps.Limits.StreamHeartbeat
	if beat <= 0 {
		beat = defaultStreamHeartbeat
	}
	checked := time.Now()
	for {
		msg := sseEvents(events, who.Subject)
		if len(events) == 0 {
			msg = []byte(": heartbeat\nid: " + next.String() + "\n\n")
		}
		if _, err := out.Write(msg); err != nil {
			return nil // the client went away
		}
		c.Response().Flush()
		if time.Since(checked) >= beat {
			if !a.tokenStands(c) {
				return nil
			}
			checked = time.Now()
		}
		filter.After = &next
		select {
		case <-a.deps.Ledger.Draining():
			return nil
		default:
		}
		if events, next, err = a.deps.Ledger.AwaitEvents(ctx, who, filter, beat); err != nil {
			return a.endStream(c, out, err)
		}
	}
}

// resumeFrom sets filter's cursor from Last-Event-ID, the id of the last
// event (or heartbeat) a reconnecting client saw.
func resumeFrom(c echo.Context, filter *agentfs.EventFilter) error {
	id := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID"))
	if id == "" {
		return nil
	}
	cur, err := agentfs.ParseEventCursor(id, principal(c).Subject)
	if err != nil {
		p := problem.New(problem.InvalidHeader, "Last-Event-ID must be an id this stream sent: "+err.Error())
		p.Errors = []problem.FieldError{{Field: "Last-Event-ID", Message: "not an event cursor of this subject"}}
		return p
	}
	filter.After = &cur
	return nil
}

// sseEvents renders events as Server-Sent Events, each with its cursor as
// its id.
func sseEvents(events []*agentfs.Event, subject string) []byte {
	var b bytes.Buffer
	for _, e := range events {
		data, _ := json.Marshal(render.Event(e)) // plain strings and numbers: cannot fail
		cur := agentfs.EventCursor{Subject: subject, Position: e.Position, At: e.At}
		b.WriteString("id: " + cur.String() + "\nevent: " + e.Type + "\ndata: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// tokenStands reports whether the stream's bearer token is still good
// (looked up as authenticate does; the cache forgets a revoked token as
// its revocation commits). A lookup that fails for another reason (the
// database away for a moment) keeps the stream.
func (a *API) tokenStands(c echo.Context) bool {
	_, token, _ := strings.Cut(c.Request().Header.Get("Authorization"), " ")
	_, err := a.lookupToken(c, strings.TrimSpace(token))
	_, refused := refusedToken(err)
	return !refused
}

// endStream ends a stream whose read failed after the status was sent: a
// client gone ends it quietly; anything else is said as an SSE comment
// and logged, and the client reconnects with the last id it saw.
func (a *API) endStream(c echo.Context, out *clientWriter, err error) error {
	ctx := c.Request().Context()
	if ctx.Err() != nil {
		return nil
	}
	a.deps.Log.WarnContext(ctx, "event stream ended", "err", err)
	reason := "the stream ended; reconnect with Last-Event-ID"
	if errors.Is(err, agentfs.ErrCursorExpired) {
		reason = "the cursor expired; start again without after"
	}
	_, _ = out.Write([]byte(": " + reason + "\n\n"))
	return nil
}
