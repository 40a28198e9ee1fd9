package client

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RetryPolicy bounds how the client repeats a request. Zero fields take
// their defaults, which are the server's advertised policy (GET
// /v1/protocol): 8 attempts, a delay from 1 s doubling to 30 s.
//
// Every wait is a random duration between zero and the current delay (full
// jitter), raised to the server's Retry-After when that is longer: the
// client never waits less than the server asked. A Retry-After above
// MaxDelay stops the retries and returns the problem.
type RetryPolicy struct {
	// MaxAttempts counts the attempts of one call, the first included;
	// 1 turns retries off. A poll of /v1/operations/{key} is an attempt
	// too; one that finds nothing is followed at once by the write, within
	// the same attempt.
	MaxAttempts int
	// InitialDelay is the delay bound before the first retry.
	InitialDelay time.Duration
	// MaxDelay caps the doubling delay and the Retry-After the client
	// accepts; at most 60 s.
	MaxDelay time.Duration
}

// Policy defaults and bounds (the client retry policy).
const (
	DefaultMaxAttempts  = 8
	DefaultInitialDelay = time.Second
	DefaultMaxDelay     = 30 * time.Second
	MaxMaxDelay         = 60 * time.Second
)

// withDefaults fills zero fields and rejects what the contract forbids.
func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = max(DefaultMaxDelay, p.InitialDelay)
	}
	switch {
	case p.MaxAttempts < 1:
		return p, fmt.Errorf("retry policy: MaxAttempts %d is below 1", p.MaxAttempts)
	case p.InitialDelay < 0:
		return p, fmt.Errorf("retry policy: InitialDelay %v is negative", p.InitialDelay)
	case p.MaxDelay > MaxMaxDelay:
		return p, fmt.Errorf("retry policy: MaxDelay %v is above %v", p.MaxDelay, MaxMaxDelay)
	case p.MaxDelay < p.InitialDelay:
		return p, fmt.Errorf("retry policy: MaxDelay %v is below InitialDelay %v", p.MaxDelay, p.InitialDelay)
	}
	return p, nil
}

// Routes the client sends, named as in the API (openapi.yaml); they key the retry
// classification.
const (
	routeProtocol     = "GET /v1/protocol"
	routePutFile      = "POST /v1/files"
	routeListFiles    = "GET /v1/files"
	routeFile         = "GET /v1/files/{id}"
	routeFileContent  = "GET /v1/files/{id}/content"
	routeDeleteFile   = "DELETE /v1/files/{id}"
	routeRestoreFile  = "POST /v1/files/{id}/restore"
	routeOperation    = "GET /v1/operations/{idempotency_key}"
	routeCreateUpload = "POST /v1/uploads"
	routeUpload       = "GET /v1/uploads/{id}"
	routeUploadPart   = "PUT /v1/uploads/{id}/parts/{n}"
	routeComplete     = "POST /v1/uploads/{id}/complete"
	routeAbortUpload  = "DELETE /v1/uploads/{id}"
	routeCreateBatch  = "POST /v1/batch"
	routeBatch        = "GET /v1/batch/{id}"
	routeListBatches  = "GET /v1/batch"
	routeCancelBatch  = "POST /v1/batch/{id}/cancel"
	routeListUploads  = "GET /v1/uploads"

	routeListVersions   = "GET /v1/files/{id}/versions"
	routeVersion        = "GET /v1/files/{id}/versions/{n}"
	routeVersionContent = "GET /v1/files/{id}/versions/{n}/content"
	routeRevert         = "POST /v1/files/{id}/revert"
	routeMove           = "POST /v1/files/{id}/move"
	routePatchFile      = "PATCH /v1/files/{id}"
	routeCreateLink     = "POST /v1/files/{id}/links"
	routeLinks          = "GET /v1/files/{id}/links"
	routeRevokeLink     = "DELETE /v1/links/{id}"
	routeEvents         = "GET /v1/events"
	routeStreamEvents   = "GET /v1/events/stream"
	routeListRuns       = "GET /v1/runs"
	routeRun            = "GET /v1/runs/{run_id}"
	routeRunArchive     = "GET /v1/runs/{run_id}/archive"
	routeRunRecovery    = "GET /v1/runs/{run_id}/recovery"
	routeRevertRun      = "POST /v1/runs/{run_id}/revert"
	routeSearch         = "GET /v1/search"
	routeCreateToken    = "POST /v1/tokens"
	routeTokens         = "GET /v1/tokens"
	routeToken          = "GET /v1/tokens/{id}"
	routeRevokeToken    = "DELETE /v1/tokens/{id}"

	// Points in time (DESIGN §18).
	routeCreateCheckpoint = "POST /v1/checkpoints"
	routeListCheckpoints  = "GET /v1/checkpoints"
	routeCheckpoint       = "GET /v1/checkpoints/{id}"
	routeDeleteCheckpoint = "DELETE /v1/checkpoints/{id}"
	routeDiff             = "GET /v1/diff"
	routeRestore          = "POST /v1/restore"

	// Forks and merges (DESIGN §19).
	routeCreateFork = "POST /v1/forks"
	routeListForks  = "GET /v1/forks"
	routeFork       = "GET /v1/forks/{id}"
	routeDeleteFork = "DELETE /v1/forks/{id}"
	routeMerge      = "POST /v1/forks/{id}/merge"

	// Webhooks.
	routeCreateWebhook     = "POST /v1/webhooks"
	routeListWebhooks      = "GET /v1/webhooks"
	routeWebhook           = "GET /v1/webhooks/{id}"
	routeUpdateWebhook     = "PATCH /v1/webhooks/{id}"
	routeDeleteWebhook     = "DELETE /v1/webhooks/{id}"
	routeRotateWebhook     = "POST /v1/webhooks/{id}/rotate-secret"
	routeReplayWebhook     = "POST /v1/webhooks/{id}/replay"
	routeWebhookDeliveries = "GET /v1/webhooks/{id}/deliveries"
)

// call is what the retry classification knows about a request.
type call struct {
	Route   string // one of the route constants
	Keyed   bool   // carries an Idempotency-Key
	Replace bool   // an upload with if_exists=replace
}

// safeToRepeat reports whether the request may be sent again when its
// outcome is unknown (the idempotency rules and the client retry policy): its effect, if it happened, cannot
// happen twice.
func (c call) safeToRepeat() bool {
	if strings.HasPrefix(c.Route, "GET ") || strings.HasPrefix(c.Route, "HEAD ") || c.Keyed {
		return true
	}
	switch c.Route {
	case routePutFile:
		return c.Replace
	case routeDeleteFile, routeRestoreFile, routeCreateUpload, routeUploadPart, routeComplete, routeAbortUpload:
		return true
	case routeRevokeLink, routeCancelBatch, routePatchFile, routeRevokeToken:
		// Revoking a link or a token or cancelling a batch again changes nothing
		// (lifecycle); a PATCH sets an absolute expires_at, so a repeat
		// sets the same value.
		return true
	}
	return false
}

// result is what one attempt ended with.
type result struct {
	Status     int           // 0: no response (the connection failed)
	Code       string        // the problem code, if any
	RetryAfter time.Duration // the response's Retry-After
	// BodyLost: the request body was (partly) sent and cannot be re-read.
	BodyLost bool
}

// verdict is what to do after an attempt.
type verdict int

const (
	stop  verdict = iota // return this result
	retry                // send the request again after a wait
	poll                 // ask /v1/operations/{key} after a wait
)

func (v verdict) String() string {
	return [...]string{"stop", "retry", "poll"}[v]
}

// classify is the whole retry policy for one attempt: 408, 429 and 5xx
// are retried; a failed connection only when the request is safe to
// repeat; OPERATION_IN_PROGRESS is answered by polling the key, or, without
// a key, by sending again a request that is safe to repeat; every other
// status stops. A body that cannot be sent again stops everything but a
// poll, and so does a Retry-After above maxDelay.
func classify(c call, r result, maxDelay time.Duration) verdict {
	if r.RetryAfter > maxDelay {
		return stop
	}
	if r.Status == http.StatusConflict && r.Code == codeInProgress {
		switch {
		case c.Keyed:
			return poll
		case c.safeToRepeat() && !r.BodyLost:
			// Another request holds what this one acts on (a complete or a
			// part of the same upload session): repeating it cannot do
			// anything twice.
			return retry
		}
		return stop
	}
	if r.BodyLost {
		return stop
	}
	switch {
	case r.Status == 0:
		if c.safeToRepeat() {
			return retry
		}
	case retryableStatus(r.Status):
		return retry
	}
	return stop
}

// codeInProgress is the one 409 that is worth waiting for.
const codeInProgress = "OPERATION_IN_PROGRESS"

func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500 && status <= 599
}

// delays is the backoff.BackOff of one call: full jitter over a delay that
// doubles from InitialDelay to MaxDelay, raised to the floor the last
// response's Retry-After set.
type delays struct {
	policy  RetryPolicy
	rand    *lockedRand
	current time.Duration
	floor   time.Duration
}

func newDelays(p RetryPolicy, r *lockedRand) *delays {
	return &delays{policy: p, rand: r, current: p.InitialDelay}
}

// NextBackOff returns the wait before the next attempt.
func (d *delays) NextBackOff() time.Duration {
	wait := d.rand.upTo(d.current)
	d.current = min(2*d.current, d.policy.MaxDelay)
	wait, d.floor = max(wait, d.floor), 0
	return wait
}

// Reset starts the doubling again.
func (d *delays) Reset() { d.current, d.floor = d.policy.InitialDelay, 0 }

// atLeast makes the next wait no shorter than a server's hint.
func (d *delays) atLeast(hint time.Duration) { d.floor = hint }

// lockedRand is a random source safe for concurrent calls.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand // nil: the global source
}

// upTo returns a uniform random duration in [0, d].
func (l *lockedRand) upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if l == nil || l.r == nil {
		return time.Duration(rand.Int64N(int64(d) + 1))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.r.Int64N(int64(d) + 1))
}

// errBodyNotRewindable is why a request that should be sent again was not.
var errBodyNotRewindable = errors.New("the request body was sent and cannot be re-read, so it is not sent again")
