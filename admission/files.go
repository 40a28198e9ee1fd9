package admission

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
)

// Put stores content at a path (POST /v1/files, a batch put item, an MCP
// write): a new file (201), a replace (200), or nothing when the live file
// already holds these bytes. A put is one operation whichever door carries
// it, so a key used by one door replays for the others.
func (c *Core) Put(ctx context.Context, who agentfs.Caller, put agentfs.Put, body io.Reader) (idempotency.Result, error) {
	return c.run(ctx, who, &putFile{c: c, put: put, body: body, origin: agentfs.OriginOf(who)})
}

// PutAgainst is Put decided, before its bytes go to S3, against live: the
// live file at put.Path as the caller already knows it (nil: none), so
// that the put does not look the path up again. Its commit decides again
// as every put's does (the file's version under a lock, or the path's
// uniqueness), so a live that is out of date costs a retry of the commit
// in a transaction, never a wrong effect: a put that takes live to be nil
// and meets a file at the path commits as Put would have (PATH_EXISTS
// unless put.Replace), after its blob was written and is then removed.
func (c *Core) PutAgainst(ctx context.Context, who agentfs.Caller, put agentfs.Put, body io.Reader, live *agentfs.File) (idempotency.Result, error) {
	return c.run(ctx, who, &putFile{c: c, put: put, body: body, origin: agentfs.OriginOf(who), known: true, live: live})
}

// putFile is a put. Its bytes go into a new blob before the transaction,
// decided against the live file at its path (looked up, or known to a
// batch runner that found many at once), and decided again under a lock
// when it applies.
type putFile struct {
	c      *Core
	put    agentfs.Put
	body   io.Reader
	origin agentfs.Origin
	// known says live is the live file at the path (nil: none).
	known bool
	live  *agentfs.File
	// held is a batch item's content, read through body: once it is in the
	// blob, a prepared item waiting to commit holds none of it.
	held    []byte
	pending *storage.PendingPut
	// through, when set, is body read through the token's byte budget.
	through io.Reader
}

func (p *putFile) meteredBody() (io.Reader, int64) { return p.body, p.put.Size }
func (p *putFile) readThrough(r io.Reader)         { p.through = r }

func (p *putFile) admission() admission {
	return admission{method: http.MethodPost, route: "/v1/files", request: idempotency.PutRequest(p.put), paths: []string{p.put.Path}}
}

func (p *putFile) content() ([]byte, error) {
	switch {
	case p.put.Digest != nil: // stands for the content: a repeat is answered before the body is read
		return p.put.Digest, nil
	case p.pending != nil:
		return p.pending.Sum(), nil
	}
	return hashBody(p.body, p.put.MaxBytes)
}

func (p *putFile) prepare(ctx context.Context) (err error) {
	body := p.body
	if p.through != nil {
		body = p.through
	}
	if p.known {
		p.pending, err = p.c.store.PreparePutAgainst(ctx, p.put, body, p.live)
	} else {
		p.pending, err = p.c.store.PreparePut(ctx, p.put, body)
	}
	if r, ok := p.body.(*bytes.Reader); ok && p.held != nil {
		if err == nil {
			r.Reset(nil)
		} else {
			// A failure recorded under the item's key records the hash of
			// the whole content, however much of it was read.
			r.Reset(p.held)
		}
		p.held = nil
	}
	return err
}

func (p *putFile) finish(ctx context.Context, err error) { p.pending.Finish(ctx, err) }

func (p *putFile) commitAlone(ctx context.Context) (idempotency.Outcome, bool, error) {
	f, created, err := p.pending.CommitAlone(ctx, p.origin)
	if f == nil {
		return idempotency.Outcome{}, false, err
	}
	return p.c.fileOutcome(f, created), true, nil
}

func (p *putFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	f, created, err := p.pending.Apply(ctx, tx, p.origin)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return p.c.fileOutcome(f, created), nil
}

func (p *putFile) pendingPut() (*storage.PendingPut, agentfs.Origin) { return p.pending, p.origin }

func (p *putFile) outcomeOf(f *agentfs.File, created bool) idempotency.Outcome {
	return p.c.fileOutcome(f, created)
}

// copyFile puts the content of the live file src at put.Path (a batch copy
// item): a put whose blob comes from the source, not from a body.
type copyFile struct {
	putFile
	src string
}

func (p *copyFile) admission() admission {
	a := p.putFile.admission()
	a.request = idempotency.Request{Operation: agentfs.OpCopy, Target: p.put.Path, Params: map[string]string{"source": p.src}, By: p.put.By}
	return a // paths: the copy's; its source is found by id, in the caller's reach
}

func (p *copyFile) content() ([]byte, error) { return nil, nil }

func (p *copyFile) prepare(ctx context.Context) (err error) {
	p.pending, err = p.c.store.PrepareCopy(ctx, p.src, p.put)
	return err
}

// Delete soft-deletes a file (DELETE /v1/files/{id}); repeating it is safe.
// ifMatch, when set, must name the file's etag.
func (c *Core) Delete(ctx context.Context, who agentfs.Caller, id, ifMatch string) (idempotency.Result, error) {
	return c.run(ctx, who, c.deleteFile(who, id, ifMatch, agentfs.OriginOf(who)))
}

// deleteFile soft-deletes one file.
type deleteFile struct {
	named
	fixed
	c           *Core
	subject     string
	id, ifMatch string
	origin      agentfs.Origin
}

func (c *Core) deleteFile(who agentfs.Caller, id, ifMatch string, o agentfs.Origin) *deleteFile {
	return &deleteFile{c: c, subject: who.Subject, id: id, ifMatch: ifMatch, origin: o,
		named: named{admission{method: http.MethodDelete, route: "/v1/files/:id",
			request: idempotency.Request{Operation: agentfs.OpDelete, Target: id, Params: map[string]string{"if_match": ifMatch}, By: who.By}}}}
}

func (d *deleteFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	return d.c.changedFile(d.c.store.DeleteFileTx(ctx, tx, d.subject, d.id, d.ifMatch, d.origin))
}

// Restore undoes a delete (POST /v1/files/{id}/restore); repeating it is
// safe.
func (c *Core) Restore(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, c.restoreFile(who, id, agentfs.OriginOf(who)))
}

// restoreFile undoes the delete of one file.
type restoreFile struct {
	named
	fixed
	c           *Core
	subject, id string
	origin      agentfs.Origin
}

func (c *Core) restoreFile(who agentfs.Caller, id string, o agentfs.Origin) *restoreFile {
	return &restoreFile{c: c, subject: who.Subject, id: id, origin: o,
		named: onTarget(http.MethodPost, "/v1/files/:id/restore", agentfs.OpRestore, id, who)}
}

func (r *restoreFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	return r.c.changedFile(r.c.store.RestoreFileTx(ctx, tx, r.subject, r.id, r.origin))
}
