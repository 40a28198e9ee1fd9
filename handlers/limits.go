package handlers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// Quota keeps the bytes each subject may still write per window, in
// Postgres, so the quota holds across instances: bytes are reserved
// atomically before they are accepted, and what a write did not use is
// released.
type Quota interface {
	ReserveQuota(ctx context.Context, subject string, start time.Time, want, limit int64, partial bool) (got, used int64, err error)
	ReleaseQuota(ctx context.Context, subject string, start time.Time, n int64) error
}

// rateLimits holds one token bucket per subject. The request rate is
// limited per instance (documented in /v1/protocol and docs/operating.md); the
// byte quota is global. A bucket that has filled up again is no different
// from a new one, so such buckets are dropped now and then: the map holds
// only the subjects active lately, however many there ever were.
type rateLimits struct {
	mu      sync.Mutex
	perSec  float64
	burst   int
	buckets map[string]*rate.Limiter
	now     func() time.Time
	swept   time.Time
	// max, when set, bounds the buckets: past it (once the full ones are
	// dropped), new keys share one bucket, so keys a caller chooses (client
	// addresses) cannot grow the map without bound.
	max int
}

// overflowKey is the bucket the keys past rateLimits.max share.
const overflowKey = "\x00overflow"

func newRateLimits(perSec float64, burst int, now func() time.Time) *rateLimits {
	return &rateLimits{perSec: perSec, burst: max(burst, 1), buckets: map[string]*rate.Limiter{}, now: now}
}

// reserve takes one request from the subject's bucket and returns how long
// it would have to wait (0: go ahead); a caller that does not wait gets
// its token back.
func (r *rateLimits) reserve(subject string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > r.fillTime() {
		r.sweep(now)
	}
	b := r.bucketLocked(subject, now)
	res := b.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d > 0 {
		res.CancelAt(now)
	}
	return d
}

// bucketLocked is key's bucket, made if it has none.
func (r *rateLimits) bucketLocked(key string, now time.Time) *rate.Limiter {
	if b, ok := r.buckets[key]; ok {
		return b
	}
	if r.max > 0 && len(r.buckets) >= r.max {
		r.sweep(now)
		if len(r.buckets) >= r.max {
			key = overflowKey
			if b, ok := r.buckets[key]; ok {
				return b
			}
		}
	}
	b := rate.NewLimiter(rate.Limit(r.perSec), r.burst)
	r.buckets[key] = b
	return b
}

// waitFor is how long until key's bucket holds a request again, taking
// none (0: it holds one now, or limits are off).
func (r *rateLimits) waitFor(key string) time.Duration {
	if r.perSec <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets[key]
	if !ok && r.max > 0 && len(r.buckets) >= r.max {
		b, ok = r.buckets[overflowKey]
	}
	if !ok {
		return 0
	}
	tokens := b.TokensAt(r.now())
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / r.perSec * float64(time.Second))
}

// spend takes one request from key's bucket, if it holds one.
func (r *rateLimits) spend(key string) {
	if r.perSec <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > r.fillTime() {
		r.sweep(now)
	}
	r.bucketLocked(key, now).AllowN(now, 1)
}

// fillTime is how long an empty bucket takes to fill (at least a minute
// between sweeps).
func (r *rateLimits) fillTime() time.Duration {
	return max(time.Minute, time.Duration(float64(r.burst)/r.perSec*float64(time.Second)))
}

// sweep drops the buckets that are full again.
func (r *rateLimits) sweep(now time.Time) {
	r.swept = now
	for s, b := range r.buckets {
		if b.TokensAt(now) >= float64(r.burst) {
			delete(r.buckets, s)
		}
	}
}

// size is how many subjects have a bucket.
func (r *rateLimits) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buckets)
}

// limitRate answers 429 RATE_LIMITED, with the wait until a request would
// be allowed as Retry-After, when a subject exceeds its request rate.
func (a *API) limitRate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if a.rates.perSec <= 0 {
			return next(c)
		}
		if d := a.rates.reserve(principal(c).Subject); d > 0 {
			p := problem.New(problem.RateLimited, fmt.Sprintf("more than %g requests per second", a.rates.perSec))
			p.RetryAfter = int(math.Ceil(d.Seconds()))
			return p
		}
		return next(c)
	}
}

// maxFailingAddresses bounds how many client addresses have their failed
// authentications counted apart; past it, the others share one count.
const maxFailingAddresses = 65536

// clientAddress is what failed authentications are counted by: the peer's
// IP address (never a header it could choose), an IPv6 one by its /64, the
// block one host is usually given.
func clientAddress(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// tooManyFailures is the answer to an address past its failed
// authentications.
func (a *API) tooManyFailures(wait time.Duration) *problem.Problem {
	p := problem.New(problem.RateLimited, fmt.Sprintf("more than %d failed authentications from this address; wait, then send a valid token",
		a.authFails.burst))
	p.RetryAfter = max(1, int(math.Ceil(wait.Seconds())))
	return p
}

// quotaStep is how much of the quota a body of unknown length reserves at
// a time, ahead of the bytes it reads.
const quotaStep = 1 << 20

// limitBytes enforces the per-subject quota of bytes written per window
// (the error contract) across instances, by reserving bytes in Postgres before they
// are accepted. A declared length is reserved whole before the body is
// read: when it does not fit, 429 QUOTA_EXCEEDED with Retry-After until
// the window ends, and the body is not read. A body of unknown length
// reserves as it streams, a step ahead, then exactly what is left; a body
// that outgrows that fails to read, and the request answers 429 with
// nothing stored. A write that succeeds keeps the bytes it read; one that
// fails or replays gives its reservation back. A replay writes nothing, so
// no quota refuses it.
func (a *API) limitBytes(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		l := a.deps.Limits
		req := c.Request()
		if l.QuotaBytes <= 0 || req.Method == http.MethodGet || req.Method == http.MethodHead ||
			req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		body := &quotaBody{rc: req.Body, ctx: req.Context(), quota: a.deps.Quota, subject: principal(c).Subject,
			limit: l.QuotaBytes, window: l.QuotaWindow, start: time.Now().Truncate(l.QuotaWindow),
			replay: func() bool { return a.replayable(c) }}
		if req.ContentLength > 0 {
			if err := body.reserveDeclared(req.ContentLength); err != nil {
				c.Response().Header().Set(echo.HeaderConnection, "close") // the body is not read
				return err
			}
		}
		replaceBody(c, body)
		err := next(c)
		kept := err == nil && c.Response().Status < 300 && c.Response().Header().Get(idempotency.ReplayHeader) == ""
		body.settle(kept, a.deps.Log)
		if body.cut {
			c.Response().Header().Set(echo.HeaderConnection, "close") // the rest of the body is not read
		}
		return err
	}
}

// replayable reports whether the request's key already holds an outcome:
// a replay writes nothing, so no quota refuses it.
func (a *API) replayable(c echo.Context) bool {
	key, _ := c.Get(keyKey).(string)
	if key == "" {
		return false
	}
	rec, err := a.deps.Writes.Operation(c.Request().Context(), principal(c).Subject, key)
	return err == nil && rec.Completed
}

// quotaBody is a request body read against the subject's byte quota: it
// reads only bytes reserved beforehand (all of them for a declared length,
// a step at a time otherwise) and fails with a QuotaExceededError when a
// body outgrows what the quota has left.
type quotaBody struct {
	rc      io.ReadCloser
	ctx     context.Context
	quota   Quota
	subject string
	start   time.Time // of the window the reservation is in
	limit   int64
	window  time.Duration
	// replay reports whether the request will replay a recorded outcome
	// (asked only when the quota would refuse it).
	replay func() bool

	declared bool  // the whole declared length is reserved
	free     bool  // a replay: read without reserving
	reserved int64 // bytes reserved so far
	n        int64 // bytes read
	cut      bool  // the body outgrew the quota
	err      error // sticky: the read that failed on the quota
}

// reserveDeclared reserves a declared length whole, or refuses the request.
func (b *quotaBody) reserveDeclared(length int64) error {
	got, used, err := b.quota.ReserveQuota(b.ctx, b.subject, b.start, length, b.limit, false)
	switch {
	case err != nil:
		return err
	case got > 0:
		b.declared, b.reserved = true, got
		return nil
	case b.replay():
		b.free = true
		return nil
	}
	return b.exceeded(used)
}

func (b *quotaBody) exceeded(used int64) error {
	return &agentfs.QuotaExceededError{Used: used, Limit: b.limit, Window: b.window,
		RetryAfter: time.Until(b.start.Add(b.window))}
}

func (b *quotaBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.declared || b.free { // net/http holds the body to its declared length
		n, err := b.rc.Read(p)
		b.n += int64(n)
		return n, err
	}
	if b.n == b.reserved {
		if err := b.reserveMore(); err != nil {
			b.err = err
			return 0, err
		}
		if b.free {
			return b.Read(p)
		}
	}
	p = p[:min(int64(len(p)), b.reserved-b.n)]
	n, err := b.rc.Read(p)
	b.n += int64(n)
	return n, err
}

// reserveMore reserves the next step of a body of unknown length, or what
// is left of the quota; when nothing is left it fails unless the body has
// ended (or the request replays).
func (b *quotaBody) reserveMore() error {
	got, used, err := b.quota.ReserveQuota(b.ctx, b.subject, b.start, quotaStep, b.limit, true)
	if err != nil {
		return err
	}
	b.reserved += got
	if got > 0 {
		return nil
	}
	var one [1]byte
	n, err := io.ReadFull(b.rc, one[:])
	switch {
	case n == 0:
		return err // the body ended exactly at the quota (io.EOF), or failed
	case b.replay():
		b.free = true
		b.rc = io.NopCloser(io.MultiReader(bytes.NewReader(one[:n]), b.rc))
		return nil
	}
	b.cut = true
	return b.exceeded(used)
}

// settle keeps the bytes a write that succeeded read and gives back every
// other reserved byte: all of them when the write failed or replayed.
func (b *quotaBody) settle(kept bool, log *slog.Logger) {
	release := b.reserved
	if kept {
		release -= b.n
	}
	if err := b.quota.ReleaseQuota(context.WithoutCancel(b.ctx), b.subject, b.start, release); err != nil {
		log.WarnContext(b.ctx, "release quota", "err", err)
	}
}

func (b *quotaBody) Close() error { return b.rc.Close() }
