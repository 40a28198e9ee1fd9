package handlers

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/quota"
)

// Quota keeps the bytes each subject may still write per window (package
// quota reads a body against it).
type Quota = quota.Store

// RateLimits holds one token bucket per subject: the request rate limit
// of every door an instance serves (each REST request, each call of an MCP
// request). The request rate is limited per instance (documented in
// /v1/protocol and docs/operating.md); the byte quota is global. A bucket
// that has filled up again is no different from a new one, so such buckets
// are dropped now and then: the map holds only the subjects active lately,
// however many there ever were.
type RateLimits struct {
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

// overflowKey is the bucket the keys past RateLimits.max share.
const overflowKey = "\x00overflow"

// NewRateLimits limits each subject to perSec requests per second, burst at
// once; perSec 0 or less is no limit.
func NewRateLimits(perSec float64, burst int) *RateLimits {
	return newRateLimits(perSec, burst, time.Now)
}

func newRateLimits(perSec float64, burst int, now func() time.Time) *RateLimits {
	return &RateLimits{perSec: perSec, burst: max(burst, 1), buckets: map[string]*rate.Limiter{}, now: now}
}

// Take takes n requests from subject's bucket, or none: wait is 0 when
// they are taken, else how long until they would be (a caller that does not
// wait gets them back); ok is false when n is more than the burst, so
// they never will be. With no limit it takes nothing and allows all.
func (r *RateLimits) Take(subject string, n int) (wait time.Duration, ok bool) {
	if r.perSec <= 0 || n <= 0 {
		return 0, true
	}
	if n > r.burst {
		return 0, false
	}
	return r.reserve(subject, n), true
}

// reserve takes n requests from the subject's bucket and returns how long
// it would have to wait (0: go ahead); a caller that does not wait gets
// its tokens back.
func (r *RateLimits) reserve(subject string, n int) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > r.fillTime() {
		r.sweep(now)
	}
	b := r.bucketLocked(subject, now)
	res := b.ReserveN(now, n)
	d := res.DelayFrom(now)
	if d > 0 {
		res.CancelAt(now)
	}
	return d
}

// bucketLocked is key's bucket, made if it has none.
func (r *RateLimits) bucketLocked(key string, now time.Time) *rate.Limiter {
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
func (r *RateLimits) waitFor(key string) time.Duration {
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
func (r *RateLimits) spend(key string) {
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
func (r *RateLimits) fillTime() time.Duration {
	return max(time.Minute, time.Duration(float64(r.burst)/r.perSec*float64(time.Second)))
}

// sweep drops the buckets that are full again.
func (r *RateLimits) sweep(now time.Time) {
	r.swept = now
	for s, b := range r.buckets {
		if b.TokensAt(now) >= float64(r.burst) {
			delete(r.buckets, s)
		}
	}
}

// size is how many subjects have a bucket.
func (r *RateLimits) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buckets)
}

// limitRate answers 429 RATE_LIMITED, with the wait until a request would
// be allowed as Retry-After, when a subject exceeds its request rate.
func (a *API) limitRate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if d, _ := a.rates.Take(principal(c).Subject, 1); d > 0 {
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

// limitBytes enforces the per-subject quota of bytes written per window
// (the error contract) across instances, by reading the body against the
// quota (quota.Body): a declared length is reserved whole before the body
// is read: when it does not fit, 429 QUOTA_EXCEEDED with Retry-After until
// the window ends, and the body is not read. A body of unknown length
// reserves as it streams; a body that outgrows what is left fails to
// read, and the request answers 429 with nothing stored. A write that
// succeeds keeps the bytes it read; one that fails or replays gives its
// reservation back. A replay writes nothing, so no quota refuses it.
func (a *API) limitBytes(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		l := a.deps.Limits
		req := c.Request()
		if l.QuotaBytes <= 0 || req.Method == http.MethodGet || req.Method == http.MethodHead ||
			req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		body := quota.NewBody(req.Context(), req.Body, a.deps.Quota, principal(c).Subject,
			quota.Limit{Bytes: l.QuotaBytes, Window: l.QuotaWindow}, func() bool { return a.replayable(c) })
		if req.ContentLength > 0 {
			if err := body.ReserveDeclared(req.ContentLength); err != nil {
				c.Response().Header().Set(echo.HeaderConnection, "close") // the body is not read
				return err
			}
		}
		replaceBody(c, body)
		err := next(c)
		kept := err == nil && c.Response().Status < 300 && c.Response().Header().Get(idempotency.ReplayHeader) == ""
		if serr := body.Settle(kept); serr != nil {
			a.deps.Log.WarnContext(req.Context(), "release quota", "err", serr)
		}
		if body.Cut() {
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
