package handlers

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

func (a *API) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, api.Health{Status: "ok"})
}

// readyz answers 200 only while Postgres and S3 both answer.
func (a *API) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	if err := a.deps.Health.Ping(ctx); err != nil {
		a.deps.Log.WarnContext(ctx, "not ready", "err", err)
		return problem.New(problem.StorageUnavailable, "Postgres or S3 does not answer")
	}
	return c.JSON(http.StatusOK, api.Health{Status: "ready"})
}

func (a *API) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", agentfs.OpenAPI)
}

func (a *API) problemKind(c echo.Context) error {
	k, ok := problem.Lookup(c.Param("code"))
	if !ok {
		return problem.New(problem.NotFound, "no such problem code")
	}
	return c.JSON(http.StatusOK, render.ProblemType(k))
}

// protocol is GET /v1/protocol: what this server promises, for clients to
// configure themselves by.
func (a *API) protocol(c echo.Context) error {
	return c.JSON(http.StatusOK, a.protocolDoc())
}

// protocolDoc is the document GET /v1/protocol answers with.
func (a *API) protocolDoc() api.Protocol {
	return api.Protocol{
		APIVersion: "v1",
		Idempotency: api.ProtocolIdempotency{
			Header:           idempotency.Header,
			KeyPattern:       idempotency.KeyPattern,
			Scope:            "subject",
			RetentionSeconds: int64(a.deps.Limits.IdempotencyRetention.Seconds()),
			RequiredOn:       slices.Clone(keyRequiredOn),
			ReplayHeader:     "Idempotent-Replayed",
		},
		Retry: api.ProtocolRetry{
			RetryableStatuses: []int{408, 429, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511},
			SafeOperations: []string{
				"GET", "HEAD", "any write with an Idempotency-Key", "POST /v1/files?if_exists=replace",
				"DELETE /v1/files/{id}", "POST /v1/files/{id}/restore",
				"POST /v1/uploads", "PUT /v1/uploads/{id}/parts/{n}", "POST /v1/uploads/{id}/complete", "DELETE /v1/uploads/{id}",
				"GET /v1/batch/{id}",
			},
			InitialDelayMS: 1000,
			MaxDelayMS:     30000,
			MaxAttempts:    8,
			Jitter:         "full",
		},
		MCP:    a.mcpProtocol(),
		OAuth:  a.oauthProtocol(),
		Limits: a.protocolLimits(),
		Grants: api.ProtocolGrants{Scopes: agentfs.AllScopes, Prefixes: "folder", MaxPrefixes: agentfs.MaxGrantPrefixes,
			Pins: []string{"X-Run-ID", "X-Agent-ID"}, Delegation: "/v1/tokens"},
	}
}

// keyRequiredOn is every route that answers 400 IDEMPOTENCY_KEY_REQUIRED
// without an Idempotency-Key, as openapi.yaml spells it, for
// /v1/protocol's required_on: a client learns from it where it must send
// one. TestProtocolListsEveryKeyedRoute holds it to the routes.
var keyRequiredOn = []string{"POST /v1/batch", "POST /v1/runs/{run_id}/revert"}

// protocolLimits are the bounds this server enforces, as /v1/protocol
// advertises them.
func (a *API) protocolLimits() api.ProtocolLimits {
	l := a.deps.Limits
	return api.ProtocolLimits{
		MaxUploadBytes:              l.MaxUploadBytes,
		MaxPathBytes:                agentfs.MaxPathBytes,
		ListLimitDefault:            defaultListLimit,
		ListLimitMax:                maxListLimit,
		DeletedRetentionSeconds:     int64(l.DeletedRetention.Seconds()),
		MaxUploadSessionBytes:       l.MaxUploadSessionBytes,
		UploadPartSize:              l.UploadPartSize,
		UploadMaxParts:              agentfs.MaxParts,
		UploadTTLSeconds:            int64(l.UploadTTL.Seconds()),
		MaxPendingUploads:           l.MaxPendingUploads,
		BatchMaxItems:               l.BatchMaxItems,
		BatchMaxBytes:               l.BatchMaxBytes,
		BatchMaxItemBytes:           l.BatchMaxItemBytes,
		BodyIdleTimeoutSeconds:      int64(l.BodyIdleTimeout.Seconds()),
		WriteIdleTimeoutSeconds:     int64(l.WriteIdleTimeout.Seconds()),
		RateLimitPerSecond:          l.RatePerSecond,
		RateLimitBurst:              l.RateBurst,
		RateLimitScope:              "subject, per instance",
		QuotaBytes:                  l.QuotaBytes,
		QuotaWindowSeconds:          int64(l.QuotaWindow.Seconds()),
		VersionRetentionSeconds:     int64(l.VersionRetention.Seconds()),
		MaxVersions:                 l.MaxVersions,
		EventRetentionSeconds:       int64(l.EventRetention.Seconds()),
		EventsWaitMaxSeconds:        maxEventWait,
		ExpiresInMinSeconds:         int64(agentfs.MinExpiresIn.Seconds()),
		ExpiresInMaxSeconds:         int64(agentfs.MaxExpiresIn.Seconds()),
		LinkExpiresInMinSeconds:     int64(agentfs.MinLinkExpiresIn.Seconds()),
		LinkExpiresInMaxSeconds:     int64(agentfs.MaxLinkExpiresIn.Seconds()),
		LinkExpiresInDefaultSeconds: int64(agentfs.DefaultLinkExpiresIn.Seconds()),
	}
}

// mcpProtocol says where the MCP tools are served, or nil when they are
// not.
func (a *API) mcpProtocol() *api.ProtocolMCP {
	if a.deps.MCP == nil {
		return nil
	}
	return &api.ProtocolMCP{Endpoint: "/mcp", Transport: "streamable-http", Stateless: true,
		Auth: "the same Bearer tokens and scopes as the REST API (AgentFS tokens, or OAuth access tokens: see oauth)"}
}
