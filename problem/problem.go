// Package problem is the one way errors leave the API: RFC 9457
// application/problem+json bodies with a stable code and a retryable flag.
// Handlers return errors; ErrorHandler turns each into a Problem.
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

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

// From translates any error a handler returned into the problem to answer
// with. Errors it does not know become a generic INTERNAL problem; the
// second result says so, so the caller can log the cause.
func From(err error) (p *Problem, unexpected bool) {
	var (
		pe      *Problem
		he      *echo.HTTPError
		exists  *agentfs.PathExistsError
		blocked *agentfs.BlockedError
		tooBig  *http.MaxBytesError
		state   *agentfs.UploadStateError
		missing *agentfs.PartsMissingError
		reused  *agentfs.ConflictError
		busy    *agentfs.InProgressError
		held    *agentfs.UploadBusyError
		settled *agentfs.PartAssembledError
		quota   *agentfs.QuotaExceededError
		uploads *agentfs.TooManyUploadsError
		changed *agentfs.ChangedSinceRunError
		denied  *agentfs.ForbiddenError
	)
	switch {
	case errors.As(err, &pe):
		return pe, false
	case errors.As(err, &denied):
		return forbidden(denied), false
	case errors.As(err, &changed):
		return New(ChangedSinceRun, "another run changed "+changed.FileID+" after run "+strconv.Quote(changed.RunID)+
			" last did; revert with force to undo anyway"), false
	case errors.As(err, &reused):
		return New(IdempotencyConflict, "Idempotency-Key "+strconv.Quote(reused.Key)+
			" was used for a different request; use a new key for a new request"), false
	case errors.As(err, &busy):
		return inProgress(busy), false
	case errors.As(err, &exists):
		p := New(PathExists, "a live file already holds path "+strconv.Quote(exists.Path))
		p.ExistingFileID = exists.ExistingFileID
		return p, false
	case errors.As(err, &blocked):
		return New(ContentBlocked, "file is blocked: "+blocked.Reason), false
	case errors.Is(err, agentfs.ErrBlocked):
		return New(ContentBlocked, "file is blocked"), false
	case errors.As(err, &tooBig), errors.Is(err, agentfs.ErrTooLarge):
		return New(PayloadTooLarge, "the body exceeds the upload limit"), false
	case errors.As(err, &state):
		return uploadState(state.Status), false
	case errors.As(err, &held):
		p := New(OperationInProgress, held.Reason+"; nothing was done, send the same request again after Retry-After seconds")
		p.RetryAfter = max(1, int(math.Ceil(held.RetryAfter.Seconds())))
		return p, false
	case errors.As(err, &settled):
		return Validation("body", fmt.Sprintf("part %d of this upload was already assembled, by a complete that did not finish, "+
			"from other bytes than these; the upload takes that part again only with the same bytes. Complete the upload, "+
			"or abort it and start a new one", settled.Number)), false
	case errors.As(err, &missing):
		p := New(PartsMissing, "the upload lacks parts; send them, then complete again")
		p.MissingParts = missing.Missing
		return p, false
	case errors.Is(err, agentfs.ErrSizeMismatch):
		return New(SizeMismatch, "the body's size is not the size required: "+err.Error()), false
	case errors.Is(err, agentfs.ErrPartOutOfRange):
		return Validation("part_number", err.Error()), false
	case errors.Is(err, agentfs.ErrUploadCompleting):
		p := New(OperationInProgress, "another request is completing this upload; retry shortly")
		p.RetryAfter = 1
		return p, false
	case errors.Is(err, agentfs.ErrIfMatchWithoutReplace):
		return Validation("If-Match", "asks for a conditional replace; send if_exists=replace with it"), false
	case errors.As(err, &quota):
		return quotaExceeded(quota), false
	case errors.As(err, &uploads):
		p := New(QuotaExceeded, fmt.Sprintf("this subject has %d upload sessions open, the most it may; complete or abort one "+
			"(GET /v1/uploads lists them), or wait for one to expire; no session was made", uploads.Limit))
		p.RetryAfter = max(1, int(math.Ceil(uploads.RetryAfter.Seconds())))
		return p, false
	case errors.Is(err, agentfs.ErrBadBody):
		return New(InvalidRequest, "the request body could not be read"), false
	case errors.Is(err, agentfs.ErrBodyStalled):
		return New(RequestTimeout, "the request body stalled longer than the idle limit; nothing was stored"), false
	case errors.Is(err, agentfs.ErrNotFound):
		return New(NotFound, "no such resource"), false
	case errors.Is(err, agentfs.ErrPreconditionFailed):
		return New(PreconditionFailed, "the precondition did not hold"), false
	case errors.Is(err, agentfs.ErrChecksumMismatch):
		return New(ChecksumMismatch, "the content does not match Content-Digest; nothing was stored"), false
	case errors.Is(err, agentfs.ErrUnavailable):
		return New(StorageUnavailable, "storage is unavailable, retry later"), true
	case errors.As(err, &he):
		return fromHTTPError(he), he.Code >= 500
	case errors.Is(err, context.Canceled):
		return New(RequestTimeout, "the request was cancelled before it completed"), false
	}
	return New(Internal, "an internal error occurred"), true
}

// maxInProgressWait caps the Retry-After of OPERATION_IN_PROGRESS: the
// first request may finish any moment, well before its lease would lapse.
const maxInProgressWait = 5 * time.Second

func inProgress(e *agentfs.InProgressError) *Problem {
	p := New(OperationInProgress, "a request with this Idempotency-Key is still running; retry the same key later")
	p.RetryAfter = max(1, int(min(e.RetryAfter, maxInProgressWait).Seconds()))
	return p.WithHeader("Link", "</v1/operations/"+url.PathEscape(e.Key)+`>; rel="monitor"`)
}

// forbidden is the answer to a caller whose token lacks a scope the
// operation needs: it says which, so the caller knows what token to ask
// for.
func forbidden(e *agentfs.ForbiddenError) *Problem {
	p := New(Forbidden, "the token lacks the "+e.Scope+" scope, which this request needs; nothing was done")
	p.MissingScope = e.Scope
	return p
}

func quotaExceeded(e *agentfs.QuotaExceededError) *Problem {
	p := New(QuotaExceeded, fmt.Sprintf("this subject may write %d bytes per %v and has %d left in this window; nothing of this request was stored",
		e.Limit, e.Window, max(0, e.Limit-e.Used)))
	p.RetryAfter = max(1, int(math.Ceil(e.RetryAfter.Seconds())))
	return p
}

func uploadState(status string) *Problem {
	switch status {
	case agentfs.UploadCompleted:
		return New(UploadCompleted, "the upload session is completed; it takes no more parts")
	case agentfs.UploadExpired:
		return New(UploadExpired, "the upload session expired; start a new one")
	}
	return New(UploadAborted, "the upload session is "+status+"; start a new one")
}

func fromHTTPError(he *echo.HTTPError) *Problem {
	switch he.Code {
	case http.StatusNotFound:
		return New(NotFound, "no such route")
	case http.StatusMethodNotAllowed:
		return New(MethodNotAllowed, "this route does not take this method")
	case http.StatusRequestEntityTooLarge:
		return New(PayloadTooLarge, "the body exceeds the limit")
	case http.StatusUnsupportedMediaType:
		return New(UnsupportedMediaType, "unsupported Content-Type")
	case http.StatusBadRequest:
		return New(InvalidRequest, "the request could not be parsed")
	case http.StatusUnauthorized:
		return New(Unauthenticated, "missing or invalid bearer token")
	case http.StatusServiceUnavailable:
		return New(StorageUnavailable, "service unavailable")
	case http.StatusRequestTimeout:
		return New(RequestTimeout, "the request timed out")
	case http.StatusForbidden:
		return New(Forbidden, "not allowed")
	case http.StatusLengthRequired:
		return New(LengthRequired, "Content-Length is required")
	case http.StatusTooManyRequests:
		return New(RateLimited, "too many requests")
	}
	return New(Internal, "an internal error occurred")
}

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-ID"

// ErrorHandler is Echo's HTTPErrorHandler: it writes every error as a
// problem, and logs the ones it did not expect with their cause (which never
// reaches the client).
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
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
		Write(c, p)
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
	if out.Status == http.StatusUnauthorized {
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
