package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
)

// jsonContent is the content fingerprint of a JSON request, from its
// values with defaults filled in (canonical: key order does not matter).
func jsonContent(v map[string]any) func() ([]byte, error) {
	normal, _ := json.Marshal(v)
	sum, err := idempotency.JSONContentHash(normal)
	return func() ([]byte, error) { return sum, err }
}

// fileWrite is a write whose effect is a change to one file, rendered as
// the file (200).
func (c *Core) fileWrite(method, route, op, target string, params map[string]string, who agentfs.Caller,
	content func() ([]byte, error), apply func(ctx context.Context, tx pgx.Tx) (*agentfs.File, error)) *write {
	return &write{
		method: method, route: route,
		request: idempotency.Request{Operation: op, Target: target, Params: params, MediaType: "application/json", By: who.By},
		content: content,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, err := apply(ctx, tx)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, false), nil
		},
	}
}

// Revert makes version r.Version's content the file's current one
// (POST /v1/files/{id}/revert), as a new version sharing its blob; content
// identical to the current one changes nothing (200, same version).
func (c *Core) Revert(ctx context.Context, who agentfs.Caller, r agentfs.Revert) (idempotency.Result, error) {
	r.Subject, r.By = who.Subject, who.By
	return c.run(ctx, who, nil, c.fileWrite(http.MethodPost, "/v1/files/:id/revert", agentfs.OpRevert, r.FileID,
		map[string]string{"if_match": r.IfMatch}, who, jsonContent(map[string]any{"version": r.Version}),
		func(ctx context.Context, tx pgx.Tx) (*agentfs.File, error) {
			f, _, err := c.store.RevertFileTx(ctx, tx, r, agentfs.OriginOf(who))
			return f, err
		}))
}

// Move gives a file another path (POST /v1/files/{id}/move), keeping its
// id, url, version and history.
func (c *Core) Move(ctx context.Context, who agentfs.Caller, m agentfs.Move) (idempotency.Result, error) {
	m.Subject = who.Subject
	return c.run(ctx, who, nil, c.fileWrite(http.MethodPost, "/v1/files/:id/move", agentfs.OpMove, m.FileID,
		map[string]string{"if_match": m.IfMatch}, who, jsonContent(map[string]any{"path": m.Path, "replace": m.Replace}),
		func(ctx context.Context, tx pgx.Tx) (*agentfs.File, error) {
			f, _, err := c.store.MoveFileTx(ctx, tx, m, agentfs.OriginOf(who))
			return f, err
		}))
}

// SetExpiry sets or clears when a file expires (PATCH /v1/files/{id}).
func (c *Core) SetExpiry(ctx context.Context, who agentfs.Caller, e agentfs.Expiry) (idempotency.Result, error) {
	e.Subject = who.Subject
	var at any
	if e.At != nil {
		at = e.At.UTC().Format(time.RFC3339Nano)
	}
	return c.run(ctx, who, nil, c.fileWrite(http.MethodPatch, "/v1/files/:id", agentfs.OpSetExpiry, e.FileID,
		map[string]string{"if_match": e.IfMatch}, who, jsonContent(map[string]any{"expires_at": at}),
		func(ctx context.Context, tx pgx.Tx) (*agentfs.File, error) {
			f, _, err := c.store.SetExpiryTx(ctx, tx, e)
			return f, err
		}))
}

// CreateLink makes a share link to a file (POST /v1/files/{id}/links): 201
// with the link, whose url carries its secret. The links table keeps only
// the secret's SHA-256; a keyed request's record keeps the url sealed, so
// a retry with the key by the same token gets the same link, url and all,
// and anyone else sees it null.
func (c *Core) CreateLink(ctx context.Context, who agentfs.Caller, req agentfs.NewLink) (idempotency.Result, error) {
	req.Subject, req.By = who.Subject, who.By
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/files/:id/links",
		request: idempotency.Request{Operation: agentfs.OpCreateLink, Target: req.FileID, MediaType: "application/json", By: who.By},
		content: jsonContent(map[string]any{"version": req.Version, "expires_in": int64(req.ExpiresIn.Seconds())}),
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			l, err := c.store.CreateLinkTx(ctx, tx, req)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			out := outcome(http.StatusCreated, api.NewLink(c.cfg.PublicURL, l), "link", l.ID)
			out.Header["Location"] = "/v1/files/" + l.FileID + "/links"
			out.Secrets = []string{"url"}
			return out, nil
		},
	})
}

// RevokeLink revokes a share link (DELETE /v1/links/{id}); repeating it is
// safe.
func (c *Core) RevokeLink(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, nil, &write{
		method: http.MethodDelete, route: "/v1/links/:id",
		request: idempotency.Request{Operation: agentfs.OpRevokeLink, Target: id, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			l, _, err := c.store.RevokeLinkTx(ctx, tx, who.Subject, id)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return outcome(http.StatusOK, api.NewLink(c.cfg.PublicURL, l), "link", l.ID), nil
		},
	})
}

// CancelBatch cancels a batch's pending items (POST /v1/batch/{id}/cancel):
// 200 with the batch, canceled; an item already committing finishes first.
// Cancelling a batch that ended answers it unchanged.
func (c *Core) CancelBatch(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/batch/:id/cancel",
		request: idempotency.Request{Operation: agentfs.OpCancelBatch, Target: id, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			b, err := c.store.CancelBatchTx(ctx, tx, who.Subject, id)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.batchOutcome(b, nil, http.StatusOK), nil
		},
		after: func(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
			return c.currentBatch(ctx, who, id) // with the files its items left
		},
		current: func(ctx context.Context, _ *idempotency.Record) (idempotency.Outcome, error) {
			return c.currentBatch(ctx, who, id)
		},
	})
}
