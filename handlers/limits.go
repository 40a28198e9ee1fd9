package handlers

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// Quota keeps the bytes each subject wrote per window, in Postgres, so the
// quota holds across instances.
type Quota interface {
	QuotaUsed(ctx context.Context, subject string, start time.Time) (int64, error)
	AddQuota(ctx context.Context, subject string, start time.Time, n int64) error
}

// rateLimits holds one token bucket per subject. The request rate is
// limited per instance (documented in /v1/protocol and the README); the
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
}

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
	b, ok := r.buckets[subject]
	if !ok {
		b = rate.NewLimiter(rate.Limit(r.perSec), r.burst)
		r.buckets[subject] = b
	}
	res := b.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d > 0 {
		res.CancelAt(now)
	}
	return d
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

// limitBytes enforces the per-subject quota of bytes written per window:
// a write is refused (429 QUOTA_EXCEEDED, Retry-After until the window
// ends) before its body is read when the window is used up or its
// declared length would exceed it; the bytes of a write that succeeded are
// counted after it.
func (a *API) limitBytes(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		l := a.deps.Limits
		req := c.Request()
		if l.QuotaBytes <= 0 || req.Method == http.MethodGet || req.Method == http.MethodHead ||
			req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		subject := principal(c).Subject
		start := time.Now().Truncate(l.QuotaWindow)
		used, err := a.deps.Quota.QuotaUsed(req.Context(), subject, start)
		if err != nil {
			return err
		}
		if (used >= l.QuotaBytes || req.ContentLength > 0 && used+req.ContentLength > l.QuotaBytes) && !a.replayable(c) {
			p := problem.New(problem.QuotaExceeded, fmt.Sprintf("this subject wrote %d of %d bytes allowed per %v", used, l.QuotaBytes, l.QuotaWindow))
			p.RetryAfter = max(1, int(math.Ceil(time.Until(start.Add(l.QuotaWindow)).Seconds())))
			c.Response().Header().Set(echo.HeaderConnection, "close") // the body is not read
			return p
		}
		body := &countingBody{ReadCloser: req.Body}
		replaceBody(c, body)
		err = next(c)
		if st := c.Response().Status; err == nil && st < 300 && body.n > 0 && c.Response().Header().Get(idempotency.ReplayHeader) == "" {
			if qerr := a.deps.Quota.AddQuota(context.WithoutCancel(req.Context()), subject, start, body.n); qerr != nil {
				a.deps.Log.WarnContext(req.Context(), "count quota", "err", qerr)
			}
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

type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
