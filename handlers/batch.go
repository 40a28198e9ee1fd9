package handlers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/jsonscan"
	"github.com/agentfs/agentfs/offheap"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// maxBatchWait bounds ?wait on POST /v1/batch and GET /v1/batch/{id}.
const maxBatchWait = 30

// batchOp is one operation of a batch request, but its content, which
// stays a slice of the body (decodeOp).
type batchOp struct {
	Op             string  `json:"op"`
	Path           *string `json:"path"`
	Content        skipped `json:"content"`
	Encoding       *string `json:"encoding"`
	ContentType    *string `json:"content_type"`
	IfExists       *string `json:"if_exists"`
	IdempotencyKey *string `json:"idempotency_key"`
	FileID         *string `json:"file_id"`
	ExpiresIn      *int64  `json:"expires_in"`
	content        []byte  // the content's JSON text, nil when absent or null
}

// skipped is a member decoded elsewhere: encoding/json passes over it
// without copying it.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// batchOpFields are the members an operation may have.
var batchOpFields = []string{"op", "path", "content", "encoding", "content_type", "if_exists", "idempotency_key", "file_id", "expires_in"}

// offheapBody is the size from which a batch body is read into a buffer
// outside the Go heap.
const offheapBody = 1 << 20

// createBatch is POST /v1/batch: validate every item, store and queue the
// batch with its key's record, answer 202 (or the current state on a
// repeat, 200). The body is read into one buffer and taken apart in place:
// each put's content stays a slice of it until the batch is stored, so a
// batch costs its body in memory, and a large body is outside the Go heap
// (package offheap), so it does not let garbage grow by as much again.
// The buffer is given back once CreateBatch returns: nothing that outlives
// it points into the body (every value decoded from it is a copy; the
// contents are copied into the rows that store them).
func (a *API) createBatch(c echo.Context) error {
	if key, _ := c.Get(keyKey).(string); key == "" {
		return problem.New(problem.IdempotencyKeyRequired, "POST /v1/batch runs only with an Idempotency-Key")
	}
	wait, err := parseWait(c.QueryParam("wait"), maxBatchWait)
	if err != nil {
		return err
	}
	var mapped []byte
	defer func() { offheap.Free(mapped) }()
	raw, err := readJSONInto(c, a.deps.Limits.BatchMaxBytes, false, func(n int) []byte {
		if n >= offheapBody {
			if b, ok := offheap.Alloc(n); ok {
				mapped = b
				return b
			}
		}
		return make([]byte, n)
	})
	if err != nil {
		return err
	}
	ops, err := batchOperations(raw, a.deps.Limits.BatchMaxItems)
	if err != nil {
		return err
	}
	b := &agentfs.Batch{}
	if b.Items, err = a.batchItems(ops); err != nil {
		return err
	}
	res, err := a.deps.Writes.CreateBatch(c.Request().Context(), caller(c), b, raw, wait)
	return writeResult(c, res, err)
}

// errTooManyOps stops taking a batch's operations apart past the limit.
var errTooManyOps = errors.New("too many operations")

// batchOperations returns the texts of the operations of a batch body
// ({"operations": [...]}), slices of raw; more than max operations are
// refused before they are all listed.
func batchOperations(raw []byte, max int) ([][]byte, error) {
	if !json.Valid(raw) {
		return nil, problem.Invalid("body", "malformed JSON")
	}
	var list []byte
	switch jsonscan.Kind(raw) {
	case 'n': // null decodes as an empty body
	case '{':
		err := jsonscan.Members(raw, func(k, v []byte) error {
			name := string(jsonscan.AppendString(nil, k))
			if !strings.EqualFold(name, "operations") { // encoding/json matches names without case
				return (&jsonError{field: name, message: "is not a known field"}).problem()
			}
			list = v
			return nil
		})
		var p *problem.Problem
		switch {
		case errors.As(err, &p):
			return nil, p
		case err != nil: // never after json.Valid
			return nil, problem.Invalid("body", "malformed JSON")
		}
	default:
		return nil, problem.Validation("body", "must be a JSON object")
	}
	var ops [][]byte
	switch jsonscan.Kind(list) {
	case 0, 'n':
		return nil, nil
	case '[':
		err := jsonscan.Elements(list, func(v []byte) error {
			if len(ops) == max {
				return errTooManyOps
			}
			ops = append(ops, v)
			return nil
		})
		switch {
		case errors.Is(err, errTooManyOps):
			return nil, problem.Validation("operations", fmt.Sprintf("must hold 1 to %d operations", max))
		case err != nil: // never after json.Valid
			return nil, problem.Invalid("body", "malformed JSON")
		}
		return ops, nil
	}
	return nil, problem.Validation("operations", "must be an array")
}

// decodeOp decodes one operation strictly, as decodeStrict would, but
// leaves its content a slice of raw.
func decodeOp(raw []byte) (batchOp, *jsonError) {
	var op batchOp
	switch jsonscan.Kind(raw) {
	case 'n':
		return op, nil
	case '{':
	default:
		return op, &jsonError{message: "must be a JSON object"}
	}
	err := jsonscan.Members(raw, func(k, v []byte) error {
		name := string(jsonscan.AppendString(nil, k))
		i := slices.IndexFunc(batchOpFields, func(f string) bool { return strings.EqualFold(f, name) })
		if i < 0 {
			return &jsonError{field: name, message: "is not a known field"}
		}
		if batchOpFields[i] == "content" {
			op.content = v // the last one counts, as for every member
		}
		return nil
	})
	if je, ok := err.(*jsonError); ok {
		return op, je
	}
	if je := jsonErrorOf(json.Unmarshal(raw, &op)); je != nil {
		return op, je
	}
	switch jsonscan.Kind(op.content) {
	case 'n':
		op.content = nil
	case '"', 0:
	default:
		return op, &jsonError{field: "content", message: "must be a string"}
	}
	return op, nil
}

// parseWait reads how many seconds, 0 to most, a request may wait.
func parseWait(v string, most int) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, problem.Invalid("wait", "must be an integer number of seconds")
	}
	if n < 0 || n > most {
		return 0, problem.Validation("wait", fmt.Sprintf("must be between 0 and %d", most))
	}
	return time.Duration(n) * time.Second, nil
}

// batchItems validates every operation before anything runs; the problem
// names each bad item's index and field.
func (a *API) batchItems(ops [][]byte) ([]agentfs.BatchItem, error) {
	l := a.deps.Limits
	if len(ops) < 1 || len(ops) > l.BatchMaxItems {
		return nil, problem.Validation("operations", fmt.Sprintf("must hold 1 to %d operations", l.BatchMaxItems))
	}
	items := make([]agentfs.BatchItem, len(ops))
	var errs []problem.FieldError
	for i, raw := range ops {
		field := func(name string) string { return fmt.Sprintf("operations[%d].%s", i, name) }
		op, je := decodeOp(raw)
		if je != nil {
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
	f := &itemFields{op: op}
	switch op.Op {
	case agentfs.OpPut, agentfs.OpCopy:
		f.target(&it)
	case agentfs.OpDelete, agentfs.OpRestore:
	default:
		f.bad("op", "must be put, delete, restore or copy")
		return it, f.errs
	}
	if op.Op == agentfs.OpPut {
		f.put(&it, maxContent)
	} else {
		f.byID(&it)
	}
	return it, f.errs
}

// itemFields checks the fields of one batch operation, gathering what is
// wrong with them.
type itemFields struct {
	op   batchOp
	errs []problem.FieldError
}

func (f *itemFields) bad(field, message string) {
	f.errs = append(f.errs, problem.FieldError{Field: field, Message: message})
}

// need is v, which the operation requires.
func (f *itemFields) need(field string, v *string) string {
	if v == nil || *v == "" {
		f.bad(field, "is required for "+f.op.Op)
		return ""
	}
	return *v
}

// target reads the path a put or copy writes, and its if_exists.
func (f *itemFields) target(it *agentfs.BatchItem) {
	if it.Path = f.need("path", f.op.Path); it.Path != "" {
		var err error
		if it.Path, err = agentfs.NormalizePath(it.Path); err != nil {
			f.bad("path", err.Error())
		}
	}
	if f.op.IfExists != nil {
		var err error
		if it.Replace, err = parseIfExists(*f.op.IfExists); err != nil {
			f.bad("if_exists", err.Error())
		}
	}
}

// put reads a put's content, its media type, key and expiry.
func (f *itemFields) put(it *agentfs.BatchItem, maxContent int64) {
	it.Text, it.Encoding, it.ContentType, it.Key = putItemFields(f.op, maxContent, f.bad)
	if f.op.ExpiresIn != nil {
		d, err := expiresIn("expires_in", *f.op.ExpiresIn, agentfs.MinExpiresIn, agentfs.MaxExpiresIn)
		if p, ok := err.(*problem.Problem); ok {
			f.bad("expires_in", p.Errors[0].Message)
		}
		it.ExpiresIn = d
	}
}

// byID reads the file a delete, restore or copy names, and refuses the
// fields only a put (or a copy) takes.
func (f *itemFields) byID(it *agentfs.BatchItem) {
	op := f.op
	if op.ExpiresIn != nil {
		f.bad("expires_in", "is only for put")
	}
	if it.FileID = f.need("file_id", op.FileID); it.FileID != "" && !agentfs.WellFormedID("file", it.FileID) {
		f.bad("file_id", "is not a file id (file_ followed by 26 characters)")
	}
	if op.content != nil {
		f.bad("content", "is only for put")
	}
	for _, field := range []struct {
		name string
		v    *string
	}{{"encoding", op.Encoding}, {"content_type", op.ContentType}, {"idempotency_key", op.IdempotencyKey}} {
		if field.v != nil {
			f.bad(field.name, "is only for put")
		}
	}
	if op.Op != agentfs.OpCopy && (op.Path != nil || op.IfExists != nil) {
		f.bad("path", "is only for put and copy")
	}
}

// putItemFields checks a put's content (its size once decoded, that base64
// is base64) without decoding it into memory, and returns it as the
// request's JSON string with its encoding. The body's strings are Unicode
// text (readJSONInto refused any other), so utf8 content always is.
func putItemFields(op batchOp, maxContent int64, bad func(f, m string)) (text []byte, encoding, ct, key string) {
	var size int64
	switch {
	case op.content == nil:
		bad("content", "is required for put")
	case op.Encoding == nil || *op.Encoding == agentfs.ContentUTF8:
		// Text: the whole body was checked for strings that are not
		// Unicode text (jsonutf8) when it was read.
		text, encoding, size = op.content, agentfs.ContentUTF8, int64(jsonscan.StringLen(op.content))
	case *op.Encoding == agentfs.ContentBase64:
		var err error
		if size, err = base64Size(op.content); err != nil {
			bad("content", "is not valid base64")
		}
		text, encoding = op.content, agentfs.ContentBase64
	default:
		bad("encoding", "must be utf8 or base64")
	}
	if size > maxContent {
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
	return text, encoding, ct, key
}

// base64Size is the size of the bytes the JSON string s holds in base64,
// decoded a piece at a time: the error of base64.StdEncoding.DecodeString
// when it is not base64.
func base64Size(s []byte) (int64, error) {
	return io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, jsonscan.NewString(s)))
}

// getBatch is GET /v1/batch/{id}, holding the answer while ?wait lasts
// and the batch runs.
func (a *API) getBatch(c echo.Context) error {
	wait, err := parseWait(c.QueryParam("wait"), maxBatchWait)
	if err != nil {
		return err
	}
	b, files, err := a.deps.Sessions.AwaitBatch(c.Request().Context(), caller(c), c.Param("id"), wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Batch(a.deps.PublicURL, b, files))
}

// listBatches is GET /v1/batch: the subject's batches, newest first,
// counted but without their items.
func (a *API) listBatches(c echo.Context) error {
	lq, err := readStatusList(c.QueryParams(), "batch", agentfs.BatchQueued, agentfs.BatchRunning, agentfs.BatchSucceeded,
		agentfs.BatchPartiallySucceeded, agentfs.BatchFailed, agentfs.BatchCanceled)
	if err != nil {
		return err
	}
	limit := lq.limit
	f := agentfs.BatchFilter{Status: lq.status, Limit: limit + 1, After: lq.after}
	batches, err := a.deps.Sessions.ListBatches(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	out := api.BatchList{}
	out.Data, out.HasMore, out.NextCursor = cursorPage(batches, limit, func(b *agentfs.Batch) api.Batch {
		return render.Batch(a.deps.PublicURL, b, nil)
	}, func(b *agentfs.Batch) (time.Time, string) { return b.CreatedAt, b.ID })
	return c.JSON(http.StatusOK, out)
}

// cancelBatch is POST /v1/batch/{id}/cancel: pending items become
// canceled; safe to repeat.
func (a *API) cancelBatch(c echo.Context) error {
	return writeByID(c, a.deps.Writes.CancelBatch)
}
