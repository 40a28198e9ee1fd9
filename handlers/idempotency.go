package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"context"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// record writes a keyed request's outcome in the transaction that commits
// its effect; content is the content fingerprint of that request.
type record func(ctx context.Context, tx pgx.Tx, content []byte, out idempotency.Outcome) error

// write is one write as admission sees it: what it asks, how to run it,
// and how to learn its content's fingerprint.
type write struct {
	request idempotency.Request
	// run performs the write. With a key, record is non-nil and run must
	// call it in the transaction that commits the effect.
	run func(rec record) (idempotency.Outcome, error)
	// content returns the SHA-256 standing for the content in the
	// fingerprint (nil for writes without content), reading the body only
	// if nothing else told it.
	content func() ([]byte, error)
	// current, when set, answers a replay with the resource's current
	// state (routes that create a resource that keeps changing).
	current func(rec *idempotency.Record) (idempotency.Outcome, error)
}

func noContent() ([]byte, error) { return nil, nil }

// fileHook is the storage hook of a write whose outcome is a file: it
// renders the outcome into out and records it when the request is keyed.
func (a *API) fileHook(rec record, out *idempotency.Outcome, content func(*agentfs.File) []byte) storage.CommitHook {
	return func(ctx context.Context, tx pgx.Tx, f *agentfs.File, created bool) error {
		*out = a.fileOutcome(f, created)
		if rec == nil {
			return nil
		}
		return rec(ctx, tx, content(f), *out)
	}
}

func fileContent(f *agentfs.File) []byte { b, _ := hex.DecodeString(f.SHA256); return b }
func noFileContent(*agentfs.File) []byte { return nil }

// perform runs a write, under its Idempotency-Key when it has one: a first
// request claims the key and records its outcome in the transaction of its
// effect; a repeat replays that outcome or is told why it cannot.
func (a *API) perform(c echo.Context, w write) error {
	key, _ := c.Get(keyKey).(string)
	if key == "" {
		out, err := w.run(nil)
		if err != nil {
			return err
		}
		return writeOutcome(c, out)
	}
	req := c.Request()
	claim, rec, err := a.deps.Keys.Begin(req.Context(), principal(c).Subject, key, req.Method, c.Path(), w.request.Sum())
	if err != nil {
		return admissionError(err, key)
	}
	if rec != nil {
		return a.replay(c, rec, w)
	}
	defer claim.Close()
	out, err := w.run(claim.Complete)
	if err != nil {
		return a.settle(c, claim, key, err, w.content)
	}
	if a.deps.AfterCommit != nil {
		a.deps.AfterCommit()
	}
	return writeOutcome(c, out)
}

// settle ends a claim whose write failed: outcomes decided against the
// stored state are recorded (the key replays them), anything that may
// succeed when repeated releases the key.
func (a *API) settle(c echo.Context, claim *idempotency.Claim, key string, err error, content func() ([]byte, error)) error {
	ctx := c.Request().Context()
	if errors.Is(err, idempotency.ErrClaimLost) {
		return inProgress(key, time.Second)
	}
	p, _ := problem.From(err)
	if idempotency.DispositionOf(p.Status, p.Code) == idempotency.Release {
		a.release(c, claim)
		return err
	}
	sum, cerr := content()
	if cerr != nil {
		a.release(c, claim)
		return cerr
	}
	recorded := *p
	recorded.RequestID = c.Response().Header().Get(problem.RequestIDHeader)
	recorded.Instance = c.Request().URL.Path
	body, _ := json.Marshal(recorded)
	rerr := claim.Record(ctx, sum, idempotency.Outcome{Status: p.Status, Body: body})
	switch {
	case errors.Is(rerr, idempotency.ErrClaimLost):
		return inProgress(key, time.Second)
	case rerr != nil:
		a.release(c, claim)
		return rerr
	}
	return err
}

func (a *API) release(c echo.Context, claim *idempotency.Claim) {
	if err := claim.Release(c.Request().Context()); err != nil {
		a.deps.Log.WarnContext(c.Request().Context(), "release idempotency key", "err", err)
	}
}

// replay answers a repeat of a completed request with its recorded outcome,
// once its content is known to be the same.
func (a *API) replay(c echo.Context, rec *idempotency.Record, w write) error {
	sum, err := w.content()
	if err != nil {
		return err
	}
	if !bytes.Equal(sum, rec.ContentHash) {
		return admissionError(idempotency.ErrConflict, rec.Key)
	}
	out := rec.Outcome
	if w.current != nil && out.Status < 300 {
		if out, err = w.current(rec); err != nil {
			return err
		}
	}
	c.Response().Header().Set(replayHeader, "true")
	return writeOutcome(c, out)
}

// replayHeader marks a response replayed from a recorded outcome.
const replayHeader = "Idempotent-Replayed"

// writeOutcome sends an outcome; a recorded problem is sent again as a
// problem of this request.
func writeOutcome(c echo.Context, out idempotency.Outcome) error {
	if out.Status >= 400 {
		var p problem.Problem
		if err := json.Unmarshal(out.Body, &p); err != nil {
			return err
		}
		p.Instance = ""
		return &p
	}
	for k, v := range out.Header {
		c.Response().Header().Set(k, v)
	}
	return c.Blob(out.Status, echo.MIMEApplicationJSON, out.Body)
}

// fileOutcome is the response to a write that left f: 201 with Location
// for a new file, else 200.
func (a *API) fileOutcome(f *agentfs.File, created bool) idempotency.Outcome {
	return FileOutcome(a.deps.PublicURL, f, created)
}

// FileOutcome is the response a standalone upload answers for f (201 with
// Location when created, else 200), as recorded for replay. The batch
// runner records it for item keys, so either route replays the other.
func FileOutcome(publicURL string, f *agentfs.File, created bool) idempotency.Outcome {
	body, _ := json.Marshal(fileJSONOf(publicURL, f))
	body = append(body, '\n')
	out := idempotency.Outcome{
		Status:   http.StatusOK,
		Header:   map[string]string{"ETag": f.ETag()},
		Body:     body,
		Resource: idempotency.Resource{Object: "file", ID: f.ID},
	}
	if created {
		out.Status = http.StatusCreated
		out.Header[echo.HeaderLocation] = "/v1/files/" + f.ID
	}
	return out
}

func admissionError(err error, key string) error {
	var busy *idempotency.InProgressError
	switch {
	case errors.Is(err, idempotency.ErrConflict):
		return problem.New(problem.IdempotencyConflict,
			"Idempotency-Key "+strconv.Quote(key)+" was used for a different request; use a new key for a new request")
	case errors.As(err, &busy):
		return inProgress(key, busy.RetryAfter)
	}
	return err
}

// maxInProgressWait caps the Retry-After of OPERATION_IN_PROGRESS: the
// first request may finish any moment, well before its lease would lapse.
const maxInProgressWait = 5 * time.Second

func inProgress(key string, wait time.Duration) *problem.Problem {
	p := problem.New(problem.OperationInProgress, "a request with this Idempotency-Key is still running; retry the same key later")
	p.RetryAfter = max(1, int(min(wait, maxInProgressWait).Seconds()))
	return p.WithHeader("Link", "</v1/operations/"+url.PathEscape(key)+`>; rel="monitor"`)
}

// hashBody reads a body to its end, only to learn its SHA-256 (a repeat
// whose content must be compared; nothing is stored).
func hashBody(body io.Reader, limit int64) ([]byte, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, limit+1))
	if err != nil {
		return nil, agentfs.BodyError(err)
	}
	if n > limit {
		return nil, agentfs.ErrTooLarge
	}
	return h.Sum(nil), nil
}

// getOperation is GET /v1/operations/{key}: what the key holds. A key that
// holds nothing is 404, which proves that no effect happened under it.
func (a *API) getOperation(c echo.Context) error {
	key, err := idempotency.ParseKey(c.Param("idempotency_key"))
	if err != nil {
		return problem.New(problem.InvalidIdempotencyKey, err.Error())
	}
	rec, err := a.deps.Keys.Operation(c.Request().Context(), principal(c).Subject, key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, operationJSON(rec))
}

// operationJSON is the Operation object.
type operationJSONT struct {
	Object         string                `json:"object"`
	IdempotencyKey string                `json:"idempotency_key"`
	Status         string                `json:"status"`
	Method         string                `json:"method"`
	Route          string                `json:"route"`
	ResponseStatus *int                  `json:"response_status"`
	Response       json.RawMessage       `json:"response"`
	Resource       *idempotency.Resource `json:"resource"`
	CreatedAt      time.Time             `json:"created_at"`
	CompletedAt    *time.Time            `json:"completed_at"`
	ExpiresAt      *time.Time            `json:"expires_at"`
}

func operationJSON(r *idempotency.Record) operationJSONT {
	out := operationJSONT{
		Object: "operation", IdempotencyKey: r.Key, Status: "in_progress", Method: r.Method, Route: r.Route,
		Response: json.RawMessage("null"), CreatedAt: r.CreatedAt.UTC(),
		CompletedAt: utc(r.CompletedAt), ExpiresAt: utc(r.ExpiresAt),
	}
	if r.Completed {
		out.Status = "completed"
		out.ResponseStatus = &r.Outcome.Status
		out.Response = json.RawMessage(r.Outcome.Body)
		if r.Outcome.Resource.ID != "" {
			out.Resource = &r.Outcome.Resource
		}
	}
	return out
}
