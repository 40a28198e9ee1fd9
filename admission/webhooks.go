package admission

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
	"github.com/agentfs/agentfs/storage"
)

// Deliveries is the webhook delivery queue (package webhook): a webhook's
// job is queued in the transaction that makes it, so it is delivered once
// that commits and never otherwise; a change that may end a wait (a
// replay, an update) wakes it after its commit.
type Deliveries interface {
	Enqueue(ctx context.Context, tx pgx.Tx, webhookID string) error
	Wake(ctx context.Context, webhookID string)
}

// webhookSecretBytes is the size of a signing key (Standard Webhooks
// asks for 24 to 64 random bytes).
const webhookSecretBytes = 32

// newWebhookSecret makes a signing secret and seals it for the webhook id
// under the record key: the row keeps only the sealed value.
func (c *Core) newWebhookSecret(id string) (secret string, sealed []byte, err error) {
	if c.cfg.RecordKeys == nil {
		return "", nil, errors.New("webhooks need a record key (AGENTFS_RECORD_KEY) to keep their secrets sealed")
	}
	var raw [webhookSecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, err
	}
	secret = agentfs.WebhookSecretPrefix + base64.StdEncoding.EncodeToString(raw[:])
	sealed, err = c.cfg.RecordKeys.Seal([]byte(secret), agentfs.WebhookSecretAAD(id))
	return secret, sealed, err
}

// webhookOutcome is the answer of a write that left w.
func webhookOutcome(status int, w *agentfs.Webhook) idempotency.Outcome {
	out := outcome(status, render.Webhook(w), "webhook", w.ID)
	if w.Secret != "" {
		out.Secrets = []string{"secret"}
	}
	return out
}

// CreateWebhook makes a webhook (POST /v1/webhooks): 201 with it and its
// signing secret, a recorded secret (sealed in the key's record, replayed
// only to the token that made it). Its prefix must lie in the caller's
// grant (403 otherwise), and whatever its filters, it only ever delivers
// events inside the grant's prefixes.
func (c *Core) CreateWebhook(ctx context.Context, who agentfs.Caller, req agentfs.NewWebhook) (idempotency.Result, error) {
	adm := admission{method: http.MethodPost, route: "/v1/webhooks",
		request: idempotency.Request{Operation: agentfs.OpCreateWebhook, MediaType: "application/json", By: who.By}}
	if req.Prefix != "" {
		adm.paths = []string{req.Prefix}
	}
	body := map[string]any{"url": req.URL, "types": req.Types, "prefix": req.Prefix, "run_id": req.RunID, "description": req.Description}
	return c.run(ctx, who, &createWebhook{c: c, who: who, req: req, named: named{adm}, fixed: jsonContent(body)})
}

// createWebhook makes a webhook.
type createWebhook struct {
	named
	fixed
	c   *Core
	who agentfs.Caller
	req agentfs.NewWebhook
}

func (e *createWebhook) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	w := &agentfs.Webhook{ID: storage.NewID("wh"), Subject: e.who.Subject, URL: e.req.URL, Types: e.req.Types,
		Prefix: e.req.Prefix, RunID: e.req.RunID, Description: e.req.Description, Reach: e.who.Grant.Prefixes, TokenID: e.who.TokenID}
	secret, sealed, err := e.c.newWebhookSecret(w.ID)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	made, err := e.c.store.CreateWebhookTx(ctx, tx, w, sealed)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	if q := e.c.cfg.Deliveries; q != nil {
		if err := q.Enqueue(ctx, tx, made.ID); err != nil {
			return idempotency.Outcome{}, err
		}
	}
	made.Secret = secret
	out := webhookOutcome(http.StatusCreated, made)
	out.Header["Location"] = "/v1/webhooks/" + made.ID
	return out, nil
}

// UpdateWebhook changes a webhook (PATCH /v1/webhooks/{id}): its URL, its
// types, or its status (active again resumes after the cursor with the
// failures forgotten).
func (c *Core) UpdateWebhook(ctx context.Context, who agentfs.Caller, id string, p agentfs.WebhookPatch) (idempotency.Result, error) {
	body := map[string]any{"url": p.URL, "types": p.Types, "status": p.Status}
	return c.changeWebhook(ctx, who, agentfs.OpUpdateWebhook, http.MethodPatch, "/v1/webhooks/:id", id, jsonContent(body),
		func(ctx context.Context, tx pgx.Tx) (*agentfs.Webhook, error) {
			if p.Status != nil && *p.Status == agentfs.WebhookActive {
				if err := c.enqueueWebhook(ctx, tx, id); err != nil {
					return nil, err
				}
			}
			return c.store.UpdateWebhookTx(ctx, tx, who.Subject, id, p)
		})
}

// DeleteWebhook removes a webhook and its delivery log (DELETE
// /v1/webhooks/{id}); its delivery stops.
func (c *Core) DeleteWebhook(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.changeWebhook(ctx, who, agentfs.OpDeleteWebhook, http.MethodDelete, "/v1/webhooks/:id", id, fixed{},
		func(ctx context.Context, tx pgx.Tx) (*agentfs.Webhook, error) {
			return c.store.DeleteWebhookTx(ctx, tx, who.Subject, id)
		})
}

// RotateWebhookSecret gives a webhook a new signing secret (POST
// /v1/webhooks/{id}/rotate-secret), shown in this answer only; the next
// attempt is signed with it.
func (c *Core) RotateWebhookSecret(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.changeWebhook(ctx, who, agentfs.OpRotateWebhookSecret, http.MethodPost, "/v1/webhooks/:id/rotate-secret", id, fixed{},
		func(ctx context.Context, tx pgx.Tx) (*agentfs.Webhook, error) {
			secret, sealed, err := c.newWebhookSecret(id)
			if err != nil {
				return nil, err
			}
			w, err := c.store.RotateWebhookSecretTx(ctx, tx, who.Subject, id, sealed)
			if err == nil {
				w.Secret = secret
			}
			return w, err
		})
}

// ReplayWebhook moves a webhook's cursor to after (POST
// /v1/webhooks/{id}/replay) and makes it active: every matching event
// after that cursor is delivered again, in order.
func (c *Core) ReplayWebhook(ctx context.Context, who agentfs.Caller, id string, after agentfs.EventCursor) (idempotency.Result, error) {
	body := map[string]any{"after": after.String()}
	return c.changeWebhook(ctx, who, agentfs.OpReplayWebhook, http.MethodPost, "/v1/webhooks/:id/replay", id, jsonContent(body),
		func(ctx context.Context, tx pgx.Tx) (*agentfs.Webhook, error) {
			if err := c.enqueueWebhook(ctx, tx, id); err != nil {
				return nil, err
			}
			return c.store.ReplayWebhookTx(ctx, tx, who.Subject, id, after)
		})
}

// enqueueWebhook makes sure the webhook id has its delivery job once tx
// commits (one that exists already is kept).
func (c *Core) enqueueWebhook(ctx context.Context, tx pgx.Tx, id string) error {
	if q := c.cfg.Deliveries; q != nil {
		return q.Enqueue(ctx, tx, id)
	}
	return nil
}

// changeWebhook runs a write of one existing webhook: change, in the
// core's transaction, answering 200 with the webhook it left.
func (c *Core) changeWebhook(ctx context.Context, who agentfs.Caller, op, method, route, id string, content fixed,
	change func(context.Context, pgx.Tx) (*agentfs.Webhook, error)) (idempotency.Result, error) {
	media := ""
	if content.sum != nil {
		media = "application/json"
	}
	return c.run(ctx, who, &webhookChange{c: c, id: id, change: change, fixed: content,
		named: named{admission{method: method, route: route,
			request: idempotency.Request{Operation: op, Target: id, MediaType: media, By: who.By}}}})
}

// webhookChange is a write of one webhook.
type webhookChange struct {
	named
	fixed
	c      *Core
	id     string
	change func(context.Context, pgx.Tx) (*agentfs.Webhook, error)
}

func (e *webhookChange) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	w, err := e.change(ctx, tx)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return webhookOutcome(http.StatusOK, w), nil
}

func (e *webhookChange) follow(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
	if q := e.c.cfg.Deliveries; q != nil {
		q.Wake(ctx, e.id)
	}
	return out, nil
}
