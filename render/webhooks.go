package render

import (
	"strconv"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
)

// Webhook is the wire form of a webhook; its secret only when w carries
// one (the answer that made or rotated it).
func Webhook(w *agentfs.Webhook) api.Webhook {
	out := api.Webhook{ID: w.ID, Object: "webhook", URL: w.URL, Types: nonNil(w.Types), Prefix: w.Prefix,
		RunID: optional(w.RunID), Description: w.Description, Status: w.Status, DisabledReason: optional(w.DisabledReason),
		Cursor: w.Cursor.String(), FailedAttempts: int64(w.Attempts), NextAttemptAt: utc(w.NextAttemptAt),
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC()}
	if w.Secret != "" {
		out.Secret = &w.Secret
	}
	return out
}

// WebhookDelivery is the wire form of one delivery attempt.
func WebhookDelivery(d *agentfs.WebhookDelivery) api.WebhookDelivery {
	out := api.WebhookDelivery{ID: "whd_" + strconv.FormatInt(d.ID, 10), Object: "webhook_delivery", EventID: d.EventID,
		Attempt: int64(d.Attempt), Status: "failed", Error: optional(d.Error), LatencyMS: d.Latency.Milliseconds(), At: d.At.UTC()}
	if d.Succeeded() {
		out.Status = "succeeded"
	}
	if d.StatusCode != 0 {
		code := int64(d.StatusCode)
		out.StatusCode = &code
	}
	return out
}
