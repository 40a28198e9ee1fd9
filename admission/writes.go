package admission

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// Put stores content at a path (POST /v1/files, a batch put item, an MCP
// write): a new file (201), a replace (200), or nothing when the live file
// already holds these bytes. A put is one operation whichever door carries
// it, so a key used by one door replays for the others.
func (c *Core) Put(ctx context.Context, who agentfs.Caller, put agentfs.Put, body io.Reader) (idempotency.Result, error) {
	return c.run(ctx, who, nil, c.putWrite(put, body, agentfs.OriginOf(who)))
}

func (c *Core) putWrite(put agentfs.Put, body io.Reader, o agentfs.Origin) *write {
	return c.putWriteWith(put, body, o, func(ctx context.Context) (*storage.PendingPut, error) {
		return c.store.PreparePut(ctx, put, body)
	})
}

// putWriteWith is putWrite whose bytes go into a new blob by prepare.
func (c *Core) putWriteWith(put agentfs.Put, body io.Reader, o agentfs.Origin, prepare func(context.Context) (*storage.PendingPut, error)) *write {
	var pending *storage.PendingPut
	return c.pendingPutWrite(&pending, put, o, func(ctx context.Context) (err error) {
		pending, err = prepare(ctx)
		return err
	}, func() ([]byte, error) {
		switch {
		case put.Digest != nil: // stands for the content: a repeat is answered before the body is read
			return put.Digest, nil
		case pending != nil:
			return pending.Sum(), nil
		}
		return hashBody(body, put.MaxBytes)
	})
}

// copyWrite puts the content of the live file srcID at put.Path (a batch
// copy item).
func (c *Core) copyWrite(srcID string, put agentfs.Put, o agentfs.Origin) *write {
	var pending *storage.PendingPut
	w := c.pendingPutWrite(&pending, put, o, func(ctx context.Context) (err error) {
		pending, err = c.store.PrepareCopy(ctx, srcID, put)
		return err
	}, noContent)
	w.request = idempotency.Request{Operation: agentfs.OpCopy, Target: put.Path, Params: map[string]string{"source": srcID}, By: put.By}
	return w
}

// pendingPutWrite is the write of a put whose bytes prepare puts in a new
// blob (*pending once prepared).
func (c *Core) pendingPutWrite(pending **storage.PendingPut, put agentfs.Put, o agentfs.Origin, prepare func(context.Context) error, content func() ([]byte, error)) *write {
	return &write{
		method: http.MethodPost, route: "/v1/files",
		request: idempotency.PutRequest(put),
		content: content,
		prepare: prepare,
		alone: func(ctx context.Context) (idempotency.Outcome, bool, error) {
			f, created, err := (*pending).CommitAlone(ctx, o)
			if f == nil {
				return idempotency.Outcome{}, false, err
			}
			return c.fileOutcome(f, created), true, nil
		},
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, created, err := (*pending).Apply(ctx, tx, o)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, created), nil
		},
		finish:  func(ctx context.Context, err error) { (*pending).Finish(ctx, err) },
		pending: pending, origin: o,
	}
}

// Delete soft-deletes a file (DELETE /v1/files/{id}); repeating it is safe.
// ifMatch, when set, must name the file's etag.
func (c *Core) Delete(ctx context.Context, who agentfs.Caller, id, ifMatch string) (idempotency.Result, error) {
	return c.run(ctx, who, nil, c.deleteWrite(who, id, ifMatch, agentfs.OriginOf(who)))
}

func (c *Core) deleteWrite(who agentfs.Caller, id, ifMatch string, o agentfs.Origin) *write {
	return &write{
		method: http.MethodDelete, route: "/v1/files/:id",
		request: idempotency.Request{Operation: agentfs.OpDelete, Target: id,
			Params: map[string]string{"if_match": ifMatch}, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, _, err := c.store.DeleteFileTx(ctx, tx, who.Subject, id, ifMatch, o)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, false), nil
		},
	}
}

// Restore undoes a delete (POST /v1/files/{id}/restore); repeating it is
// safe.
func (c *Core) Restore(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, nil, c.restoreWrite(who, id, agentfs.OriginOf(who)))
}

func (c *Core) restoreWrite(who agentfs.Caller, id string, o agentfs.Origin) *write {
	return &write{
		method: http.MethodPost, route: "/v1/files/:id/restore",
		request: idempotency.Request{Operation: agentfs.OpRestore, Target: id, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, _, err := c.store.RestoreFileTx(ctx, tx, who.Subject, id, o)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, false), nil
		},
	}
}

// CreateUpload opens an upload session (POST /v1/uploads): 201 with a new
// session, or 200 with the live session that matches, so a caller that
// lost the answer resumes. A replay answers the session's current state.
func (c *Core) CreateUpload(ctx context.Context, who agentfs.Caller, req agentfs.NewUpload) (idempotency.Result, error) {
	// The request, defaults filled in, canonicalised: key order, whitespace
	// and omitted defaults do not make another request.
	content := jsonContent(map[string]any{"path": req.Path, "size_bytes": req.SizeBytes,
		"content_type": req.ContentType, "replace": req.Replace, "sha256": req.SHA256,
		"expires_in": int64(req.ExpiresIn.Seconds())})
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/uploads",
		request: idempotency.Request{Operation: agentfs.OpCreateUpload, Target: req.Path, MediaType: "application/json", By: req.By},
		content: content,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			u, created, err := c.store.CreateUploadTx(ctx, tx, req)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.uploadOutcome(u, nil, created, who.RequestID), nil
		},
		current: func(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error) {
			return c.currentUpload(ctx, who, rec.Outcome.Resource.ID)
		},
	})
}

// currentUpload shows the subject's session as it is now (200), with its
// file once completed.
func (c *Core) currentUpload(ctx context.Context, who agentfs.Caller, id string) (idempotency.Outcome, error) {
	u, err := c.store.Upload(ctx, who.Subject, id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	var f *agentfs.File
	if u.FileID != "" {
		if f, err = c.store.File(ctx, u.Subject, u.FileID); err != nil {
			return idempotency.Outcome{}, err
		}
	}
	return c.uploadOutcome(u, f, false, who.RequestID), nil
}

// PutPart stores part n of a session (PUT /v1/uploads/{id}/parts/{n});
// repeating it overwrites the part with the same result. While the part
// streams it holds the session, so a complete waits for it; a part that
// comes while a complete runs is told to retry.
func (c *Core) PutPart(ctx context.Context, who agentfs.Caller, id string, n int, body io.Reader, size int64, digest []byte) (idempotency.Result, error) {
	var pending *storage.PendingPart
	return c.run(ctx, who, nil, &write{
		method: http.MethodPut, route: "/v1/uploads/:id/parts/:n",
		request: idempotency.Request{Operation: agentfs.OpPutPart, Target: id + "/" + strconv.Itoa(n), By: who.By},
		content: func() ([]byte, error) {
			switch {
			case digest != nil:
				return digest, nil
			case pending != nil:
				return hex.DecodeString(pending.Part.SHA256)
			}
			return hashBody(body, size)
		},
		prepare: func(ctx context.Context) (err error) {
			pending, err = c.store.SendPart(ctx, who.Subject, id, n, body, size, digest)
			return err
		},
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			if err := pending.Apply(ctx, tx); err != nil {
				return idempotency.Outcome{}, err
			}
			return outcome(http.StatusOK, api.NewPart(id, pending.Part), "upload", id), nil
		},
		finish: func(ctx context.Context, err error) { pending.Finish(ctx, err) },
	})
}

// CompleteUpload assembles a session into its file (POST
// /v1/uploads/{id}/complete): 201 created, 200 replaced, and 200 with the
// same file when repeated.
func (c *Core) CompleteUpload(ctx context.Context, who agentfs.Caller, id string, req agentfs.CompleteRequest) (idempotency.Result, error) {
	content := jsonContent(map[string]any{"replace": req.Replace, "sha256": req.SHA256})
	var pending *storage.PendingComplete
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/uploads/:id/complete",
		request: idempotency.Request{Operation: agentfs.OpCompleteUpload, Target: id,
			Params: map[string]string{"if_match": req.IfMatch}, MediaType: "application/json", By: who.By},
		content: content,
		prepare: func(ctx context.Context) (err error) {
			pending, err = c.store.PrepareComplete(ctx, who.Subject, id, req)
			if err == nil && c.cfg.MidComplete != nil {
				c.cfg.MidComplete()
			}
			return err
		},
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, created, err := pending.Apply(ctx, tx, agentfs.OriginOf(who))
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, created), nil
		},
		finish: func(ctx context.Context, err error) { pending.Finish(ctx, err) },
	})
}

// AbortUpload ends a session and drops its parts (DELETE /v1/uploads/{id});
// repeating it is safe.
func (c *Core) AbortUpload(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	var aborted *agentfs.Upload
	return c.run(ctx, who, nil, &write{
		method: http.MethodDelete, route: "/v1/uploads/:id",
		request: idempotency.Request{Operation: agentfs.OpAbortUpload, Target: id, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			u, changed, err := c.store.AbortUploadTx(ctx, tx, who.Subject, id)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			if changed {
				aborted = u
			}
			return c.uploadOutcome(u, nil, false, who.RequestID), nil
		},
		after: func(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
			if aborted != nil {
				c.store.DropMultipart(ctx, aborted)
			}
			return out, nil
		},
	})
}

// CreateBatch stores and queues a batch (POST /v1/batch; the key is
// required): 202 with the batch. raw is the request body, whose canonical
// form is the batch's content (hashed as it is walked, with no copy of the
// body). With wait, it answers once the batch ended
// or wait passed. A replay answers the batch's current state (200).
func (c *Core) CreateBatch(ctx context.Context, who agentfs.Caller, b *agentfs.Batch, raw []byte, wait time.Duration) (idempotency.Result, error) {
	content, err := idempotency.JSONContentHash(raw)
	if err != nil {
		return idempotency.Result{}, problem.Invalid("body", "malformed JSON")
	}
	b.Subject, b.By, b.RequestID = who.Subject, who.By, who.RequestID
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/batch",
		request: idempotency.Request{Operation: agentfs.OpBatch, MediaType: "application/json", By: who.By},
		content: func() ([]byte, error) { return content, nil },
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			created, err := c.store.CreateBatchTx(ctx, tx, b)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			if err := c.queue.Enqueue(ctx, tx, created.ID); err != nil {
				return idempotency.Outcome{}, err
			}
			return c.batchOutcome(created, nil, http.StatusAccepted), nil
		},
		after: func(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
			for i := range b.Items {
				// Stored: the request's body they are slices of can go
				// while the answer waits.
				b.Items[i].Text, b.Items[i].Content = nil, nil
			}
			if wait <= 0 {
				return out, nil
			}
			return c.awaitBatch(ctx, who.Subject, out.Resource.ID, wait, http.StatusAccepted)
		},
		current: func(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error) {
			return c.awaitBatch(ctx, who.Subject, rec.Outcome.Resource.ID, wait, http.StatusOK)
		},
	})
}

// currentBatch shows the subject's batch as it is now (200), with every
// item's outcome.
func (c *Core) currentBatch(ctx context.Context, who agentfs.Caller, id string) (idempotency.Outcome, error) {
	return c.awaitBatch(ctx, who.Subject, id, 0, http.StatusOK)
}

// awaitBatch waits up to wait for the batch to end, then shows it.
func (c *Core) awaitBatch(ctx context.Context, subject, id string, wait time.Duration, status int) (idempotency.Outcome, error) {
	b, err := c.store.AwaitBatch(ctx, subject, id, wait)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	files, err := c.store.BatchFiles(ctx, b)
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "load batch result files", "batch_id", b.ID, "err", err)
	}
	return c.batchOutcome(b, files, status), nil
}

// fileOutcome is the response to a write that left f: 201 with Location for
// a new file, else 200. A put recorded by any door replays as this.
func (c *Core) fileOutcome(f *agentfs.File, created bool) idempotency.Outcome {
	out := outcome(http.StatusOK, api.NewFile(c.cfg.PublicURL, f), "file", f.ID)
	out.Header["ETag"] = f.ETag()
	if created {
		out.Status = http.StatusCreated
		out.Header["Location"] = "/v1/files/" + f.ID
	}
	return out
}

// uploadOutcome shows a session: 201 with Location when it was just
// created, else 200.
func (c *Core) uploadOutcome(u *agentfs.Upload, f *agentfs.File, created bool, requestID string) idempotency.Outcome {
	out := outcome(http.StatusOK, api.NewUpload(c.cfg.PublicURL, u, f, requestID, c.cfg.Now()), "upload", u.ID)
	if created {
		out.Status = http.StatusCreated
		out.Header["Location"] = "/v1/uploads/" + u.ID
	}
	return out
}

// batchOutcome shows a batch: 202 with Location when just admitted.
func (c *Core) batchOutcome(b *agentfs.Batch, files map[string]*agentfs.File, status int) idempotency.Outcome {
	out := outcome(status, api.NewBatch(c.cfg.PublicURL, b, files), "batch", b.ID)
	if status == http.StatusAccepted {
		out.Header["Location"] = "/v1/batch/" + b.ID
	}
	return out
}

// outcome is a JSON response naming the resource it shows.
func outcome(status int, body any, object, id string) idempotency.Outcome {
	b, _ := json.Marshal(body)
	return idempotency.Outcome{Status: status, Header: map[string]string{}, Body: append(b, '\n'),
		Resource: idempotency.Resource{Object: object, ID: id}}
}

// FileJSON shows f as the API does (its url under the public URL).
func (c *Core) FileJSON(f *agentfs.File) api.File { return api.NewFile(c.cfg.PublicURL, f) }

// PublicURL is the base of the URLs the core's answers carry.
func (c *Core) PublicURL() string { return c.cfg.PublicURL }
