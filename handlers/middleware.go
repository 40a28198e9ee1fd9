package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// Context keys of what middleware learned about a request.
const (
	principalKey   = "agentfs.principal"
	attributionKey = "agentfs.attribution"
	keyKey         = "agentfs.idempotency_key"
)

// requestID gives every response an X-Request-ID: the caller's, when it is
// sane, else a new one.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(problem.RequestIDHeader)
		if !saneRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = "req_" + hex.EncodeToString(b[:])
		}
		c.Response().Header().Set(problem.RequestIDHeader, id)
		return next(c)
	}
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

// recoverPanics turns a panic in a handler into an error, so the caller gets
// a generic 500 problem and the log gets the cause.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// observe logs each request and counts it in the metrics. Errors are
// answered here, so the status is known. A response cut short after its
// status (cutResponse) is counted, as a client gone when the client went
// away or stalled, and then its connection is aborted.
func (a *API) observe(m *metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			status := 0
			var body *countedBody
			if req := c.Request(); req.Body != nil && req.Body != http.NoBody {
				body = &countedBody{rc: req.Body}
				replaceBody(c, body)
			}
			var cut *cutResponse
			if err := next(c); err != nil {
				switch {
				case errors.As(err, &cut):
					// Cut after the status was sent: its handler logged why.
					if cut.clientGone {
						status = statusClientGone
					}
				case gone(c, err):
					// Nobody is left to answer: not an outage, not a 5xx.
					a.deps.Log.DebugContext(c.Request().Context(), "client gone", "err", err)
					status = statusClientGone
				default:
					c.Error(err)
				}
			}
			route := c.Path()
			if !a.routes[route] {
				route = "unmatched"
			}
			if status == 0 {
				status = c.Response().Status
			}
			var received int64
			if body != nil {
				received = body.n.Load()
			}
			m.observe(c.Request().Method, route, status, time.Since(start), received, c.Response().Size)
			a.deps.Log.InfoContext(c.Request().Context(), "request",
				"method", c.Request().Method, "route", route, "status", status,
				"bytes_out", c.Response().Size, "duration_ms", time.Since(start).Milliseconds(),
				"request_id", c.Response().Header().Get(problem.RequestIDHeader))
			if cut != nil {
				panic(http.ErrAbortHandler) // the client must see a short body
			}
			return nil
		}
	}
}

// statusClientGone is logged and counted for a request whose client went
// away before it could be answered (nginx's 499, "client closed request").
const statusClientGone = 499

// gone reports whether the request's client went away (the connection
// closed, an HTTP/1.0 client half-closed it) before the answer. A body
// that stalled past the idle limit also ends the request's context, but
// that client is still there to be told 408.
func gone(c echo.Context, err error) bool {
	return c.Request().Context().Err() != nil && !c.Response().Committed && !errors.Is(err, agentfs.ErrBodyStalled)
}

// singleLineHeaders are the request headers whose value changes what a
// request means, so a request may send each in one line only: which of two
// tokens, keys, digests, media types, preconditions, ranges or attributions
// was meant cannot be told, and taking the first would silently ignore
// the other. A list (If-None-Match: "a", "b") goes in one line. The MCP
// door's headers are here too: the SDK reads the first line.
var singleLineHeaders = []string{
	echo.HeaderAuthorization, idempotency.Header, echo.HeaderContentType, "Content-Digest",
	"If-Match", "If-None-Match", "If-Range", "Range", "X-Agent-ID", "X-Run-ID",
	"MCP-Protocol-Version", "Mcp-Session-Id",
}

// singleHeaders refuses a request that sends one of singleLineHeaders in
// more than one line (400 INVALID_HEADER), before anything reads them.
func singleHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for _, name := range singleLineHeaders {
			if len(c.Request().Header.Values(name)) > 1 {
				p := problem.New(problem.InvalidHeader, name+" is sent more than once; send it in one line")
				p.Errors = []problem.FieldError{{Field: name, Message: "is sent more than once"}}
				return p
			}
		}
		return next(c)
	}
}

// linkInstance makes every problem of a share link route show the route's
// template as its instance, never the path, which holds the link's secret:
// from the first middleware on, not only once its handler runs.
func linkInstance(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		problem.SetInstance(c, "/s/{secret}")
		return next(c)
	}
}

// authenticate requires a valid bearer token and remembers its principal:
// an AgentFS token, or a JWT access token of the configured OAuth issuer
// (lookupToken). A client address past its failed authentications (tokens guessed at
// random, which no cache can answer) is answered 429 without a lookup,
// unless this instance already trusts its token.
func (a *API) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scheme, token, ok := strings.Cut(c.Request().Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return problem.New(problem.Unauthenticated, "send Authorization: Bearer TOKEN")
		}
		token = strings.TrimSpace(token)
		addr := clientAddress(c.Request().RemoteAddr)
		if wait := a.authFails.waitFor(addr); wait > 0 {
			p, ok := a.trustedToken(c, token)
			if !ok {
				return a.tooManyFailures(wait)
			}
			c.Set(principalKey, p)
			return next(c)
		}
		p, err := a.lookupToken(c, token)
		if refusal, refused := refusedToken(err); refused {
			a.authFails.spend(addr)
			return refusal
		} else if refusal != nil {
			return refusal
		}
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// requireScope refuses a request whose token lacks a scope the route's
// operation needs (403 FORBIDDEN naming it), before its headers and body
// are looked at: the operation table decides, as it does again where the
// operation runs (the admission core, the read gate).
func requireScope(op string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := caller(c).Allow(op); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// attribution validates X-Agent-ID and X-Run-ID and remembers them; a
// token pinned to a run or agent fills what the request left out (one
// that names another is refused where the request runs: Caller.Allow).
func attribution(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var by agentfs.Attribution
		for _, h := range []struct {
			name string
			dst  *string
		}{{"X-Agent-ID", &by.AgentID}, {"X-Run-ID", &by.RunID}} {
			vs := c.Request().Header.Values(h.name)
			if len(vs) == 0 {
				continue
			}
			if len(vs) > 1 || !agentfs.ValidTagValue(vs[0]) {
				p := problem.New(problem.InvalidHeader, h.name+" must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit")
				p.Errors = []problem.FieldError{{Field: h.name, Message: "invalid value"}}
				return p
			}
			*h.dst = vs[0]
		}
		if pinned, err := principal(c).Grant.Attribute(by); err == nil {
			by = pinned
		}
		c.Set(attributionKey, by)
		return next(c)
	}
}

// idempotencyKey validates the Idempotency-Key of a write.
func idempotencyKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		v := c.Request().Header.Get(idempotency.Header)
		if v == "" {
			return next(c)
		}
		if m := c.Request().Method; m == http.MethodGet || m == http.MethodHead {
			return next(c) // ignored on reads
		}
		key, err := idempotency.ParseKey(v)
		if err != nil {
			return problem.New(problem.InvalidIdempotencyKey, err.Error())
		}
		c.Set(keyKey, key)
		return next(c)
	}
}

func principal(c echo.Context) agentfs.Principal {
	p, _ := c.Get(principalKey).(agentfs.Principal)
	return p
}

func attributionOf(c echo.Context) agentfs.Attribution {
	by, _ := c.Get(attributionKey).(agentfs.Attribution)
	return by
}

// caller is who asks for the request's write, under which key.
func caller(c echo.Context) agentfs.Caller {
	key, _ := c.Get(keyKey).(string)
	p := principal(c)
	return agentfs.Caller{Subject: p.Subject, Grant: p.Grant, Key: key, By: attributionOf(c), TokenID: p.TokenID,
		RequestID: c.Response().Header().Get(problem.RequestIDHeader), RequestURI: c.Request().URL.RequestURI()}
}

// bodyIdle fails a request whose body stops arriving for longer than the
// idle limit (408, connection closed), so a stalled client cannot hold a
// claim, a connection and an S3 upload open. Each read extends the
// connection's read deadline.
func (a *API) bodyIdle(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		idle := a.deps.Limits.BodyIdleTimeout
		if idle <= 0 || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		body := &idleBody{rc: req.Body, ctl: http.NewResponseController(c.Response().Writer), idle: idle}
		replaceBody(c, body)
		err := next(c)
		if body.stalled {
			c.Response().Header().Set(echo.HeaderConnection, "close")
		}
		return err
	}
}

type idleBody struct {
	rc      io.ReadCloser
	ctl     *http.ResponseController
	idle    time.Duration
	stalled bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.ctl.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.rc.Read(p)
	var ne net.Error
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		b.stalled = true
		return n, fmt.Errorf("%w: %w", agentfs.ErrBodyStalled, err)
	}
	return n, err
}

func (b *idleBody) Close() error { return b.rc.Close() }

// replaceBody gives the handlers a request whose body is wrapped, leaving
// the server's own request untouched: net/http inspects that body's type
// after the handler to decide whether to drain an unread body or close the
// connection, and must not block draining one that never comes.
func replaceBody(c echo.Context, body io.ReadCloser) {
	r := *c.Request()
	r.Body = body
	c.SetRequest(&r)
}
