// Package problem is the one way errors leave the API: RFC 9457
// application/problem+json bodies with a stable code and a retryable flag.
// Handlers return errors; ErrorHandler turns each into a Problem.
package problem

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
)

// ContentType is the media type of every error response.
const ContentType = "application/problem+json"

// FieldError names one field of a request and what is wrong with it.
type FieldError = api.FieldError

// Problem is an error response: the document a client reads (api.Problem,
// its members written once) and the headers that go with it. It is an
// error itself, so handlers can return one to answer with exactly that
// problem.
type Problem struct {
	api.Problem

	// RetryAfter, in seconds, is sent as the Retry-After header when
	// positive. (It stands for the document's RetryAfter, which a client
	// fills in from that header.)
	RetryAfter int `json:"-"`
	// Header holds further response headers (WWW-Authenticate, Content-Range).
	Header http.Header `json:"-"`
}

// New returns the problem for code with a detail for this occurrence.
// An unknown code is a programming error and yields INTERNAL.
func New(code, detail string) *Problem {
	k, ok := catalog[code]
	if !ok {
		k = catalog[Internal]
	}
	p := &Problem{Problem: api.Problem{
		Type:      "/problems/" + k.Code,
		Title:     k.Title,
		Status:    k.Status,
		Detail:    detail,
		Code:      k.Code,
		Retryable: retryable(k.Status, k.Code),
	}}
	if k.Status == http.StatusServiceUnavailable || k.Status == http.StatusTooManyRequests {
		p.RetryAfter = 1
	}
	return p
}

// Validation returns a 422 VALIDATION_FAILED naming one field.
func Validation(field, message string) *Problem {
	p := New(ValidationFailed, field+": "+message)
	p.Errors = []FieldError{{Field: field, Message: message}}
	return p
}

// Invalid returns a 400 INVALID_REQUEST naming the field that could not be
// parsed.
func Invalid(field, message string) *Problem {
	p := New(InvalidRequest, field+": "+message)
	p.Errors = []FieldError{{Field: field, Message: message}}
	return p
}

// WithHeader sets a response header on the problem and returns it.
func (p *Problem) WithHeader(key, value string) *Problem {
	if p.Header == nil {
		p.Header = http.Header{}
	}
	p.Header.Set(key, value)
	return p
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-ID"

// ErrorHandler is Echo's HTTPErrorHandler: it writes every error as a
// problem, and logs the ones it did not expect with their cause (which never
// reaches the client). Each of before, in turn, may add to a copy of the
// problem before it is written (the HTTP door adds the OAuth challenge of
// a 401 or 403).
func ErrorHandler(log *slog.Logger, before ...func(echo.Context, *Problem)) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		p, unexpected := From(err)
		req := c.Request()
		if unexpected {
			// The route template, not the path: a path may hold a share
			// link's secret.
			log.ErrorContext(req.Context(), "request failed", "err", err,
				"method", req.Method, "route", c.Path(),
				"request_id", c.Response().Header().Get(RequestIDHeader))
		}
		if c.Response().Committed {
			return
		}
		out := *p
		out.Header = p.Header.Clone()
		for _, f := range before {
			f(c, &out)
		}
		Write(c, &out)
	}
}

// Encode is the problem as JSON, as it is stored to be shown later (the
// error of a batch item, a recorded outcome).
func Encode(p *Problem) []byte {
	b, _ := json.Marshal(p)
	return b
}

// instanceKey is where a handler leaves the instance its request's
// problems show instead of the request path.
const instanceKey = "problem.instance"

// SetInstance makes every problem the request answers show instance (a
// route template) instead of the request path, for a path that holds a
// secret, such as a share link's.
func SetInstance(c echo.Context, instance string) { c.Set(instanceKey, instance) }

// Write sends p as the response.
func Write(c echo.Context, p *Problem) {
	out := *p
	out.RequestID = c.Response().Header().Get(RequestIDHeader)
	if out.Instance == "" {
		// A path that is no route (a share link's with a slash too many)
		// may still hold a link's secret.
		out.Instance = agentfs.RedactSharePaths(c.Request().URL.Path)
		if v, ok := c.Get(instanceKey).(string); ok {
			out.Instance = v
		}
	}
	h := c.Response().Header()
	// Headers set for the representation the handler meant to send do not
	// describe a problem.
	for _, k := range []string{"Content-Length", "Content-Disposition", "Content-Range", "ETag",
		"Repr-Digest", "Last-Modified", "Accept-Ranges", "Location"} {
		h.Del(k)
	}
	for k, vs := range out.Header {
		h[k] = vs
	}
	if out.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(out.RetryAfter))
	}
	if out.Status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Bearer realm="agentfs"`)
	}
	h.Set(echo.HeaderContentType, ContentType)
	body, _ := json.Marshal(out)
	if c.Request().Method == http.MethodHead {
		h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
		c.Response().WriteHeader(out.Status)
		return
	}
	c.Response().WriteHeader(out.Status)
	_, _ = c.Response().Write(body)
}
