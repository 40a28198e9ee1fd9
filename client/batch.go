package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentfs/agentfs/api"
)

// BatchOp is one operation of a batch (schema BatchOperation). Build it
// with BatchPut, BatchDelete, BatchRestore or BatchCopy, or fill it in.
type BatchOp struct {
	// Op is "put", "delete", "restore" or "copy".
	Op string `json:"op"`
	// Path is where a put or copy writes.
	Path string `json:"path,omitempty"`
	// FileID is the file a delete or restore acts on, or a copy's source.
	FileID string `json:"file_id,omitempty"`
	// Content is a put's content, encoded as Encoding says; it is always
	// sent for a put, so an empty one makes an empty file.
	Content string `json:"content,omitempty"`
	// Encoding is "utf8" (the default) or "base64".
	Encoding    string `json:"encoding,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// IfExists is "error" (the default) or "replace", for a put or copy.
	IfExists string `json:"if_exists,omitempty"`
	// IdempotencyKey is a put's own key, shared with standalone uploads:
	// the same put under it gives the stored file (the item is Replayed).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// ExpiresIn makes a put's file expire this many seconds after the item
	// runs (60 to 31536000); zero sets nothing.
	ExpiresIn int64 `json:"expires_in,omitempty"`
}

// MarshalJSON writes the operation with content for every put, an empty
// one included.
func (o BatchOp) MarshalJSON() ([]byte, error) {
	type plain BatchOp
	if o.Op != BatchOpPut {
		return json.Marshal(plain(o))
	}
	return json.Marshal(struct {
		plain
		Content string `json:"content"`
	}{plain(o), o.Content})
}

// Batch operations (BatchOp.Op).
const (
	BatchOpPut     = "put"
	BatchOpDelete  = "delete"
	BatchOpRestore = "restore"
	BatchOpCopy    = "copy"
)

// BatchPut stores content at path: as text when it is valid UTF-8, else
// base64-encoded.
func BatchPut(path string, content []byte) BatchOp {
	if utf8.Valid(content) {
		return BatchOp{Op: BatchOpPut, Path: path, Content: string(content)}
	}
	return BatchOp{Op: BatchOpPut, Path: path, Content: base64.StdEncoding.EncodeToString(content), Encoding: "base64"}
}

// BatchDelete soft-deletes the file id.
func BatchDelete(id string) BatchOp { return BatchOp{Op: BatchOpDelete, FileID: id} }

// BatchRestore restores the deleted file id.
func BatchRestore(id string) BatchOp { return BatchOp{Op: BatchOpRestore, FileID: id} }

// BatchCopy writes the content and content type of the live file id at
// path.
func BatchCopy(id, path string) BatchOp { return BatchOp{Op: BatchOpCopy, FileID: id, Path: path} }

// Batch is many operations run in order in the background (schema Batch).
type Batch = api.Batch

// BatchCounts are a batch's items by status; Total is the sum of the rest.
type BatchCounts = api.BatchCounts

// BatchItem is one operation of a batch and its outcome.
type BatchItem = api.BatchItem

// Batch and batch item states.
const (
	BatchQueued             = api.BatchQueued
	BatchRunning            = api.BatchRunning
	BatchSucceeded          = api.BatchSucceeded
	BatchPartiallySucceeded = api.BatchPartiallySucceeded
	BatchFailed             = api.BatchFailed
	BatchCanceled           = api.BatchCanceled
	BatchItemPending        = api.BatchItemPending
	BatchItemSucceeded      = api.BatchItemSucceeded
	BatchItemFailed         = api.BatchItemFailed
	BatchItemCanceled       = api.BatchItemCanceled
)

// MaxBatchWait is the longest BatchOptions.Wait the server accepts.
const MaxBatchWait = 30 * time.Second

// BatchOptions adjust CreateBatch.
type BatchOptions struct {
	// IdempotencyKey names the batch; generated when empty, also by a
	// client WithoutIdempotencyKeys, since the server requires one. The
	// same key and operations again return the same batch, admitted once.
	IdempotencyKey string
	// Wait asks the server to answer once the batch is terminal or Wait
	// has passed, whichever is first; whole seconds, at most MaxBatchWait.
	Wait time.Duration
}

// CreateBatch admits ops as one batch (POST /v1/batch) and returns it:
// queued, or as it stood after opts.Wait. The whole batch is validated
// first; one bad operation is a VALIDATION_FAILED naming it, and nothing
// runs. Items then run in order in the background; WaitBatch waits for
// them.
func (c *Client) CreateBatch(ctx context.Context, ops []BatchOp, opts BatchOptions) (*Batch, error) {
	if opts.Wait < 0 || opts.Wait > MaxBatchWait {
		return nil, fmt.Errorf("CreateBatch: Wait %v is outside 0 to %v", opts.Wait, MaxBatchWait)
	}
	r, err := newRequest(routeCreateBatch, "/v1/batch").withKey(requiredKey(opts.IdempotencyKey)).withJSON(map[string]any{"operations": ops})
	if err != nil {
		return nil, err
	}
	if secs := int64((opts.Wait + time.Second - 1) / time.Second); secs > 0 {
		r.query = url.Values{"wait": {strconv.FormatInt(secs, 10)}}
	}
	return callJSON[Batch](ctx, c, r)
}

// startBatch sends r (unless building it failed: err), a write that
// answers the batch it started, and with wait waits for the batch to end.
func (c *Client) startBatch(ctx context.Context, r *request, err error, wait bool) (*Batch, error) {
	if err != nil {
		return nil, err
	}
	b, err := callJSON[Batch](ctx, c, r)
	if err != nil || !wait || b.Terminal() {
		return b, err
	}
	return c.WaitBatch(ctx, b.ID)
}

// Batch returns a batch with every item's outcome so far (GET
// /v1/batch/{id}).
func (c *Client) Batch(ctx context.Context, id string) (*Batch, error) {
	return callJSON[Batch](ctx, c, newRequest(routeBatch, "/v1/batch/"+url.PathEscape(id)))
}

// WaitBatch polls a batch until it is terminal and returns it; ctx bounds
// the wait. Polls start 100 ms apart and slow to one every 2 s.
func (c *Client) WaitBatch(ctx context.Context, id string) (*Batch, error) {
	wait := newPollInterval()
	for {
		b, err := c.Batch(ctx, id)
		if err != nil || b.Terminal() {
			return b, err
		}
		if err := wait.sleep(ctx); err != nil {
			return nil, err
		}
	}
}

// BatchList is one page of batches, newest first, without their items
// (schema BatchList); its NextCursor is BatchListOptions.Cursor for the
// next page.
type BatchList = api.BatchList

// BatchListOptions filter and page ListBatches.
type BatchListOptions struct {
	// Status keeps the batches in this state (BatchRunning, ...).
	Status string
	// Limit is the page size, 1-1000; zero means the server's default (100).
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
}

// ListBatches returns one page of the subject's batches, newest first,
// with their counts but not their items (GET /v1/batch); Batch returns
// one with its items.
func (c *Client) ListBatches(ctx context.Context, opts BatchListOptions) (*BatchList, error) {
	r := newRequest(routeListBatches, "/v1/batch")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	setQuery(r.query, "status", opts.Status)
	return callJSON[BatchList](ctx, c, r)
}

// AllBatches iterates over every batch that matches opts, newest first,
// page after page. It stops at the first error, which it yields with a
// nil batch.
func (c *Client) AllBatches(ctx context.Context, opts BatchListOptions) iter.Seq2[*Batch, error] {
	return allPages(ctx, c.ListBatches, &opts, &opts.Cursor)
}

// CancelBatchOptions adjust CancelBatch.
type CancelBatchOptions struct {
	// IdempotencyKey names this cancel; generated when empty. Cancelling
	// is safe to repeat without one too.
	IdempotencyKey string
}

// CancelBatch cancels a batch (POST /v1/batch/{id}/cancel) and returns
// it: its pending items become canceled, an item already running
// finishes, and the batch ends BatchCanceled once nothing runs (WaitBatch
// waits for that). Cancelling a batch that has ended returns it
// unchanged.
func (c *Client) CancelBatch(ctx context.Context, id string, opts CancelBatchOptions) (*Batch, error) {
	r := newRequest(routeCancelBatch, "/v1/batch/"+url.PathEscape(id)+"/cancel").withKey(c.keyFor(opts.IdempotencyKey))
	return callJSON[Batch](ctx, c, r)
}
