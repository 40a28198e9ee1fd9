package admission

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
	"github.com/agentfs/agentfs/storage"
)

// CreateUpload opens an upload session (POST /v1/uploads): 201 with a new
// session, or 200 with the live session that matches, so a caller that
// lost the answer resumes. A replay answers the session's current state.
func (c *Core) CreateUpload(ctx context.Context, who agentfs.Caller, req agentfs.NewUpload) (idempotency.Result, error) {
	// The request, defaults filled in, canonicalised: key order, whitespace
	// and omitted defaults do not make another request.
	return c.run(ctx, who, &createUpload{c: c, who: who, req: req,
		named: named{admission{method: http.MethodPost, route: "/v1/uploads",
			request: idempotency.Request{Operation: agentfs.OpCreateUpload, Target: req.Path, MediaType: "application/json", By: req.By},
			paths:   []string{req.Path}}},
		fixed: jsonContent(map[string]any{"path": req.Path, "size_bytes": req.SizeBytes,
			"content_type": req.ContentType, "replace": req.Replace, "sha256": req.SHA256,
			"expires_in": int64(req.ExpiresIn.Seconds())})})
}

// createUpload opens an upload session.
type createUpload struct {
	named
	fixed
	c   *Core
	who agentfs.Caller
	req agentfs.NewUpload
}

func (e *createUpload) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	u, created, err := e.c.store.CreateUploadTx(ctx, tx, e.req)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return e.c.uploadOutcome(u, nil, created, e.who.RequestID), nil
}

func (e *createUpload) current(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error) {
	return e.c.currentUpload(ctx, e.who, rec.Outcome.Resource.ID)
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
	return c.run(ctx, who, &putPart{c: c, subject: who.Subject, id: id, n: n, body: body, size: size, digest: digest,
		named: onTarget(http.MethodPut, "/v1/uploads/:id/parts/:n", agentfs.OpPutPart, id+"/"+strconv.Itoa(n), who)})
}

// putPart streams one part of a session to S3 before its transaction
// records it.
type putPart struct {
	named
	c           *Core
	subject, id string
	n           int
	body        io.Reader
	size        int64
	digest      []byte
	pending     *storage.PendingPart
	through     io.Reader // body read through the token's byte budget
}

func (e *putPart) meteredBody() (io.Reader, int64) { return e.body, e.size }
func (e *putPart) readThrough(r io.Reader)         { e.through = r }

func (e *putPart) content() ([]byte, error) {
	switch {
	case e.digest != nil:
		return e.digest, nil
	case e.pending != nil:
		return hex.DecodeString(e.pending.Part.SHA256)
	}
	return hashBody(e.body, e.size)
}

func (e *putPart) prepare(ctx context.Context) (err error) {
	body := e.body
	if e.through != nil {
		body = e.through
	}
	e.pending, err = e.c.store.SendPart(ctx, e.subject, e.id, e.n, body, e.size, e.digest)
	return err
}

func (e *putPart) finish(ctx context.Context, err error) { e.pending.Finish(ctx, err) }

func (e *putPart) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	if err := e.pending.Apply(ctx, tx); err != nil {
		return idempotency.Outcome{}, err
	}
	return outcome(http.StatusOK, render.Part(e.id, e.pending.Part), "upload", e.id), nil
}

// CompleteUpload assembles a session into its file (POST
// /v1/uploads/{id}/complete): 201 created, 200 replaced, and 200 with the
// same file when repeated.
func (c *Core) CompleteUpload(ctx context.Context, who agentfs.Caller, id string, req agentfs.CompleteRequest) (idempotency.Result, error) {
	return c.run(ctx, who, &completeUpload{c: c, who: who, id: id, req: req,
		named: named{admission{method: http.MethodPost, route: "/v1/uploads/:id/complete",
			request: idempotency.Request{Operation: agentfs.OpCompleteUpload, Target: id,
				Params: map[string]string{"if_match": req.IfMatch}, MediaType: "application/json", By: who.By}}},
		fixed: jsonContent(map[string]any{"replace": req.Replace, "sha256": req.SHA256})})
}

// completeUpload assembles a session's parts into a new blob before its
// transaction commits the file.
type completeUpload struct {
	named
	fixed
	c       *Core
	who     agentfs.Caller
	id      string
	req     agentfs.CompleteRequest
	pending *storage.PendingComplete
}

func (e *completeUpload) prepare(ctx context.Context) (err error) {
	e.pending, err = e.c.store.PrepareComplete(ctx, e.who.Subject, e.id, e.req)
	if err == nil && e.c.cfg.MidComplete != nil {
		e.c.cfg.MidComplete()
	}
	return err
}

func (e *completeUpload) finish(ctx context.Context, err error) { e.pending.Finish(ctx, err) }

func (e *completeUpload) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	f, created, err := e.pending.Apply(ctx, tx, agentfs.OriginOf(e.who))
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return e.c.fileOutcome(f, created), nil
}

// AbortUpload ends a session and drops its parts (DELETE /v1/uploads/{id});
// repeating it is safe.
func (c *Core) AbortUpload(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, &abortUpload{onID: c.byID(http.MethodDelete, "/v1/uploads/:id", agentfs.OpAbortUpload, id, who)})
}

// abortUpload ends a session; its S3 parts are dropped once that commits.
type abortUpload struct {
	onID
	aborted *agentfs.Upload // the session this abort ended, if it was live
}

func (e *abortUpload) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	u, changed, err := e.c.store.AbortUploadTx(ctx, tx, e.who.Subject, e.id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	e.aborted = nil
	if changed {
		e.aborted = u
	}
	return e.c.uploadOutcome(u, nil, false, e.who.RequestID), nil
}

func (e *abortUpload) follow(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
	if e.aborted != nil {
		e.c.store.DropMultipart(ctx, e.aborted)
	}
	return out, nil
}
