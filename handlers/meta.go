package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

func (a *API) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only while Postgres and S3 both answer.
func (a *API) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if err := a.deps.Health.Ping(ctx); err != nil {
		a.deps.Log.WarnContext(ctx, "not ready", "err", err)
		return problem.New(problem.StorageUnavailable, "Postgres or S3 does not answer")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (a *API) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", agentfs.OpenAPI)
}

func (a *API) problemKind(c echo.Context) error {
	k, ok := problem.Lookup(c.Param("code"))
	if !ok {
		return problem.New(problem.NotFound, "no such problem code")
	}
	return c.JSON(http.StatusOK, k)
}

// protocol is GET /v1/protocol: what this server promises, for clients to
// configure themselves by.
func (a *API) protocol(c echo.Context) error {
	l := a.deps.Limits
	return c.JSON(http.StatusOK, map[string]any{
		"api_version": "v1",
		"idempotency": map[string]any{
			"header":            idempotency.Header,
			"key_pattern":       idempotency.KeyPattern,
			"scope":             "subject",
			"retention_seconds": int64(l.IdempotencyRetention.Seconds()),
			"required_on":       []string{"POST /v1/batch"},
			"replay_header":     "Idempotent-Replayed",
		},
		"retry": map[string]any{
			"retryable_statuses": []int{408, 429, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511},
			"safe_operations": []string{
				"GET", "HEAD", "any write with an Idempotency-Key", "POST /v1/files?if_exists=replace",
				"DELETE /v1/files/{id}", "POST /v1/files/{id}/restore",
				"POST /v1/uploads", "PUT /v1/uploads/{id}/parts/{n}", "POST /v1/uploads/{id}/complete", "DELETE /v1/uploads/{id}",
				"GET /v1/batch/{id}",
			},
			"initial_delay_ms": 1000,
			"max_delay_ms":     30000,
			"max_attempts":     8,
			"jitter":           "full",
		},
		"mcp": a.mcpProtocol(),
		"limits": map[string]any{
			"max_upload_bytes":                l.MaxUploadBytes,
			"max_path_bytes":                  agentfs.MaxPathBytes,
			"list_limit_default":              defaultListLimit,
			"list_limit_max":                  maxListLimit,
			"deleted_retention_seconds":       int64(l.DeletedRetention.Seconds()),
			"max_upload_session_bytes":        l.MaxUploadSessionBytes,
			"upload_part_size":                l.UploadPartSize,
			"upload_max_parts":                agentfs.MaxParts,
			"upload_ttl_seconds":              int64(l.UploadTTL.Seconds()),
			"max_pending_uploads":             l.MaxPendingUploads,
			"batch_max_items":                 l.BatchMaxItems,
			"batch_max_bytes":                 l.BatchMaxBytes,
			"batch_max_item_bytes":            l.BatchMaxItemBytes,
			"body_idle_timeout_seconds":       int64(l.BodyIdleTimeout.Seconds()),
			"write_idle_timeout_seconds":      int64(l.WriteIdleTimeout.Seconds()),
			"rate_limit_per_second":           l.RatePerSecond,
			"rate_limit_burst":                l.RateBurst,
			"rate_limit_scope":                "subject, per instance",
			"quota_bytes":                     l.QuotaBytes,
			"quota_window_seconds":            int64(l.QuotaWindow.Seconds()),
			"version_retention_seconds":       int64(l.VersionRetention.Seconds()),
			"max_versions":                    l.MaxVersions,
			"event_retention_seconds":         int64(l.EventRetention.Seconds()),
			"events_wait_max_seconds":         maxEventWait,
			"expires_in_min_seconds":          int64(agentfs.MinExpiresIn.Seconds()),
			"expires_in_max_seconds":          int64(agentfs.MaxExpiresIn.Seconds()),
			"link_expires_in_min_seconds":     int64(agentfs.MinLinkExpiresIn.Seconds()),
			"link_expires_in_max_seconds":     int64(agentfs.MaxLinkExpiresIn.Seconds()),
			"link_expires_in_default_seconds": int64(agentfs.DefaultLinkExpiresIn.Seconds()),
		},
	})
}

// mcpProtocol says where the MCP tools are served, or null when they are
// not.
func (a *API) mcpProtocol() any {
	if a.deps.MCP == nil {
		return nil
	}
	return map[string]any{"endpoint": "/mcp", "transport": "streamable-http", "stateless": true,
		"auth": "the same Bearer tokens and scopes as the REST API"}
}
