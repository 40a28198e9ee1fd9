package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/api"
)

// Problem is an error the server answered with: an RFC 9457
// application/problem+json document (schema Problem), with the answer's
// Retry-After hint. Its Code is the stable thing to branch on;
// /problems/{code} on the server explains each one.
type Problem = api.Problem

// FieldError is one offending field, query parameter or header of a request.
type FieldError = api.FieldError

// ErrorCode returns the problem code carried by err (for example
// "PATH_EXISTS"), or "" when err is not a *Problem.
func ErrorCode(err error) string {
	var p *Problem
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}

// maxProblemBytes bounds how much of an error body is read.
const maxProblemBytes = 64 << 10

// problemOf reads an error response into a Problem. A body that is not a
// problem document (a proxy's HTML page, say) still yields a Problem with
// the status, its text as title and no code: the server did not name one.
func problemOf(res *http.Response) *Problem {
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxProblemBytes))
	p := &Problem{}
	if err := json.Unmarshal(body, p); err != nil || p.Status == 0 {
		p = &Problem{Title: http.StatusText(res.StatusCode), Detail: snippet(body)}
		p.Retryable = retryableStatus(res.StatusCode)
	}
	p.Status = res.StatusCode
	if p.RequestID == "" {
		p.RequestID = res.Header.Get("X-Request-ID")
	}
	p.RetryAfter = parseRetryAfter(res.Header.Get("Retry-After"), time.Now())
	return p
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date,
// as a duration from now. Absent, malformed or past values are zero.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// maxRetryAfter keeps absurd hints from overflowing a Duration; any hint
// that long is far above every allowed cap, so it stops retrying.
const maxRetryAfter = 365 * 24 * time.Hour
