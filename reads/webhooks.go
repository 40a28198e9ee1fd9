package reads

import (
	"context"

	"github.com/agentfs/agentfs"
)

// WebhookStore is what the gate reads of webhooks (DESIGN §23).
type WebhookStore interface {
	ListWebhooks(ctx context.Context, subject string, filter agentfs.WebhookFilter) ([]*agentfs.Webhook, error)
	Webhook(ctx context.Context, subject, id string) (*agentfs.Webhook, error)
	WebhookDeliveries(ctx context.Context, subject, id string, before int64, limit int) ([]*agentfs.WebhookDelivery, error)
}

// Webhooks lists the caller's webhooks, oldest first (GET /v1/webhooks): a
// scoped token sees those it and its descendants made.
func (g *Gate) Webhooks(ctx context.Context, who agentfs.Caller, filter agentfs.WebhookFilter) ([]*agentfs.Webhook, error) {
	return gated(ctx, who, agentfs.OpListWebhooks, g.store.ListWebhooks, filter)
}

// Webhook is one of the caller's webhooks (GET /v1/webhooks/{id}),
// without its secret.
func (g *Gate) Webhook(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Webhook, error) {
	return gated(ctx, who, agentfs.OpGetWebhook, g.store.Webhook, id)
}

// WebhookDeliveries is a page of a webhook's delivery log, newest first
// (GET /v1/webhooks/{id}/deliveries).
func (g *Gate) WebhookDeliveries(ctx context.Context, who agentfs.Caller, id string, before int64, limit int) ([]*agentfs.WebhookDelivery, error) {
	ctx, err := allow(ctx, who, agentfs.OpListWebhookDeliveries)
	if err != nil {
		return nil, err
	}
	return g.store.WebhookDeliveries(ctx, who.Subject, id, before, limit)
}
