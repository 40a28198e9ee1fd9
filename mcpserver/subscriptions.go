package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/reads"
)

// Resource subscriptions on the stateless /mcp door. Any instance answers
// any request, so nothing a subscription needs lives in one process:
//
//   - Up to 2025-11-25 (resources/subscribe): initialize answers an
//     Mcp-Session-Id the door makes up; resources/subscribe records a watch
//     of (subject, session, path) in Postgres; the session's GET /mcp
//     stream, held by whichever instance the client reached, follows the
//     subject's event feed and sends notifications/resources/updated for
//     every event a watch of the session covers. DELETE /mcp ends the
//     session's watches; watches of a session whose stream is gone are
//     swept after AGENTFS_MCP_SUBSCRIPTION_TTL.
//   - In 2026-07-28 (subscriptions/listen): the listen request is itself
//     the stream; the instance holding it follows the subject's feed from
//     the moment it arrived, so nothing is kept in Postgres.
//
// Either way the feed carries every door's changes (REST, batch items,
// other MCP sessions, run reverts) from every instance.

// SessionHeader is the header of the session a client initialized.
const SessionHeader = "Mcp-Session-Id"

const sessionPrefix = "mcps_"

var sessionEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newSessionID is a session id no one can guess: mcps_ and 26 base32
// characters of 128 random bits.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return sessionPrefix + strings.ToLower(sessionEncoding.EncodeToString(b[:]))
}

// ValidSessionID reports whether s is a session id this door makes.
func ValidSessionID(s string) bool {
	rest, ok := strings.CutPrefix(s, sessionPrefix)
	if !ok || len(rest) != 26 {
		return false
	}
	_, err := sessionEncoding.DecodeString(strings.ToUpper(rest))
	return err == nil
}

type sessionKey struct{}

func withSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

func sessionOf(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}

// subscriptions are what the SDK calls on resources/subscribe and
// resources/unsubscribe.
type subscriptions interface {
	subscribe(ctx context.Context, req *mcp.SubscribeRequest) error
	unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error
}

// watches keeps a session's subscriptions in Postgres (resources/subscribe).
type watches struct{ gate *reads.Gate }

func (w watches) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	session := sessionOf(ctx)
	if session == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "resources/subscribe needs a session: " +
			"send the Mcp-Session-Id header that initialize answered (and hold GET /mcp with it to hear the notifications)"}
	}
	path, _, err := ResourcePath(req.Params.URI)
	if err != nil {
		return invalidParams(err.Error())
	}
	who, _ := agentfs.CallerFromContext(ctx)
	_, err = w.gate.Watch(ctx, who, agentfs.Watch{Session: session, Path: path})
	return watchError(err)
}

func (w watches) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	path, _, err := ResourcePath(req.Params.URI)
	if err != nil {
		return invalidParams(err.Error())
	}
	who, _ := agentfs.CallerFromContext(ctx)
	return watchError(w.gate.Unwatch(ctx, who, sessionOf(ctx), path))
}

func watchError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agentfs.ErrTooManyWatches):
		return invalidParams(fmt.Sprintf("a session watches at most %d resources: unsubscribe from some first", agentfs.MaxWatchesPerSession))
	}
	p := problemOfCore(err)
	data, _ := json.Marshal(p)
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: p.Error(), Data: data}
}

// listening collects the resources one subscriptions/listen request
// subscribes to (2026-07-28), for the follower of that request.
type listening struct {
	mu    sync.Mutex
	paths map[string]bool // file paths, and directory prefixes ending in "/"
}

func (l *listening) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	path, _, err := ResourcePath(req.Params.URI)
	if err != nil {
		return invalidParams(err.Error())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paths == nil {
		l.paths = map[string]bool{}
	}
	l.paths[path] = true
	return nil
}

func (l *listening) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	path, _, _ := ResourcePath(req.Params.URI)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.paths, path)
	return nil
}

// covering lists the subscribed URIs an event on path concerns: the
// file's own, and those of the directories holding it.
func (l *listening) covering(path string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.paths {
		if (agentfs.Watch{Path: p}).Covers(path) {
			out = append(out, ResourceURI(p))
		}
	}
	return out
}

// feedWait is how long one read of the event feed waits for an event.
const feedWait = 15 * time.Second

// follow reads the caller's event feed from start on until ctx ends,
// handing each event to on; a drained store (shutdown) or a feed that
// fails ends it.
func follow(ctx context.Context, gate *reads.Gate, who agentfs.Caller, start agentfs.EventCursor, on func([]*agentfs.Event) error) error {
	cursor := start
	quick := 0
	for ctx.Err() == nil {
		began := time.Now()
		events, next, err := gate.AwaitEvents(ctx, who, agentfs.EventFilter{After: &cursor, Limit: 200}, feedWait)
		if err != nil {
			return err
		}
		cursor = next
		if len(events) == 0 && time.Since(began) < feedWait/10 {
			if quick++; quick >= 3 { // the store answers at once: it is draining
				return nil
			}
			continue
		}
		quick = 0
		if err := on(events); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// eventPaths are the paths an event changed: its own and, for a move, the
// one it left.
func eventPaths(ev *agentfs.Event) []string {
	if ev.PreviousPath != "" && ev.PreviousPath != ev.Path {
		return []string{ev.Path, ev.PreviousPath}
	}
	return []string{ev.Path}
}

// updated is the notification of a change to the resource uri.
func updated(uri string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/resources/updated",
		"params": map[string]any{"uri": uri}})
	return b
}

// streamLifetime bounds one GET stream: the client opens another (as the
// transport lets it), so no request is held for ever.
const streamLifetime = 10 * time.Minute

// stream is GET (and HEAD) /mcp: the notification stream of the session the client
// names, for versions up to 2025-11-25.
func (d *door) stream(w http.ResponseWriter, r *http.Request, who agentfs.Caller) {
	session, ok := sessionHeader(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), streamLifetime)
	defer cancel()
	start, err := d.gate.EventsStart(ctx, who)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if err := d.gate.TouchWatches(ctx, who, session); err != nil {
		writeFailure(w, err)
		return
	}
	// Watches made before the stream opened hear events from their own
	// start, so a change between subscribe and GET is not lost.
	if ws, err := d.gate.Watches(ctx, who, session); err == nil {
		for _, wt := range ws {
			if wt.After.Position < start.Position {
				start = wt.After
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	touched := time.Now()
	err = follow(ctx, d.gate, who, start, func(events []*agentfs.Event) error {
		ws, err := d.gate.Watches(ctx, who, session)
		if err != nil {
			return err
		}
		if time.Since(touched) > time.Minute {
			touched = time.Now()
			if err := d.gate.TouchWatches(ctx, who, session); err != nil {
				return err
			}
		}
		for _, ev := range events {
			for _, uri := range watchedURIs(ws, ev) {
				if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", updated(uri)); err != nil {
					return err
				}
			}
		}
		if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && ctx.Err() == nil {
		d.log.Warn("mcp notification stream ended", "error", err)
	}
}

// watchedURIs are the URIs of the event's paths that a watch covers and
// that changed after the watch was made.
func watchedURIs(ws []agentfs.Watch, ev *agentfs.Event) []string {
	var out []string
	for _, p := range eventPaths(ev) {
		for _, wt := range ws {
			if ev.Position > wt.After.Position && wt.Covers(p) {
				out = append(out, ResourceURI(p))
				break
			}
		}
	}
	return out
}

// endSession is DELETE /mcp: the session's watches end.
func (d *door) endSession(w http.ResponseWriter, r *http.Request, who agentfs.Caller) {
	session, ok := sessionHeader(w, r)
	if !ok {
		return
	}
	if err := d.gate.EndWatches(r.Context(), who, session); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listen serves a subscriptions/listen request (2026-07-28): a server of
// its own, whose resource subscriptions its follower feeds from the
// caller's event feed, from the moment the request arrived.
func (d *door) listen(w http.ResponseWriter, r *http.Request, who agentfs.Caller) {
	start, err := d.gate.EventsStart(r.Context(), who)
	if err != nil {
		writeFailure(w, err)
		return
	}
	subs := &listening{}
	srv, err := newServer(d.backend, d.opts, subs)
	if err != nil {
		writeRPCError(w, http.StatusInternalServerError, nil, jsonrpc.CodeInternalError, "the server could not start the subscription")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		_ = follow(ctx, d.gate, who, start, func(events []*agentfs.Event) error {
			for _, ev := range events {
				for _, p := range eventPaths(ev) {
					for _, uri := range subs.covering(p) {
						_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
					}
				}
			}
			return nil
		})
	}()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: d.maxBody})
	h.ServeHTTP(w, r.WithContext(ctx))
}

// writeFailure answers a failure of GET or DELETE /mcp (not JSON-RPC
// messages) as the API's problem.
func writeFailure(w http.ResponseWriter, err error) {
	p, _ := problem.From(err)
	writeProblem(w, p)
}

// sessionHeader is the request's session, or a problem answered.
func sessionHeader(w http.ResponseWriter, r *http.Request) (string, bool) {
	session := r.Header.Get(SessionHeader)
	if !ValidSessionID(session) {
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet // the same answer, without its body
		}
		writeProblem(w, problem.New(problem.InvalidHeader, fmt.Sprintf(
			"%s /mcp needs the Mcp-Session-Id header that initialize answered (mcps_ and 26 characters)", method)))
		return "", false
	}
	return session, true
}
