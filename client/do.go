package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// do sends one logical request under the retry policy and returns its
// successful response, whose body the caller reads and closes. A failure
// is a *Problem (the server's answer), the context's error, or a wrapped
// transport error.
//
// One attempt is one HTTP request: the request itself, or, after
// OPERATION_IN_PROGRESS, a poll of /v1/operations/{key}. backoff/v4 runs
// the loop, stops it after MaxAttempts and when ctx ends; delays adds full
// jitter and the Retry-After floor.
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	waits := newDelays(c.policy, c.rand)
	var busy *Problem // the OPERATION_IN_PROGRESS being polled for
	attempt := func() (*http.Response, error) {
		if err := ctx.Err(); err != nil {
			return nil, backoff.Permanent(err)
		}
		if busy != nil {
			res, err := c.pollOnce(ctx, r, busy, waits)
			if res != nil || err != nil {
				return res, err
			}
			busy = nil // the key holds nothing, or withholds a secret: send the write again
		}
		res, v, err := c.attempt(ctx, r)
		switch v {
		case retry:
			waits.atLeast(retryAfterOf(err))
			return nil, err
		case poll:
			busy = err.(*Problem)
			waits.atLeast(busy.RetryAfter)
			return nil, err
		}
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		return res, nil
	}
	var notify backoff.Notify
	if c.onRetry != nil {
		failed := 0
		notify = func(err error, wait time.Duration) {
			failed++
			c.onRetry(failed, wait, err)
		}
	}
	b := backoff.WithContext(backoff.WithMaxRetries(waits, uint64(c.policy.MaxAttempts-1)), ctx)
	res, err := backoff.RetryNotifyWithData(attempt, b, notify)
	if err == nil {
		recordAnswer(ctx, r, res)
	}
	return res, err
}

// attempt sends the request once and classifies the outcome.
func (c *Client) attempt(ctx context.Context, r *request) (*http.Response, verdict, error) {
	if r.body.lost() {
		return nil, stop, c.opError(r, errBodyNotRewindable)
	}
	req, err := c.newHTTP(ctx, r)
	if err != nil {
		return nil, stop, c.opError(r, err)
	}
	res, err := c.httpFor(r).Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, stop, cerr
		}
		err = c.opError(r, err)
		v := classify(r.call, result{BodyLost: r.body.lost()}, c.policy.MaxDelay)
		if v == stop && r.safeToRepeat() && r.body.lost() {
			err = fmt.Errorf("%w; %w", err, errBodyNotRewindable)
		}
		return nil, v, err
	}
	if res.StatusCode < 400 {
		return res, stop, nil
	}
	p := problemOf(res)
	res.Body.Close()
	return nil, classify(r.call, result{Status: p.Status, Code: p.Code, RetryAfter: p.RetryAfter,
		BodyLost: r.body.lost()}, c.policy.MaxDelay), p
}

// pollOnce asks /v1/operations/{key} what became of a write that was
// still in progress. It returns the recorded response (or a permanent
// error) once the key has an outcome, a retryable error while it has
// none yet, and nil, nil when the write is to be sent again: when the key
// holds nothing, which proves that nothing happened, when its claim was
// abandoned (its owner died with nothing recorded: the same key takes it
// over), or when its recorded
// response withholds a secret (a share link's url), which only a replay of
// the request by this token answers.
func (c *Client) pollOnce(ctx context.Context, r *request, busy *Problem, waits *delays) (*http.Response, error) {
	op, err := c.operationOnce(ctx, r.key)
	var p *Problem
	switch {
	case errors.As(err, &p) && p.Status == http.StatusNotFound:
		return nil, nil
	case ctx.Err() != nil:
		return nil, backoff.Permanent(ctx.Err())
	case p != nil && classify(call{Route: routeOperation}, result{Status: p.Status, Code: p.Code, RetryAfter: p.RetryAfter}, c.policy.MaxDelay) == retry:
		waits.atLeast(p.RetryAfter)
		return nil, p
	case p != nil:
		return nil, backoff.Permanent(p)
	case err != nil:
		return nil, err // a failed connection: a read, safe to repeat
	}
	if op.Method != r.method || op.Route != serverRoute(r.Route) {
		return nil, backoff.Permanent(c.opError(r, fmt.Errorf("idempotency key %q holds another operation, %s %s", r.key, op.Method, op.Route)))
	}
	if op.Status == OperationAbandoned {
		return nil, nil
	}
	if op.Status != OperationCompleted {
		waits.atLeast(busy.RetryAfter)
		return nil, busy
	}
	if len(op.Redacted) > 0 {
		return nil, nil // the same key replays it, secret and all
	}
	res, err := recordedResponse(op)
	if err != nil {
		return nil, backoff.Permanent(c.opError(r, err))
	}
	return res, nil
}

// operationOnce is one GET /v1/operations/{key}, without retries.
func (c *Client) operationOnce(ctx context.Context, key string) (*Operation, error) {
	r := newRequest(routeOperation, "/v1/operations/"+url.PathEscape(key))
	res, _, err := c.attempt(ctx, r)
	if err != nil {
		return nil, err
	}
	var op Operation
	return &op, decodeJSON(res, &op)
}

// placeholder matches a route parameter, {id}.
var placeholder = regexp.MustCompile(`\{([a-z_]+)\}`)

// serverRoute turns "POST /v1/files/{id}/restore" into the route template
// the server records for an operation, "/v1/files/:id/restore".
func serverRoute(route string) string {
	_, path, _ := strings.Cut(route, " ")
	return placeholder.ReplaceAllString(path, ":$1")
}

// retryAfterOf is the Retry-After of a problem, zero for other errors.
func retryAfterOf(err error) time.Duration {
	var p *Problem
	if errors.As(err, &p) {
		return p.RetryAfter
	}
	return 0
}

// opError wraps a failure that is not the server's answer with the request
// it happened to.
func (c *Client) opError(r *request, err error) error {
	return fmt.Errorf("%s %s: %w", r.method, r.path, err)
}

// recordedResponse rebuilds the HTTP response an operation recorded: the
// answer to a write whose own response never arrived. A recorded error is
// returned as its *Problem.
func recordedResponse(o *Operation) (*http.Response, error) {
	status, err := o.RecordedStatus()
	if err != nil {
		return nil, err
	}
	return &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:     http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"true"}},
		Body:       io.NopCloser(bytes.NewReader(o.Response)),
	}, nil
}
