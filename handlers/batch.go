package handlers

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// maxBatchWait bounds ?wait on POST /v1/batch.
const maxBatchWait = 30

// batchOp is one operation of a batch request.
type batchOp struct {
	Op             string  `json:"op"`
	Path           *string `json:"path"`
	Content        *string `json:"content"`
	Encoding       *string `json:"encoding"`
	ContentType    *string `json:"content_type"`
	IfExists       *string `json:"if_exists"`
	IdempotencyKey *string `json:"idempotency_key"`
	FileID         *string `json:"file_id"`
	ExpiresIn      *int64  `json:"expires_in"`
}

// createBatch is POST /v1/batch: validate every item, store and queue the
// batch with its key's record, answer 202 (or the current state on a
// repeat, 200).
func (a *API) createBatch(c echo.Context) error {
	if key, _ := c.Get(keyKey).(string); key == "" {
		return problem.New(problem.IdempotencyKeyRequired, "POST /v1/batch runs only with an Idempotency-Key")
	}
	wait, err := parseWait(c.QueryParam("wait"))
	if err != nil {
		return err
	}
	var body struct {
		Operations []json.RawMessage `json:"operations"`
	}
	raw, err := readJSON(c, a.deps.Limits.BatchMaxBytes, &body, false)
	if err != nil {
		return err
	}
	b := &agentfs.Batch{}
	if b.Items, err = a.batchItems(body.Operations); err != nil {
		return err
	}
	res, err := a.deps.Writes.CreateBatch(c.Request().Context(), caller(c), b, raw, wait)
	return writeResult(c, res, err)
}

func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, problem.Invalid("wait", "must be an integer number of seconds")
	}
	if n < 0 || n > maxBatchWait {
		return 0, problem.Validation("wait", fmt.Sprintf("must be between 0 and %d", maxBatchWait))
	}
	return time.Duration(n) * time.Second, nil
}

// batchItems validates every operation before anything runs; the problem
// names each bad item's index and field.
func (a *API) batchItems(ops []json.RawMessage) ([]agentfs.BatchItem, error) {
	l := a.deps.Limits
	if len(ops) < 1 || len(ops) > l.BatchMaxItems {
		return nil, problem.Validation("operations", fmt.Sprintf("must hold 1 to %d operations", l.BatchMaxItems))
	}
	items := make([]agentfs.BatchItem, len(ops))
	var errs []problem.FieldError
	for i, raw := range ops {
		field := func(name string) string { return fmt.Sprintf("operations[%d].%s", i, name) }
		var op batchOp
		if je := decodeStrict(raw, &op); je != nil {
			name := fmt.Sprintf("operations[%d]", i)
			if je.field != "" {
				name = field(je.field)
			}
			errs = append(errs, problem.FieldError{Field: name, Message: je.message})
			continue
		}
		it, fe := a.batchItem(op, l.BatchMaxItemBytes)
		for _, e := range fe {
			errs = append(errs, problem.FieldError{Field: field(e.Field), Message: e.Message})
		}
		it.Index = i
		items[i] = it
	}
	if len(errs) > 0 {
		p := problem.New(problem.ValidationFailed, fmt.Sprintf("%d problem(s) in the batch; nothing ran: %s: %s",
			len(errs), errs[0].Field, errs[0].Message))
		p.Errors = errs
		return nil, p
	}
	return items, nil
}

// batchItem checks one operation and returns it as an item, with the
// errors of its fields.
func (a *API) batchItem(op batchOp, maxContent int64) (agentfs.BatchItem, []problem.FieldError) {
	it := agentfs.BatchItem{Op: op.Op}
	var errs []problem.FieldError
	bad := func(f, m string) { errs = append(errs, problem.FieldError{Field: f, Message: m}) }
	need := func(f string, v *string) string {
		if v == nil || *v == "" {
			bad(f, "is required for "+op.Op)
			return ""
		}
		return *v
	}
	switch op.Op {
	case agentfs.OpPut, agentfs.OpCopy:
		if it.Path = need("path", op.Path); it.Path != "" {
			var err error
			if it.Path, err = agentfs.NormalizePath(it.Path); err != nil {
				bad("path", err.Error())
			}
		}
		if op.IfExists != nil {
			var err error
			if it.Replace, err = parseIfExists(*op.IfExists); err != nil {
				bad("if_exists", err.Error())
			}
		}
	case agentfs.OpDelete, agentfs.OpRestore:
	default:
		bad("op", "must be put, delete, restore or copy")
		return it, errs
	}
	if op.Op == agentfs.OpPut {
		it.Content, it.ContentType, it.Key = putItemFields(op, maxContent, bad)
		if op.ExpiresIn != nil {
			d, err := expiresIn("expires_in", *op.ExpiresIn, agentfs.MinExpiresIn, agentfs.MaxExpiresIn)
			if p, ok := err.(*problem.Problem); ok {
				bad("expires_in", p.Errors[0].Message)
			}
			it.ExpiresIn = d
		}
	} else {
		if op.ExpiresIn != nil {
			bad("expires_in", "is only for put")
		}
		if it.FileID = need("file_id", op.FileID); it.FileID != "" && !agentfs.WellFormedID("file", it.FileID) {
			bad("file_id", "is not a file id (file_ followed by 26 characters)")
		}
		for name, v := range map[string]*string{"content": op.Content, "encoding": op.Encoding,
			"content_type": op.ContentType, "idempotency_key": op.IdempotencyKey} {
			if v != nil {
				bad(name, "is only for put")
			}
		}
		if op.Op != agentfs.OpCopy && (op.Path != nil || op.IfExists != nil) {
			bad("path", "is only for put and copy")
		}
	}
	return it, errs
}

func putItemFields(op batchOp, maxContent int64, bad func(f, m string)) (content []byte, ct, key string) {
	if op.Content == nil {
		bad("content", "is required for put")
	} else if op.Encoding == nil || *op.Encoding == "utf8" {
		content = []byte(*op.Content) // text: decodeStrict refused strings that are not
	} else if *op.Encoding == "base64" {
		var err error
		if content, err = base64.StdEncoding.DecodeString(*op.Content); err != nil {
			bad("content", "is not valid base64")
		}
	} else {
		bad("encoding", "must be utf8 or base64")
	}
	if int64(len(content)) > maxContent {
		bad("content", fmt.Sprintf("is larger than %d bytes", maxContent))
	}
	var ctIn string
	if op.ContentType != nil {
		ctIn = *op.ContentType
	}
	ct, err := normalizeMediaType(ctIn)
	if err != nil {
		bad("content_type", "is not a valid media type")
	}
	if op.IdempotencyKey != nil {
		if key, err = idempotency.ParseKey(*op.IdempotencyKey); err != nil {
			bad("idempotency_key", err.Error())
		}
	}
	return content, ct, key
}

// getBatch is GET /v1/batch/{id}.
func (a *API) getBatch(c echo.Context) error {
	out, err := a.deps.Writes.CurrentBatch(c.Request().Context(), caller(c), c.Param("id"))
	return writeResult(c, idempotency.Result{Outcome: out}, err)
}

// listBatches is GET /v1/batch: the subject's batches, newest first,
// counted but without their items.
func (a *API) listBatches(c echo.Context) error {
	q := c.QueryParams()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	f := agentfs.BatchFilter{Status: q.Get("status"), Limit: limit + 1}
	switch f.Status {
	case "", agentfs.BatchQueued, agentfs.BatchRunning, agentfs.BatchSucceeded, agentfs.BatchPartiallySucceeded,
		agentfs.BatchFailed, agentfs.BatchCanceled:
	default:
		return problem.Validation("status", "must be queued, running, succeeded, partially_succeeded, failed or canceled")
	}
	if f.After, err = parseCursor(q.Get("cursor"), "batch"); err != nil {
		return err
	}
	batches, err := a.deps.Sessions.ListBatches(c.Request().Context(), principal(c).Subject, f)
	if err != nil {
		return err
	}
	out := api.BatchList{Data: make([]api.Batch, 0, min(len(batches), limit))}
	if len(batches) > limit {
		batches, out.HasMore = batches[:limit], true
		out.NextCursor = nextCursor(batches[limit-1].CreatedAt, batches[limit-1].ID)
	}
	for _, b := range batches {
		out.Data = append(out.Data, api.NewBatch(a.deps.PublicURL, b, nil))
	}
	return c.JSON(http.StatusOK, out)
}

// cancelBatch is POST /v1/batch/{id}/cancel: pending items become
// canceled; safe to repeat.
func (a *API) cancelBatch(c echo.Context) error {
	res, err := a.deps.Writes.CancelBatch(c.Request().Context(), caller(c), c.Param("id"))
	return writeResult(c, res, err)
}
