package client

import (
	"context"
	"errors"
	"net/url"

	"github.com/agentfs/agentfs/api"
)

// Webhook is a receiver of the subject's matching events (schema Webhook).
type Webhook = api.Webhook

// WebhookList is a page of webhooks (schema WebhookList).
type WebhookList = api.WebhookList

// WebhookDelivery is one delivery attempt (schema WebhookDelivery).
type WebhookDelivery = api.WebhookDelivery

// WebhookDeliveryList is a page of a webhook's delivery log.
type WebhookDeliveryList = api.WebhookDeliveryList

// WebhookOptions describe a new webhook (CreateWebhook).
type WebhookOptions struct {
	// URL receives the events (required): https on a public address
	// unless the server allows private ones.
	URL string
	// Types are the event types delivered (none: every type).
	Types       []string
	Prefix      string
	RunID       string
	Description string
	// IdempotencyKey names this creation; generated when empty. A retry
	// with it by the same token gets the same webhook and secret back.
	IdempotencyKey string
}

// CreateWebhook makes a webhook (POST /v1/webhooks) and returns it with its
// signing secret in Webhook.Secret, which only this answer shows.
func (c *Client) CreateWebhook(ctx context.Context, opts WebhookOptions) (*Webhook, error) {
	if opts.URL == "" {
		return nil, errors.New("CreateWebhook: URL is required")
	}
	body := map[string]any{"url": opts.URL}
	for k, v := range map[string]string{"prefix": opts.Prefix, "run_id": opts.RunID, "description": opts.Description} {
		if v != "" {
			body[k] = v
		}
	}
	if len(opts.Types) > 0 {
		body["types"] = opts.Types
	}
	r, err := newRequest(routeCreateWebhook, "/v1/webhooks").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	var w Webhook
	return &w, c.jsonCall(ctx, r, &w)
}

// ListWebhooks returns one page of webhooks, oldest first (GET
// /v1/webhooks).
func (c *Client) ListWebhooks(ctx context.Context, limit int, cursor string) (*WebhookList, error) {
	r := newRequest(routeListWebhooks, "/v1/webhooks")
	r.query = pageQuery(limit, cursor)
	var l WebhookList
	return &l, c.jsonCall(ctx, r, &l)
}

// GetWebhook returns a webhook, without its secret.
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	return &w, c.jsonCall(ctx, newRequest(routeWebhook, webhookPath(id)), &w)
}

// WebhookChange changes a webhook (UpdateWebhook); nil fields stay.
type WebhookChange struct {
	URL   *string
	Types *[]string
	// Status is "active" (resume after the cursor, failures forgotten) or
	// "disabled".
	Status *string
}

// UpdateWebhook changes a webhook's URL, types or status (PATCH
// /v1/webhooks/{id}).
func (c *Client) UpdateWebhook(ctx context.Context, id string, ch WebhookChange) (*Webhook, error) {
	body := map[string]any{}
	if ch.URL != nil {
		body["url"] = *ch.URL
	}
	if ch.Types != nil {
		body["types"] = *ch.Types
	}
	if ch.Status != nil {
		body["status"] = *ch.Status
	}
	r, err := newRequest(routeUpdateWebhook, webhookPath(id)).withKey(c.keyFor("")).withJSON(body)
	if err != nil {
		return nil, err
	}
	var w Webhook
	return &w, c.jsonCall(ctx, r, &w)
}

// DeleteWebhook removes a webhook and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	return &w, c.jsonCall(ctx, newRequest(routeDeleteWebhook, webhookPath(id)).withKey(c.keyFor("")), &w)
}

// RotateWebhookSecret gives a webhook a new signing secret, returned in
// Webhook.Secret (only here).
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	return &w, c.jsonCall(ctx, newRequest(routeRotateWebhook, webhookPath(id)+"/rotate-secret").withKey(c.keyFor("")), &w)
}

// ReplayWebhook delivers again every matching event after the cursor after
// (an event cursor, "start" or "now"), in order.
func (c *Client) ReplayWebhook(ctx context.Context, id, after string) (*Webhook, error) {
	r, err := newRequest(routeReplayWebhook, webhookPath(id)+"/replay").withKey(c.keyFor("")).withJSON(map[string]any{"after": after})
	if err != nil {
		return nil, err
	}
	var w Webhook
	return &w, c.jsonCall(ctx, r, &w)
}

// WebhookDeliveries returns one page of a webhook's delivery attempts,
// newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int, cursor string) (*WebhookDeliveryList, error) {
	r := newRequest(routeWebhookDeliveries, webhookPath(id)+"/deliveries")
	r.query = pageQuery(limit, cursor)
	var l WebhookDeliveryList
	return &l, c.jsonCall(ctx, r, &l)
}

func webhookPath(id string) string { return "/v1/webhooks/" + url.PathEscape(id) }
