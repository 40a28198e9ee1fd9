package problem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
)

// designCodes is the table of the error contract: every code and its status.
var designCodes = map[string]int{
	problem.InvalidRequest:         400,
	problem.InvalidHeader:          400,
	problem.InvalidIdempotencyKey:  400,
	problem.IdempotencyKeyRequired: 400,
	problem.Unauthenticated:        401,
	problem.Forbidden:              403,
	problem.NotFound:               404,
	problem.MethodNotAllowed:       405,
	problem.RequestTimeout:         408,
	problem.PathExists:             409,
	problem.IdempotencyConflict:    409,
	problem.OperationInProgress:    409,
	problem.UploadCompleted:        409,
	problem.UploadAborted:          409,
	problem.UploadExpired:          409,
	problem.ChangedSinceRun:        409,
	problem.CheckpointExists:       409,
	problem.MergeConflict:          409,
	problem.CursorExpired:          410,
	problem.LengthRequired:         411,
	problem.PreconditionFailed:     412,
	problem.PayloadTooLarge:        413,
	problem.UnsupportedMediaType:   415,
	problem.RangeNotSatisfiable:    416,
	problem.ValidationFailed:       422,
	problem.InvalidPath:            422,
	problem.SizeMismatch:           422,
	problem.ChecksumMismatch:       422,
	problem.PartsMissing:           422,
	problem.SearchTooBroad:         422,
	problem.RateLimited:            429,
	problem.QuotaExceeded:          429,
	problem.ContentBlocked:         451,
	problem.Internal:               500,
	problem.StorageUnavailable:     503,
}

// wantRetryable is the rule of the error contract.
func wantRetryable(status int, code string) bool {
	return status == 408 || status == 429 || status >= 500 || code == problem.OperationInProgress
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	t.Run("HoldsExactlyTheDesignCodes", func(t *testing.T) {
		t.Parallel()
		kinds := problem.Kinds()
		if len(kinds) != len(designCodes) {
			t.Fatalf("catalog has %d codes, the error contract has %d", len(kinds), len(designCodes))
		}
		for _, k := range kinds {
			if _, ok := designCodes[k.Code]; !ok {
				t.Errorf("catalog code %s is not in the error contract", k.Code)
			}
		}
	})
	for code, status := range designCodes {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			k, ok := problem.Lookup(code)
			if !ok {
				t.Fatalf("Lookup(%s) found nothing", code)
			}
			if k.Code != code || k.Status != status {
				t.Errorf("Lookup(%s) = %s %d, want %s %d", code, k.Code, k.Status, code, status)
			}
			if strings.TrimSpace(k.Title) == "" || strings.TrimSpace(k.Description) == "" {
				t.Errorf("%s has an empty title or description: %+v", code, k)
			}
			if k.Retryable != wantRetryable(status, code) {
				t.Errorf("%s catalog retryable = %v, want %v", code, k.Retryable, !k.Retryable)
			}
			p := problem.New(code, "detail")
			if p.Type != "/problems/"+code {
				t.Errorf("New(%s).Type = %q, want /problems/%s", code, p.Type, code)
			}
		})
	}
	t.Run("LookupOfUnknownCodeFails", func(t *testing.T) {
		t.Parallel()
		if k, ok := problem.Lookup("NO_SUCH_CODE"); ok {
			t.Fatalf("Lookup(NO_SUCH_CODE) = %+v", k)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	for code, status := range designCodes {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			p := problem.New(code, "what happened")
			if p.Status != status || p.Code != code {
				t.Errorf("New(%s) = %d %s, want %d %s", code, p.Status, p.Code, status, code)
			}
			if p.Detail != "what happened" {
				t.Errorf("New(%s).Detail = %q", code, p.Detail)
			}
			k, _ := problem.Lookup(code)
			if p.Title != k.Title {
				t.Errorf("New(%s).Title = %q, want the catalog's %q", code, p.Title, k.Title)
			}
			if want := wantRetryable(status, code); p.Retryable != want {
				t.Errorf("New(%s).Retryable = %v, want %v", code, p.Retryable, want)
			}
			if wantRA := status == 429 || status == 503; (p.RetryAfter > 0) != wantRA {
				t.Errorf("New(%s).RetryAfter = %d, want positive: %v", code, p.RetryAfter, wantRA)
			}
			if p.Error() == "" || !strings.Contains(p.Error(), code) {
				t.Errorf("New(%s).Error() = %q, want it to name the code", code, p.Error())
			}
		})
	}
	t.Run("UnknownCodeIsInternal", func(t *testing.T) {
		t.Parallel()
		p := problem.New("NO_SUCH_CODE", "x")
		if p.Status != 500 || p.Code != problem.Internal || !p.Retryable || p.Type != "/problems/INTERNAL" {
			t.Fatalf("New(NO_SUCH_CODE) = %+v, want a retryable 500 INTERNAL", p)
		}
	})
	t.Run("OnlyOperationInProgressIsRetryable409", func(t *testing.T) {
		t.Parallel()
		for code, status := range designCodes {
			if status == 409 && problem.New(code, "").Retryable != (code == problem.OperationInProgress) {
				t.Errorf("409 %s retryable = %v", code, problem.New(code, "").Retryable)
			}
		}
	})
	t.Run("ValidationNamesField", func(t *testing.T) {
		t.Parallel()
		p := problem.Validation("if_exists", "must be error or replace")
		if p.Status != 422 || p.Code != problem.ValidationFailed || len(p.Errors) != 1 ||
			p.Errors[0].Field != "if_exists" || p.Errors[0].Message != "must be error or replace" {
			t.Fatalf("Validation = %+v", p)
		}
	})
	t.Run("InvalidNamesField", func(t *testing.T) {
		t.Parallel()
		p := problem.Invalid("limit", "not a number")
		if p.Status != 400 || p.Code != problem.InvalidRequest || len(p.Errors) != 1 || p.Errors[0].Field != "limit" {
			t.Fatalf("Invalid = %+v", p)
		}
	})
}

func TestFrom(t *testing.T) {
	t.Parallel()
	const secret = "dial tcp 10.0.0.7:5432: password=hunter2"
	own := problem.New(problem.PartsMissing, "parts 2 and 3")
	own.MissingParts = []int{2, 3}
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		unexpected bool
		check      func(t *testing.T, p *problem.Problem)
	}{
		{name: "KeepsProblem", err: own, status: 422, code: problem.PartsMissing, check: func(t *testing.T, p *problem.Problem) {
			if p != own {
				t.Errorf("From returned a copy, not the problem itself")
			}
		}},
		{name: "UnwrapsProblem", err: fmt.Errorf("upload: %w", own), status: 422, code: problem.PartsMissing},
		{name: "MapsNotFound", err: agentfs.ErrNotFound, status: 404, code: problem.NotFound},
		{name: "MapsWrappedNotFound", err: fmt.Errorf("file file_x: %w", agentfs.ErrNotFound), status: 404, code: problem.NotFound},
		{name: "MapsPathExists", err: &agentfs.PathExistsError{Path: "a/b", ExistingFileID: "file_1"}, status: 409, code: problem.PathExists,
			check: func(t *testing.T, p *problem.Problem) {
				if p.ExistingFileID != "file_1" {
					t.Errorf("ExistingFileID = %q, want file_1", p.ExistingFileID)
				}
				if !strings.Contains(p.Detail, `"a/b"`) {
					t.Errorf("detail %q does not name the path", p.Detail)
				}
			}},
		{name: "MapsWrappedPathExists", err: fmt.Errorf("put: %w", &agentfs.PathExistsError{Path: "x", ExistingFileID: "file_2"}), status: 409, code: problem.PathExists,
			check: func(t *testing.T, p *problem.Problem) {
				if p.ExistingFileID != "file_2" {
					t.Errorf("ExistingFileID = %q, want file_2", p.ExistingFileID)
				}
			}},
		{name: "MapsPreconditionFailed", err: agentfs.ErrPreconditionFailed, status: 412, code: problem.PreconditionFailed},
		{name: "MapsChecksumMismatch", err: fmt.Errorf("part 3: %w", agentfs.ErrChecksumMismatch), status: 422, code: problem.ChecksumMismatch},
		{name: "MapsTooLarge", err: agentfs.ErrTooLarge, status: 413, code: problem.PayloadTooLarge},
		{name: "MapsMaxBytesError", err: &http.MaxBytesError{Limit: 10}, status: 413, code: problem.PayloadTooLarge},
		{name: "MapsWrappedMaxBytesError", err: fmt.Errorf("read body: %w", &http.MaxBytesError{Limit: 10}), status: 413, code: problem.PayloadTooLarge},
		{name: "MapsBlocked", err: &agentfs.BlockedError{FileID: "file_3", Reason: "legal hold"}, status: 451, code: problem.ContentBlocked,
			check: func(t *testing.T, p *problem.Problem) {
				if !strings.Contains(p.Detail, "legal hold") {
					t.Errorf("detail %q does not carry the block reason", p.Detail)
				}
			}},
		{name: "MapsUnavailable", err: fmt.Errorf("%s: %w", secret, agentfs.ErrUnavailable), status: 503, code: problem.StorageUnavailable, unexpected: true,
			check: func(t *testing.T, p *problem.Problem) {
				if p.RetryAfter <= 0 || !p.Retryable {
					t.Errorf("503 problem has RetryAfter %d, retryable %v", p.RetryAfter, p.Retryable)
				}
			}},
		{name: "MapsQuotaExceeded", err: fmt.Errorf("put blob: %w", agentfs.BodyError(&agentfs.QuotaExceededError{
			Used: 900, Limit: 1000, Window: time.Hour, RetryAfter: 90*time.Second + time.Millisecond})),
			status: 429, code: problem.QuotaExceeded, check: func(t *testing.T, p *problem.Problem) {
				if p.RetryAfter != 91 || problem.Recorded(p) {
					t.Errorf("quota problem: RetryAfter %d (want 91, the window's end rounded up), recorded %v", p.RetryAfter, problem.Recorded(p))
				}
				if !strings.Contains(p.Detail, "100 left") {
					t.Errorf("detail %q does not say what is left", p.Detail)
				}
			}},
		{name: "MapsQuotaExceededAtTheWindowsEnd", err: &agentfs.QuotaExceededError{Used: 1000, Limit: 1000, Window: time.Hour},
			status: 429, code: problem.QuotaExceeded, check: func(t *testing.T, p *problem.Problem) {
				if p.RetryAfter != 1 {
					t.Errorf("RetryAfter %d, want at least 1", p.RetryAfter)
				}
			}},
		{name: "MapsTooManyUploads", err: fmt.Errorf("create upload: %w", &agentfs.TooManyUploadsError{Limit: 100, RetryAfter: 3599*time.Second + time.Millisecond}),
			status: 429, code: problem.QuotaExceeded, check: func(t *testing.T, p *problem.Problem) {
				if p.RetryAfter != 3600 || problem.Recorded(p) || !p.Retryable || !strings.Contains(p.Detail, "100 upload sessions open") {
					t.Errorf("too many uploads: RetryAfter %d, recorded %v, retryable %v, detail %q", p.RetryAfter, problem.Recorded(p), p.Retryable, p.Detail)
				}
			}},
		{name: "MapsEchoNotFound", err: echo.ErrNotFound, status: 404, code: problem.NotFound},
		{name: "MapsEchoMethodNotAllowed", err: echo.ErrMethodNotAllowed, status: 405, code: problem.MethodNotAllowed},
		{name: "MapsEchoTooLarge", err: echo.ErrStatusRequestEntityTooLarge, status: 413, code: problem.PayloadTooLarge},
		{name: "MapsEchoUnsupportedMediaType", err: echo.ErrUnsupportedMediaType, status: 415, code: problem.UnsupportedMediaType},
		{name: "MapsEchoBadRequest", err: echo.NewHTTPError(400, secret), status: 400, code: problem.InvalidRequest},
		{name: "MapsEchoUnauthorized", err: echo.ErrUnauthorized, status: 401, code: problem.Unauthenticated},
		{name: "MapsEchoServiceUnavailable", err: echo.ErrServiceUnavailable, status: 503, code: problem.StorageUnavailable, unexpected: true},
		{name: "MapsEchoRequestTimeout", err: echo.ErrRequestTimeout, status: 408, code: problem.RequestTimeout},
		{name: "MapsEchoInternal", err: echo.NewHTTPError(500, secret), status: 500, code: problem.Internal, unexpected: true},
		{name: "MapsCanceled", err: context.Canceled, status: 408, code: problem.RequestTimeout},
		{name: "HidesUnknownError", err: errors.New(secret), status: 500, code: problem.Internal, unexpected: true},
		{name: "HidesWrappedUnknownError", err: fmt.Errorf("query: %w", errors.New(secret)), status: 500, code: problem.Internal, unexpected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, unexpected := problem.From(tc.err)
			if p == nil {
				t.Fatal("From returned nil")
			}
			if p.Status != tc.status || p.Code != tc.code {
				t.Fatalf("From(%v) = %d %s, want %d %s", tc.err, p.Status, p.Code, tc.status, tc.code)
			}
			if unexpected != tc.unexpected {
				t.Errorf("From(%v) unexpected = %v, want %v", tc.err, unexpected, tc.unexpected)
			}
			if p.Type != "/problems/"+p.Code || p.Retryable != wantRetryable(p.Status, p.Code) {
				t.Errorf("From(%v) = %+v: type or retryable breaks the error contract", tc.err, p)
			}
			if strings.Contains(p.Detail, "hunter2") || strings.Contains(p.Detail, "10.0.0.7") {
				t.Errorf("From(%v) leaks the error text in detail %q", tc.err, p.Detail)
			}
			if p.Detail == "" {
				t.Errorf("From(%v) has an empty detail", tc.err)
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

func serve(t *testing.T, method string, requestID string, p *problem.Problem) *httptest.ResponseRecorder {
	t.Helper()
	e := echo.New()
	req := httptest.NewRequest(method, "/v1/files/file_1?x=1", nil)
	rec := httptest.NewRecorder()
	c := e.NewContext(req, rec)
	if requestID != "" {
		c.Response().Header().Set(problem.RequestIDHeader, requestID)
	}
	problem.Write(c, p)
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
	}
	return body
}

func TestWrite(t *testing.T) {
	t.Parallel()

	t.Run("WritesProblemJSON", func(t *testing.T) {
		t.Parallel()
		p := problem.New(problem.PathExists, "held")
		p.ExistingFileID = "file_9"
		rec := serve(t, http.MethodPost, "req_abc", p)
		if rec.Code != 409 {
			t.Fatalf("status %d, want 409", rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q, want application/problem+json", ct)
		}
		body := decode(t, rec)
		want := map[string]any{
			"type": "/problems/PATH_EXISTS", "title": "Path exists", "status": float64(409), "detail": "held",
			"instance": "/v1/files/file_1", "code": "PATH_EXISTS", "retryable": false,
			"request_id": "req_abc", "existing_file_id": "file_9",
		}
		for k, v := range want {
			if body[k] != v {
				t.Errorf("%s = %#v, want %#v", k, body[k], v)
			}
		}
		for _, k := range []string{"errors", "missing_parts", "RetryAfter", "Header"} {
			if _, ok := body[k]; ok {
				t.Errorf("body has member %q: %s", k, rec.Body.String())
			}
		}
		if rec.Header().Get("Retry-After") != "" || rec.Header().Get("WWW-Authenticate") != "" {
			t.Errorf("unexpected headers %v", rec.Header())
		}
	})

	t.Run("CopiesRequestIDAndKeepsProblemUnchanged", func(t *testing.T) {
		t.Parallel()
		p := problem.New(problem.NotFound, "no such resource")
		rec := serve(t, http.MethodGet, "req_xyz", p)
		if got := decode(t, rec)["request_id"]; got != "req_xyz" {
			t.Fatalf("request_id = %v, want req_xyz", got)
		}
		if p.RequestID != "" || p.Instance != "" {
			t.Fatalf("Write modified the shared problem: %+v", p)
		}
	})

	t.Run("AlwaysHasRequestIDMember", func(t *testing.T) {
		t.Parallel()
		body := decode(t, serve(t, http.MethodGet, "", problem.New(problem.NotFound, "x")))
		if _, ok := body["request_id"]; !ok {
			t.Fatalf("body has no request_id member: %v", body)
		}
	})

	t.Run("KeepsExplicitInstance", func(t *testing.T) {
		t.Parallel()
		p := problem.New(problem.NotFound, "x")
		p.Instance = "/v1/operations/k1"
		if got := decode(t, serve(t, http.MethodGet, "r", p))["instance"]; got != "/v1/operations/k1" {
			t.Fatalf("instance = %v", got)
		}
	})

	t.Run("SetsRetryAfterOn503", func(t *testing.T) {
		t.Parallel()
		rec := serve(t, http.MethodGet, "r", problem.New(problem.StorageUnavailable, "down"))
		if rec.Code != 503 {
			t.Fatalf("status %d", rec.Code)
		}
		ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
		if err != nil || ra <= 0 {
			t.Fatalf("Retry-After = %q, want positive seconds", rec.Header().Get("Retry-After"))
		}
		if decode(t, rec)["retryable"] != true {
			t.Fatalf("503 is not retryable")
		}
	})

	t.Run("SetsRetryAfterOn429", func(t *testing.T) {
		t.Parallel()
		for _, code := range []string{problem.RateLimited, problem.QuotaExceeded} {
			rec := serve(t, http.MethodPost, "r", problem.New(code, "slow down"))
			if ra, err := strconv.Atoi(rec.Header().Get("Retry-After")); rec.Code != 429 || err != nil || ra <= 0 {
				t.Fatalf("%s: status %d, Retry-After %q", code, rec.Code, rec.Header().Get("Retry-After"))
			}
		}
	})

	t.Run("UsesProblemRetryAfter", func(t *testing.T) {
		t.Parallel()
		p := problem.New(problem.OperationInProgress, "running")
		p.RetryAfter = 7
		p = p.WithHeader("Link", `</v1/operations/k>; rel="monitor"`)
		rec := serve(t, http.MethodPost, "r", p)
		if rec.Header().Get("Retry-After") != "7" || rec.Header().Get("Link") == "" {
			t.Fatalf("headers %v", rec.Header())
		}
		if decode(t, rec)["retryable"] != true {
			t.Fatalf("OPERATION_IN_PROGRESS is not retryable")
		}
	})

	t.Run("SetsWWWAuthenticateOn401", func(t *testing.T) {
		t.Parallel()
		rec := serve(t, http.MethodGet, "r", problem.New(problem.Unauthenticated, "no token"))
		if rec.Code != 401 || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("status %d, WWW-Authenticate %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	})

	t.Run("CopiesProblemHeaders", func(t *testing.T) {
		t.Parallel()
		p := problem.New(problem.RangeNotSatisfiable, "10 bytes").WithHeader("Content-Range", "bytes */10")
		rec := serve(t, http.MethodGet, "r", p)
		if rec.Code != 416 || rec.Header().Get("Content-Range") != "bytes */10" {
			t.Fatalf("status %d, Content-Range %q", rec.Code, rec.Header().Get("Content-Range"))
		}
	})

	t.Run("DropsContentHeaders", func(t *testing.T) {
		t.Parallel()
		e := echo.New()
		rec := httptest.NewRecorder()
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/v1/files/f/content", nil), rec)
		c.Response().Header().Set("ETag", `"abc"`)
		c.Response().Header().Set("Content-Disposition", "attachment")
		c.Response().Header().Set("Content-Type", "text/plain")
		problem.Write(c, problem.New(problem.ContentBlocked, "blocked"))
		if rec.Header().Get("ETag") != "" || rec.Header().Get("Content-Disposition") != "" {
			t.Fatalf("content headers survived: %v", rec.Header())
		}
		if rec.Header().Get("Content-Type") != problem.ContentType {
			t.Fatalf("Content-Type %q", rec.Header().Get("Content-Type"))
		}
	})

	t.Run("SendsNoBodyForHEAD", func(t *testing.T) {
		t.Parallel()
		rec := serve(t, http.MethodHead, "r", problem.New(problem.NotFound, "x"))
		if rec.Code != 404 {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Body.Len() != 0 {
			t.Fatalf("HEAD got a body: %q", rec.Body.String())
		}
		if rec.Header().Get("Content-Type") != problem.ContentType {
			t.Fatalf("Content-Type %q", rec.Header().Get("Content-Type"))
		}
		getRec := serve(t, http.MethodGet, "r", problem.New(problem.NotFound, "x"))
		if n, err := strconv.Atoi(rec.Header().Get("Content-Length")); err != nil || n != getRec.Body.Len() {
			t.Fatalf("HEAD Content-Length %q, GET body is %d bytes", rec.Header().Get("Content-Length"), getRec.Body.Len())
		}
	})
}

func TestErrorHandler(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	e := echo.New()
	rec := httptest.NewRecorder()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/v1/files", nil), rec)
	problem.ErrorHandler(log)(errors.New("pq: secret-table missing"), c)
	if rec.Code != 500 {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	body, _ := io.ReadAll(rec.Body)
	if strings.Contains(string(body), "secret-table") {
		t.Fatalf("internal error text reached the client: %s", body)
	}
	if !strings.Contains(logged.String(), "secret-table") {
		t.Fatalf("unexpected error was not logged: %q", logged.String())
	}
}
