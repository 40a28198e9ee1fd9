package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// Webhooks reads webhooks and their delivery logs, through the read gate.
type Webhooks interface {
	Webhooks(ctx context.Context, who agentfs.Caller, filter agentfs.WebhookFilter) ([]*agentfs.Webhook, error)
	Webhook(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Webhook, error)
	WebhookDeliveries(ctx context.Context, who agentfs.Caller, id string, before int64, limit int) ([]*agentfs.WebhookDelivery, error)
}

// addWebhookRoutes adds /v1/webhooks with add (addV1's).
func (a *API) addWebhookRoutes(add func(method, path, op string, h echo.HandlerFunc)) {
	add(http.MethodPost, "/webhooks", agentfs.OpCreateWebhook, a.createWebhook)
	add(http.MethodGet, "/webhooks", agentfs.OpListWebhooks, a.listWebhooks)
	add(http.MethodGet, "/webhooks/:id", agentfs.OpGetWebhook, a.getWebhook)
	add(http.MethodPatch, "/webhooks/:id", agentfs.OpUpdateWebhook, a.patchWebhook)
	add(http.MethodDelete, "/webhooks/:id", agentfs.OpDeleteWebhook, a.deleteWebhook)
	add(http.MethodPost, "/webhooks/:id/rotate-secret", agentfs.OpRotateWebhookSecret, a.rotateWebhookSecret)
	add(http.MethodGet, "/webhooks/:id/deliveries", agentfs.OpListWebhookDeliveries, a.listWebhookDeliveries)
	add(http.MethodPost, "/webhooks/:id/replay", agentfs.OpReplayWebhook, a.replayWebhook)
}

// createWebhookBody is the body of POST /v1/webhooks.
type createWebhookBody struct {
	URL         *string  `json:"url"`
	Types       []string `json:"types"`
	Prefix      string   `json:"prefix"`
	RunID       string   `json:"run_id"`
	Description string   `json:"description"`
}

// createWebhook is POST /v1/webhooks: 201 with the webhook and its
// signing secret, shown in this answer only.
func (a *API) createWebhook(c echo.Context) error {
	return writeBody(c, false, a.newWebhookOf, a.deps.Writes.CreateWebhook)
}

// newWebhookOf checks a POST /v1/webhooks body.
func (a *API) newWebhookOf(_ echo.Context, body createWebhookBody) (agentfs.NewWebhook, error) {
	if body.URL == nil {
		return agentfs.NewWebhook{}, problem.Validation("url", "is required: the https URL events are POSTed to")
	}
	u, err := a.webhookURL(*body.URL)
	if err != nil {
		return agentfs.NewWebhook{}, err
	}
	types, err := webhookTypes(body.Types)
	if err != nil {
		return agentfs.NewWebhook{}, err
	}
	prefix, err := normalizePrefix(body.Prefix)
	if err != nil {
		return agentfs.NewWebhook{}, err
	}
	switch {
	case body.RunID != "" && !agentfs.ValidTagValue(body.RunID):
		return agentfs.NewWebhook{}, problem.Validation("run_id", "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -")
	case len(body.Description) > agentfs.MaxWebhookDescription:
		return agentfs.NewWebhook{}, problem.Validation("description", "must be at most 1024 bytes")
	}
	return agentfs.NewWebhook{URL: u, Types: types, Prefix: prefix, RunID: body.RunID, Description: body.Description}, nil
}

// webhookURL checks a webhook's URL (agentfs.CheckWebhookURL).
func (a *API) webhookURL(raw string) (string, error) {
	u, err := agentfs.CheckWebhookURL(raw, a.deps.Limits.WebhookAllowPrivate)
	if err != nil {
		return "", problem.Validation("url", err.Error())
	}
	return u, nil
}

// webhookTypes checks the event types a webhook delivers (none: all),
// sorted and without repeats.
func webhookTypes(types []string) ([]string, error) {
	out := []string{}
	for _, t := range types {
		if !knownEventType(t) {
			return nil, problem.Validation("types", "must name event types of "+strings.Join(agentfs.EventTypes, ", "))
		}
		if !contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// listWebhooks is GET /v1/webhooks: oldest first.
func (a *API) listWebhooks(c echo.Context) error {
	return createdList(c, "wh", nil, func(limit int, after *agentfs.Cursor) ([]*agentfs.Webhook, error) {
		return a.deps.Webhooks.Webhooks(c.Request().Context(), caller(c), agentfs.WebhookFilter{Limit: limit, After: after})
	}, render.Webhook, func(w *agentfs.Webhook) agentfs.Cursor { return agentfs.Cursor{CreatedAt: w.CreatedAt, ID: w.ID} },
		func(p createdPage[api.Webhook]) api.WebhookList { return api.WebhookList(p) })
}

// getWebhook is GET /v1/webhooks/{id}, without its secret.
func (a *API) getWebhook(c echo.Context) error {
	return getByID(c, a.deps.Webhooks.Webhook, render.Webhook)
}

// patchWebhookBody is the body of PATCH /v1/webhooks/{id}.
type patchWebhookBody struct {
	URL    *string   `json:"url"`
	Types  *[]string `json:"types"`
	Status *string   `json:"status"`
}

// patchWebhook is PATCH /v1/webhooks/{id}: its url, types or status.
func (a *API) patchWebhook(c echo.Context) error {
	var body patchWebhookBody
	if _, err := readJSON(c, maxJSONBytes, &body, false); err != nil {
		return err
	}
	var p agentfs.WebhookPatch
	if body.URL != nil {
		u, err := a.webhookURL(*body.URL)
		if err != nil {
			return err
		}
		p.URL = &u
	}
	if body.Types != nil {
		types, err := webhookTypes(*body.Types)
		if err != nil {
			return err
		}
		p.Types = &types
	}
	if s := body.Status; s != nil {
		if *s != agentfs.WebhookActive && *s != agentfs.WebhookDisabled {
			return problem.Validation("status", "must be active or disabled")
		}
		p.Status = s
	}
	if p.URL == nil && p.Types == nil && p.Status == nil {
		return problem.Validation("body", "name at least one of url, types, status")
	}
	res, err := a.deps.Writes.UpdateWebhook(c.Request().Context(), caller(c), c.Param("id"), p)
	return writeResult(c, res, err)
}

// deleteWebhook is DELETE /v1/webhooks/{id}: its delivery stops.
func (a *API) deleteWebhook(c echo.Context) error {
	return writeByID(c, a.deps.Writes.DeleteWebhook)
}

// rotateWebhookSecret is POST /v1/webhooks/{id}/rotate-secret: the new
// secret, shown in this answer only.
func (a *API) rotateWebhookSecret(c echo.Context) error {
	if _, err := readJSON(c, maxJSONBytes, &struct{}{}, true); err != nil {
		return err
	}
	return writeByID(c, a.deps.Writes.RotateWebhookSecret)
}

// replayWebhookBody is the body of POST /v1/webhooks/{id}/replay.
type replayWebhookBody struct {
	After *string `json:"after"`
}

// replayWebhook is POST /v1/webhooks/{id}/replay: the cursor moved to
// after (an event cursor, "start" or "now"), the webhook active again.
func (a *API) replayWebhook(c echo.Context) error {
	var body replayWebhookBody
	if _, err := readJSON(c, maxJSONBytes, &body, false); err != nil {
		return err
	}
	if body.After == nil {
		return problem.Validation("after", "is required: an event cursor (next_cursor of /v1/events), start or now")
	}
	ctx, who := c.Request().Context(), caller(c)
	var after agentfs.EventCursor
	switch *body.After {
	case "start":
		after = agentfs.EventCursor{Subject: who.Subject}
	case "now":
		cur, err := a.deps.Ledger.EventsStart(ctx, who)
		if err != nil {
			return err
		}
		after = cur
	default:
		cur, err := agentfs.ParseEventCursor(*body.After, who.Subject)
		if err != nil {
			return problem.Validation("after", err.Error())
		}
		after = cur
	}
	res, err := a.deps.Writes.ReplayWebhook(ctx, who, c.Param("id"), after)
	return writeResult(c, res, err)
}

// listWebhookDeliveries is GET /v1/webhooks/{id}/deliveries: its attempts,
// newest first.
func (a *API) listWebhookDeliveries(c echo.Context) error {
	limit, err := limitParam(c, defaultListLimit, maxListLimit)
	if err != nil {
		return err
	}
	var before int64
	if v := c.QueryParam("cursor"); v != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "whd_"), 10, 64)
		if err != nil || n <= 0 || !strings.HasPrefix(v, "whd_") {
			return problem.Invalid("cursor", "is not a cursor this server issued")
		}
		before = n
	}
	list, err := a.deps.Webhooks.WebhookDeliveries(c.Request().Context(), caller(c), c.Param("id"), before, limit+1)
	if err != nil {
		return err
	}
	out := api.WebhookDeliveryList{Data: make([]api.WebhookDelivery, 0, len(list))}
	if len(list) > limit {
		list, out.HasMore = list[:limit], true
		next := "whd_" + strconv.FormatInt(list[limit-1].ID, 10)
		out.NextCursor = &next
	}
	for _, d := range list {
		out.Data = append(out.Data, render.WebhookDelivery(d))
	}
	return c.JSON(http.StatusOK, out)
}
