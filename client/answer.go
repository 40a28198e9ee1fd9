package client

import (
	"context"
	"net/http"
	"strings"
	"sync"
)

// Answer records what the server said about a call beyond its result:
// whether the write was a replay of a recorded outcome (Idempotent-Replayed),
// under which key, and the request id. A program that reports writes (the
// agentfs command line) tells a fresh write from a replay this way; the
// typed results of the calls stay the resources themselves.
//
// Give one to the calls whose answers it should record with WithAnswer. It
// holds the answer of the last successful request made with that context:
// for a call that sends several (an upload session's parts, then its
// complete), the last one. It is safe for concurrent use.
type Answer struct {
	mu   sync.Mutex
	last answered
}

// answered is what an Answer holds of the last answer.
type answered struct {
	replayed  bool
	key       string
	requestID string
	status    int
}

// WithAnswer returns a context whose calls record their answers in a.
func WithAnswer(ctx context.Context, a *Answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

type answerKey struct{}

// get is the last answer, read under the lock.
func (a *Answer) get() answered {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Replayed reports whether the last answer was a replay: the server found
// the request's Idempotency-Key holding this outcome and did nothing again.
func (a *Answer) Replayed() bool { return a.get().replayed }

// IdempotencyKey is the key the last request was sent with, "" for none.
func (a *Answer) IdempotencyKey() string { return a.get().key }

// RequestID is the X-Request-ID of the last answer.
func (a *Answer) RequestID() string { return a.get().requestID }

// Status is the HTTP status of the last answer, 0 before any.
func (a *Answer) Status() int { return a.get().status }

// recordAnswer notes a successful response in the context's Answer, if
// it has one.
func recordAnswer(ctx context.Context, r *request, res *http.Response) {
	a, _ := ctx.Value(answerKey{}).(*Answer)
	if a == nil || res == nil {
		return
	}
	last := answered{replayed: strings.EqualFold(res.Header.Get("Idempotent-Replayed"), "true"), key: r.key,
		requestID: res.Header.Get("X-Request-ID"), status: res.StatusCode}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = last
}
