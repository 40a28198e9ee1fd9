package admission

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
)

// onTarget names a request without a body on one target (a cancel, an
// abort, a revocation, a restore, a part) for its idempotency key.
func onTarget(method, route, op, target string, who agentfs.Caller) named {
	return named{admission{method: method, route: route,
		request: idempotency.Request{Operation: op, Target: target, By: who.By}}}
}

// onID is what an effect on one resource, named by its id, holds: the
// request (its method, route and the id) and who sends it.
type onID struct {
	named
	fixed
	c   *Core
	who agentfs.Caller
	id  string
}

// onRequest is what an effect of one request body R holds: the request
// (its method, route and content), the body, and where the write comes
// from.
type onRequest[R any] struct {
	named
	fixed
	c      *Core
	req    R
	origin agentfs.Origin
}

// withRequest is the effect of who's request req, named and fixed by the
// caller.
func withRequest[R any](c *Core, req R, who agentfs.Caller) onRequest[R] {
	return onRequest[R]{c: c, req: req, origin: agentfs.OriginOf(who)}
}

// byID names who's request to route for the resource id.
func (c *Core) byID(method, route, op, id string, who agentfs.Caller) onID {
	return onID{named: onTarget(method, route, op, id, who), c: c, who: who, id: id}
}

// withJSON names a request on one target ("" for none) whose JSON body is
// its content, and puts the body in canonical form for its key.
func withJSON(method, route, op, target string, who agentfs.Caller, body map[string]any) (named, fixed) {
	return named{admission{method: method, route: route, request: idempotency.Request{Operation: op, Target: target,
		MediaType: "application/json", By: who.By}}}, jsonContent(body)
}

// fileChange names a change to one file by id whose JSON body is its
// content.
func fileChange(method, route, op, target, ifMatch string, who agentfs.Caller, body map[string]any) (named, fixed) {
	n, f := withJSON(method, route, op, target, who, body)
	n.adm.request.Params = map[string]string{"if_match": ifMatch}
	return n, f
}

// Revert makes version r.Version's content the file's current one
// (POST /v1/files/{id}/revert), as a new version sharing its blob; content
// identical to the current one changes nothing (200, same version).
func (c *Core) Revert(ctx context.Context, who agentfs.Caller, r agentfs.Revert) (idempotency.Result, error) {
	r.Subject, r.By = who.Subject, who.By
	e := &revertFile{withRequest(c, r, who)}
	e.named, e.fixed = fileChange(http.MethodPost, "/v1/files/:id/revert", agentfs.OpRevert, r.FileID, r.IfMatch, who,
		map[string]any{"version": r.Version})
	return c.run(ctx, who, e)
}

// revertFile makes an earlier version current.
type revertFile struct{ onRequest[agentfs.Revert] }

func (e *revertFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	return e.c.changedFile(e.c.store.RevertFileTx(ctx, tx, e.req, e.origin))
}

// Move gives a file another path (POST /v1/files/{id}/move), keeping its
// id, url, version and history; with Overwrite its bytes become the next
// version of the file at the destination.
func (c *Core) Move(ctx context.Context, who agentfs.Caller, m agentfs.Move) (idempotency.Result, error) {
	m.Subject = who.Subject
	e := &moveFile{withRequest(c, m, who)}
	body := map[string]any{"path": m.Path, "replace": m.Replace}
	if m.Overwrite { // absent before overwrite existed: keys recorded then still replay
		body["overwrite"] = true
	}
	e.named, e.fixed = fileChange(http.MethodPost, "/v1/files/:id/move", agentfs.OpMove, m.FileID, m.IfMatch, who, body)
	e.adm.paths = []string{m.Path} // the other end is found by id, in the caller's reach
	return c.run(ctx, who, e)
}

// moveFile gives a file another path.
type moveFile struct{ onRequest[agentfs.Move] }

func (e *moveFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	return e.c.changedFile(e.c.store.MoveFileTx(ctx, tx, e.req, e.origin))
}

// SetExpiry sets or clears when a file expires, and sets its mode and mtime
// (PATCH /v1/files/{id}), without a new version.
func (c *Core) SetExpiry(ctx context.Context, who agentfs.Caller, x agentfs.Expiry) (idempotency.Result, error) {
	x.Subject = who.Subject
	body := map[string]any{}
	if !x.KeepExpiry { // the only member before mode and mtime existed: keys recorded then still replay
		var at any
		if x.At != nil {
			at = x.At.UTC().Format(time.RFC3339Nano)
		}
		body["expires_at"] = at
	}
	if x.Mode != nil {
		body["mode"] = *x.Mode
	}
	if x.MTime != nil {
		body["mtime"] = x.MTime.UTC().Format(time.RFC3339Nano)
	}
	e := &setExpiry{c: c, x: x}
	e.named, e.fixed = fileChange(http.MethodPatch, "/v1/files/:id", agentfs.OpSetExpiry, x.FileID, x.IfMatch, who, body)
	return c.run(ctx, who, e)
}

// setExpiry sets or clears a file's expiry.
type setExpiry struct {
	named
	fixed
	c *Core
	x agentfs.Expiry
}

func (e *setExpiry) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	return e.c.changedFile(e.c.store.SetExpiryTx(ctx, tx, e.x))
}

// CreateLink makes a share link to a file (POST /v1/files/{id}/links): 201
// with the link, whose url carries its secret. The links table keeps only
// the secret's SHA-256; a keyed request's record keeps the url sealed, so
// a retry with the key by the same token gets the same link, url and all,
// and anyone else sees it null.
func (c *Core) CreateLink(ctx context.Context, who agentfs.Caller, req agentfs.NewLink) (idempotency.Result, error) {
	req.Subject, req.By = who.Subject, who.By
	e := &createLink{c: c, req: req}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/files/:id/links", agentfs.OpCreateLink, req.FileID, who,
		map[string]any{"version": req.Version, "expires_in": int64(req.ExpiresIn.Seconds())})
	return c.run(ctx, who, e)
}

// createLink makes a share link.
type createLink struct {
	named
	fixed
	c   *Core
	req agentfs.NewLink
}

func (e *createLink) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	l, err := e.c.store.CreateLinkTx(ctx, tx, e.req)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	out := outcome(http.StatusCreated, render.Link(e.c.cfg.PublicURL, l), "link", l.ID)
	out.Header["Location"] = "/v1/files/" + l.FileID + "/links"
	out.Secrets = []string{"url"}
	return out, nil
}

// RevokeLink revokes a share link (DELETE /v1/links/{id}); repeating it is
// safe.
func (c *Core) RevokeLink(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, &revokeLink{c.byID(http.MethodDelete, "/v1/links/:id", agentfs.OpRevokeLink, id, who)})
}

// revokeLink revokes a share link.
type revokeLink struct{ onID }

func (e *revokeLink) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	l, _, err := e.c.store.RevokeLinkTx(ctx, tx, e.who.Subject, e.id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return outcome(http.StatusOK, render.Link(e.c.cfg.PublicURL, l), "link", l.ID), nil
}
