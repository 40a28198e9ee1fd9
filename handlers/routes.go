// Package handlers is the HTTP door of AgentFS: Echo routes that bind and
// validate a request, make one call (a write into the admission core, a
// read into the store), and write one response. Errors are returned, never
// written: package problem answers them. This file lists every route and
// its middleware on one screen.
package handlers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// Files reads files: metadata, listings and bytes, each as its caller may
// (the read gate, package reads: a token without read is FORBIDDEN).
// Writes go through Writes.
type Files interface {
	File(ctx context.Context, who agentfs.Caller, id string) (*agentfs.File, error)
	Content(ctx context.Context, who agentfs.Caller, id string) (*agentfs.File, error)
	ListFiles(ctx context.Context, who agentfs.Caller, filter agentfs.FileFilter) ([]*agentfs.File, error)
	ListChildren(ctx context.Context, who agentfs.Caller, filter agentfs.ChildFilter) ([]agentfs.Child, error)
	OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// PresignBlob is nil, nil when the S3 service has no public endpoint.
	PresignBlob(ctx context.Context, key, filePath, contentType string) (*agentfs.BlobLink, error)
	Versions(ctx context.Context, who agentfs.Caller, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error)
	Version(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error)
	VersionContent(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error)
	Links(ctx context.Context, who agentfs.Caller, fileID string) ([]*agentfs.Link, error)
	ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error)
}

// Sessions reads upload sessions, batches and what idempotency keys hold,
// through the read gate.
type Sessions interface {
	Upload(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Upload, *agentfs.File, error)
	ListUploads(ctx context.Context, who agentfs.Caller, filter agentfs.UploadFilter) ([]*agentfs.Upload, error)
	Batch(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Batch, map[string]*agentfs.File, error)
	AwaitBatch(ctx context.Context, who agentfs.Caller, id string, wait time.Duration) (*agentfs.Batch, map[string]*agentfs.File, error)
	ListBatches(ctx context.Context, who agentfs.Caller, filter agentfs.BatchFilter) ([]*agentfs.Batch, error)
	Operation(ctx context.Context, who agentfs.Caller, key string) (*idempotency.Record, error)
}

// Ledger reads the run ledger: the event feed and run summaries, through
// the read gate.
type Ledger interface {
	AwaitEvents(ctx context.Context, who agentfs.Caller, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error)
	EventsStart(ctx context.Context, who agentfs.Caller) (agentfs.EventCursor, error)
	RunSummary(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error)
	RunArchive(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error)
	ListRuns(ctx context.Context, who agentfs.Caller, before int64, limit int) ([]*agentfs.RunSummary, error)
	// Draining is closed when the server shuts down: an event stream ends.
	Draining() <-chan struct{}
	RunRecovery(ctx context.Context, who agentfs.Caller, runID string, filter agentfs.RecoveryFilter) (*agentfs.Recovery, error)
}

// Writes is the admission core (package admission): every write the API
// serves goes through it, so a route only binds its input, calls one
// method and answers with the Result. Operation says what a key holds, for
// the byte quota (a replay writes nothing); a caller reads it through
// Sessions.
type Writes interface {
	Put(ctx context.Context, who agentfs.Caller, put agentfs.Put, body io.Reader) (idempotency.Result, error)
	Delete(ctx context.Context, who agentfs.Caller, id, ifMatch string) (idempotency.Result, error)
	Restore(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	CreateUpload(ctx context.Context, who agentfs.Caller, req agentfs.NewUpload) (idempotency.Result, error)
	PutPart(ctx context.Context, who agentfs.Caller, id string, n int, body io.Reader, size int64, digest []byte) (idempotency.Result, error)
	CompleteUpload(ctx context.Context, who agentfs.Caller, id string, req agentfs.CompleteRequest) (idempotency.Result, error)
	AbortUpload(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	CreateBatch(ctx context.Context, who agentfs.Caller, b *agentfs.Batch, raw []byte, wait time.Duration) (idempotency.Result, error)
	Revert(ctx context.Context, who agentfs.Caller, r agentfs.Revert) (idempotency.Result, error)
	Move(ctx context.Context, who agentfs.Caller, m agentfs.Move) (idempotency.Result, error)
	SetExpiry(ctx context.Context, who agentfs.Caller, e agentfs.Expiry) (idempotency.Result, error)
	CreateLink(ctx context.Context, who agentfs.Caller, req agentfs.NewLink) (idempotency.Result, error)
	RevokeLink(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	CancelBatch(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	RevertRun(ctx context.Context, who agentfs.Caller, runID string, force bool) (idempotency.Result, error)
	PlanRevertRun(ctx context.Context, who agentfs.Caller, runID string, force bool) ([]agentfs.BatchItem, error)
	CreateToken(ctx context.Context, who agentfs.Caller, req agentfs.NewToken) (idempotency.Result, error)
	RevokeToken(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	CreateCheckpoint(ctx context.Context, who agentfs.Caller, req agentfs.NewCheckpoint) (idempotency.Result, error)
	DeleteCheckpoint(ctx context.Context, who agentfs.Caller, idOrName string) (idempotency.Result, error)
	CreateWebhook(ctx context.Context, who agentfs.Caller, req agentfs.NewWebhook) (idempotency.Result, error)
	UpdateWebhook(ctx context.Context, who agentfs.Caller, id string, p agentfs.WebhookPatch) (idempotency.Result, error)
	DeleteWebhook(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	RotateWebhookSecret(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	ReplayWebhook(ctx context.Context, who agentfs.Caller, id string, after agentfs.EventCursor) (idempotency.Result, error)
	RestorePoint(ctx context.Context, who agentfs.Caller, req agentfs.RestoreRequest) (idempotency.Result, error)
	PlanRestorePoint(ctx context.Context, who agentfs.Caller, req agentfs.RestoreRequest) ([]agentfs.Change, agentfs.Point, error)
	CreateFork(ctx context.Context, who agentfs.Caller, req agentfs.NewFork) (idempotency.Result, error)
	Merge(ctx context.Context, who agentfs.Caller, req agentfs.MergeRequest) (idempotency.Result, error)
	PlanMerge(ctx context.Context, who agentfs.Caller, req agentfs.MergeRequest) (*agentfs.Merge, error)
	DeleteFork(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error)
	Operation(ctx context.Context, subject, key string) (*idempotency.Record, error)
}

// Tokens turns a bearer token into the principal it stands for.
type Tokens interface {
	Authenticate(ctx context.Context, token string) (agentfs.Principal, error)
	// Trusted answers a token only from what this instance already holds
	// (never asking Postgres): an address past its failed authentications
	// is still served with a token known to be good.
	Trusted(token string) (agentfs.Principal, bool)
}

// Pinger reports whether the storage dependencies answer.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Limits are the configurable bounds the API enforces and advertises. The
// env tags name the variables agentfs serve reads them from (package
// envconfig); the retentions are the store's, handed over by server.New.
type Limits struct {
	MaxUploadBytes int64 `env:"AGENTFS_MAX_UPLOAD_BYTES" envDefault:"5368709120"`
	// Upload sessions: the largest file, the preferred part size, how
	// long a session lives, and how many a subject may have open at once
	// (0: no bound).
	MaxUploadSessionBytes int64         `env:"AGENTFS_MAX_UPLOAD_SESSION_BYTES" envDefault:"5497558138880"`
	UploadPartSize        int64         `env:"AGENTFS_UPLOAD_PART_SIZE" envDefault:"8388608" envMin:"5242880"`
	UploadTTL             time.Duration `env:"AGENTFS_UPLOAD_TTL" envDefault:"24h"`
	MaxPendingUploads     int           `env:"AGENTFS_MAX_PENDING_UPLOADS" envDefault:"100" envZero:"0: no bound" envMax:"1073741824"`
	// Batches: most items, largest body, largest decoded item content.
	BatchMaxItems        int   `env:"AGENTFS_BATCH_MAX_ITEMS" envDefault:"1000"`
	BatchMaxBytes        int64 `env:"AGENTFS_BATCH_MAX_BYTES" envDefault:"33554432"`
	BatchMaxItemBytes    int64 `env:"AGENTFS_BATCH_MAX_ITEM_BYTES" envDefault:"1048576"`
	IdempotencyRetention time.Duration
	DeletedRetention     time.Duration
	// BodyIdleTimeout fails a request whose body stalls longer (408); 0
	// disables it.
	BodyIdleTimeout time.Duration `env:"AGENTFS_BODY_IDLE_TIMEOUT" envDefault:"60s"`
	// WriteIdleTimeout cuts a download (content, a share link, a run's
	// archive) whose client takes nothing of one write (or one spliced
	// chunk, at most 4 MiB) for longer, closing its S3 body; 0 disables
	// it. Keep it above the store's S3 timeout, so that S3 stalling in the
	// middle of a spliced chunk is told apart from the client stalling.
	WriteIdleTimeout time.Duration `env:"AGENTFS_WRITE_IDLE_TIMEOUT" envDefault:"60s" envZero:"0: downloads are never cut"`
	// RatePerSecond and RateBurst bound each subject's requests per
	// instance (429 RATE_LIMITED); 0 disables it.
	RatePerSecond float64 `env:"AGENTFS_RATE_LIMIT" envDefault:"200"`
	RateBurst     int     `env:"AGENTFS_RATE_BURST" envDefault:"400"`
	// AuthFailuresPerSecond and AuthFailureBurst bound the failed
	// authentications of each client address per instance: past them, a
	// token this instance does not already trust is answered 429
	// RATE_LIMITED without being looked up. 0 disables it.
	AuthFailuresPerSecond float64 `env:"AGENTFS_AUTH_FAILURE_LIMIT" envDefault:"10"`
	AuthFailureBurst      int     `env:"AGENTFS_AUTH_FAILURE_BURST" envDefault:"100" envMax:"1048576"`
	// QuotaBytes bounds the bytes each subject writes per QuotaWindow, across
	// instances (429 QUOTA_EXCEEDED); 0 disables it.
	QuotaBytes  int64         `env:"AGENTFS_QUOTA_BYTES" envDefault:"0" envZero:"0: no quota"`
	QuotaWindow time.Duration `env:"AGENTFS_QUOTA_WINDOW" envDefault:"1h"`
	// VersionRetention and MaxVersions bound the non-current versions kept
	// per file (the sweeper applies them); EventRetention how long events
	// (and cursors) last.
	VersionRetention time.Duration `env:"AGENTFS_VERSION_RETENTION" envDefault:"720h"`
	MaxVersions      int           `env:"AGENTFS_MAX_VERSIONS" envDefault:"100" envMax:"1048576"`
	EventRetention   time.Duration
	// StreamHeartbeat is how often a quiet GET /v1/events/stream sends a
	// comment (and the cursor it is at), so proxies keep it open, and
	// looks again whether its token still stands.
	StreamHeartbeat time.Duration `env:"AGENTFS_STREAM_HEARTBEAT" envDefault:"15s" envMin:"100ms"`
	// WebhookAllowPrivate lets a webhook name an http URL or a private
	// address (the delivery worker's AGENTFS_WEBHOOK_ALLOW_PRIVATE).
	WebhookAllowPrivate bool
}

// Delegation reads the caller's token and its descendants, through the
// read gate.
type Delegation interface {
	Tokens(ctx context.Context, who agentfs.Caller) ([]*agentfs.Token, error)
	Token(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Token, error)
}

// Deps are what the API needs; New rejects missing ones.
type Deps struct {
	Files      Files
	Sessions   Sessions
	Ledger     Ledger
	Search     Searcher
	Delegation Delegation
	Points     Points
	Webhooks   Webhooks
	Writes     Writes
	Quota      Quota
	Tokens     Tokens
	Health     Pinger
	Log        *slog.Logger
	PublicURL  string // base of every file's url, without a trailing slash
	Limits     Limits
	// Registry receives the HTTP metrics and is served at /metrics.
	Registry *prometheus.Registry
	// Traces, when set, makes an OpenTelemetry server span of each request
	// (named for its method and route), continuing the caller's trace when
	// it sends a W3C traceparent; the storage calls the request makes
	// become its children. Nil leaves the API untraced.
	Traces trace.TracerProvider
	// OAuth, when set, verifies the JWT access tokens of an OAuth 2.1
	// authorization server beside Tokens; nil takes AgentFS tokens only.
	OAuth OAuth
	// MCP, when set, is the MCP tool door served at /mcp (Streamable HTTP)
	// behind this API's authentication; it finds the caller with
	// agentfs.CallerFromContext.
	MCP http.Handler
	// MCPGuard, when set, wraps /mcp before authentication: it validates
	// Host and Origin (mcpserver.Guard), so a page a browser runs cannot
	// reach the door, token or not.
	MCPGuard func(http.Handler) http.Handler
	// Rates, when set, is the per-subject request rate limit; the /mcp
	// door takes each call of a request from the same one. Nil makes one
	// from Limits.
	Rates *RateLimits
}

// API is the AgentFS HTTP handler.
type API struct {
	deps      Deps
	echo      *echo.Echo
	rates     *RateLimits
	authFails *RateLimits // by client address
	metrics   *metrics
	routes    map[string]bool   // every route template, the closed set of route labels
	ops       map[string]string // "METHOD /v1/route" → the operation it runs
}

// New builds the API and its routes.
func New(d Deps) (*API, error) {
	switch {
	case d.Files == nil, d.Sessions == nil, d.Ledger == nil, d.Search == nil, d.Delegation == nil, d.Webhooks == nil, d.Writes == nil, d.Tokens == nil, d.Health == nil, d.Quota == nil:
		return nil, errors.New("handlers: Files, Sessions, Ledger, Search, Delegation, Webhooks, Writes, Quota, Tokens and Health are required")
	case d.Limits.QuotaBytes > 0 && d.Limits.QuotaWindow <= 0:
		return nil, errors.New("handlers: a byte quota needs a positive QuotaWindow")
	case d.Limits.BatchMaxItems <= 0, d.Limits.BatchMaxBytes <= 0, d.Limits.BatchMaxItemBytes <= 0:
		return nil, errors.New("handlers: the batch limits must be positive")
	case d.Log == nil, d.Registry == nil:
		return nil, errors.New("handlers: Log and Registry are required")
	case d.PublicURL == "":
		return nil, errors.New("handlers: PublicURL is required")
	case d.Limits.MaxUploadBytes <= 0, d.Limits.MaxUploadSessionBytes <= 0:
		return nil, errors.New("handlers: Limits.MaxUploadBytes and MaxUploadSessionBytes must be positive")
	case d.Limits.UploadPartSize < agentfs.MinPartSize, d.Limits.UploadTTL <= 0:
		return nil, errors.New("handlers: Limits.UploadPartSize must be at least 5 MiB and UploadTTL positive")
	}
	a := &API{deps: d, echo: echo.New(), rates: d.Rates, ops: map[string]string{},
		authFails: NewRateLimits(d.Limits.AuthFailuresPerSecond, d.Limits.AuthFailureBurst)}
	a.authFails.max = maxFailingAddresses
	if a.rates == nil {
		a.rates = NewRateLimits(d.Limits.RatePerSecond, d.Limits.RateBurst)
	}
	a.metrics = newMetrics(d.Registry)
	a.addRoutes()
	a.routes = map[string]bool{}
	for _, r := range a.echo.Routes() {
		a.routes[r.Path] = true
	}
	return a, nil
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.echo.ServeHTTP(w, r) }

// Routes lists every route the API serves, for the contract tests.
func (a *API) Routes() []*echo.Route { return a.echo.Routes() }

// RouteOperation names the operation a /v1 route runs, whose scopes (in
// agentfs's operation table) its token must carry; ok is false for a
// route that runs none (the public routes, /mcp, share links). The tests
// hold every route to the table with it.
func (a *API) RouteOperation(method, path string) (op string, ok bool) {
	op, ok = a.ops[method+" "+path]
	return op, ok
}

func (a *API) addRoutes() {
	e := a.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = problem.ErrorHandler(a.deps.Log, a.challenge)
	if a.deps.Traces != nil {
		e.Use(traceRequests(a.deps.Traces))
	}
	e.Use(requestID, a.observe(a.metrics), recoverPanics)

	getAndHead(e, "/healthz", a.healthz)
	getAndHead(e, "/readyz", a.readyz)
	getAndHead(e, "/metrics", a.serveMetrics())
	getAndHead(e, "/openapi.yaml", a.openAPI)
	getAndHead(e, "/problems/:code", a.problemKind)
	getAndHead(e, "/v1/protocol", a.protocol)
	// OAuth clients (MCP clients among them) find the authorization
	// server here, from the resource_metadata of a 401 (RFC 9728).
	getAndHead(e, resourceMetadataPath, a.protectedResource)
	if a.deps.MCP != nil {
		getAndHead(e, mcpResourceMetadataPath, a.protectedResource)
	}

	a.addV1(e.Group("/v1"))

	// The console (package console): a page for people, served from the
	// binary. It authenticates nothing itself: its script calls /v1 with
	// the token the person pastes in.
	getAndHead(e, "/console", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/console/") })
	getAndHead(e, "/console/*", a.serveConsole)

	// Share links carry their own authority: no token, only the link's
	// secret.
	getAndHead(e, "/s/:secret", a.getShared, linkInstance, singleHeaders)

	// The MCP tools: the same tokens, rate limit and attribution as the
	// REST routes. Scopes are checked per operation where each tool's reads
	// and writes run (a read-only token reads, and its writes answer
	// FORBIDDEN), and the byte quota is charged for what a tool stores, not
	// for the request's body.
	if a.deps.MCP != nil {
		guard := func(next echo.HandlerFunc) echo.HandlerFunc { return next }
		if a.deps.MCPGuard != nil {
			guard = echo.WrapMiddleware(a.deps.MCPGuard)
		}
		e.POST(mcpPath, a.mcp, guard, singleHeaders, a.authenticate, a.limitRate, attribution, a.bodyIdle)
		// GET holds a session's notification stream (resource
		// subscriptions); DELETE ends the session.
		getAndHead(e, mcpPath, a.mcp, guard, singleHeaders, a.authenticate, a.limitRate, attribution)
		e.DELETE(mcpPath, a.mcp, guard, singleHeaders, a.authenticate, a.limitRate, attribution)
	}
}

// addV1 adds the /v1 routes. Middleware is attached per route, not with
// Group.Use, which would turn a wrong method on a known route into a 404
// instead of a 405. Each route names the operation it runs: its token must
// carry the scopes the operation table gives it (checked again, per
// operation, where the write or read runs).
func (a *API) addV1(v1 *echo.Group) {
	add := func(method, path, op string, h echo.HandlerFunc) {
		mw := []echo.MiddlewareFunc{singleHeaders, a.authenticate, a.limitRate, requireScope(op), attribution, idempotencyKey, a.limitBytes, a.bodyIdle}
		methods := []string{method}
		if method == http.MethodGet { // every GET route answers HEAD
			methods = append(methods, http.MethodHead)
		}
		for _, m := range methods {
			v1.Add(m, path, h, mw...)
			a.ops[m+" /v1"+path] = op
		}
	}
	get, post := http.MethodGet, http.MethodPost
	add(post, "/files", agentfs.OpPut, a.createFile)
	add(get, "/files", agentfs.OpListFiles, a.listFiles)
	add(get, "/files/:id", agentfs.OpGetFile, a.getFile)
	add(http.MethodPatch, "/files/:id", agentfs.OpSetExpiry, a.patchFile)
	add(get, "/files/:id/content", agentfs.OpReadContent, a.getContent)
	add(http.MethodDelete, "/files/:id", agentfs.OpDelete, a.deleteFile)
	add(post, "/files/:id/restore", agentfs.OpRestore, a.restoreFile)
	add(get, "/files/:id/versions", agentfs.OpListVersions, a.listVersions)
	add(get, "/files/:id/versions/:n", agentfs.OpGetVersion, a.getVersion)
	add(get, "/files/:id/versions/:n/content", agentfs.OpReadContent, a.getVersionContent)
	add(post, "/files/:id/revert", agentfs.OpRevert, a.revertFile)
	add(post, "/files/:id/move", agentfs.OpMove, a.moveFile)
	add(post, "/files/:id/links", agentfs.OpCreateLink, a.createLink)
	add(get, "/files/:id/links", agentfs.OpListLinks, a.listLinks)
	add(http.MethodDelete, "/links/:id", agentfs.OpRevokeLink, a.revokeLink)
	add(post, "/checkpoints", agentfs.OpCreateCheckpoint, a.createCheckpoint)
	add(get, "/checkpoints", agentfs.OpListCheckpoints, a.listCheckpoints)
	add(get, "/checkpoints/:id", agentfs.OpGetCheckpoint, a.getCheckpoint)
	add(http.MethodDelete, "/checkpoints/:id", agentfs.OpDeleteCheckpoint, a.deleteCheckpoint)
	add(post, "/restore", agentfs.OpRestorePoint, a.restorePoint)
	add(get, "/diff", agentfs.OpDiff, a.getDiff)
	add(post, "/forks", agentfs.OpCreateFork, a.createFork)
	add(get, "/forks", agentfs.OpListForks, a.listForks)
	add(get, "/forks/:id", agentfs.OpGetFork, a.getFork)
	add(http.MethodDelete, "/forks/:id", agentfs.OpDeleteFork, a.deleteFork)
	add(post, "/forks/:id/merge", agentfs.OpMerge, a.mergeFork)
	add(post, "/uploads", agentfs.OpCreateUpload, a.createUpload)
	add(get, "/uploads", agentfs.OpListUploads, a.listUploads)
	add(get, "/uploads/:id", agentfs.OpGetUpload, a.getUpload)
	add(http.MethodPut, "/uploads/:id/parts/:n", agentfs.OpPutPart, a.putPart)
	add(post, "/uploads/:id/complete", agentfs.OpCompleteUpload, a.completeUpload)
	add(http.MethodDelete, "/uploads/:id", agentfs.OpAbortUpload, a.abortUpload)
	add(post, "/batch", agentfs.OpBatch, a.createBatch)
	add(get, "/batch", agentfs.OpListBatches, a.listBatches)
	add(get, "/batch/:id", agentfs.OpGetBatch, a.getBatch)
	add(post, "/batch/:id/cancel", agentfs.OpCancelBatch, a.cancelBatch)
	add(get, "/operations/:idempotency_key", agentfs.OpGetOperation, a.getOperation)
	add(get, "/events", agentfs.OpListEvents, a.listEvents)
	add(get, "/events/stream", agentfs.OpListEvents, a.streamEvents)
	add(get, "/search", agentfs.OpSearch, a.search)
	add(get, "/runs", agentfs.OpListRuns, a.listRuns)
	add(get, "/runs/:run_id", agentfs.OpGetRun, a.getRun)
	add(get, "/runs/:run_id/archive", agentfs.OpRunArchive, a.runArchive)
	add(get, "/runs/:run_id/recovery", agentfs.OpRunRecovery, a.getRunRecovery)
	add(post, "/runs/:run_id/revert", agentfs.OpRevertRun, a.revertRun)
	add(post, "/tokens", agentfs.OpCreateToken, a.createToken)
	add(get, "/tokens", agentfs.OpListTokens, a.listTokens)
	add(get, "/tokens/:id", agentfs.OpGetToken, a.getToken)
	add(http.MethodDelete, "/tokens/:id", agentfs.OpRevokeToken, a.revokeToken)
	a.addWebhookRoutes(add)
}

// router is where routes are added: the Echo instance or a group of it.
type router interface {
	Add(method, path string, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) *echo.Route
}

// getAndHead serves h for GET and for HEAD: every GET route answers HEAD
// like GET without a body (the error contract; net/http drops what a handler writes
// to a HEAD response), so a caller can check a resource, or read its
// headers, without a 405.
func getAndHead(r router, path string, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) {
	r.Add(http.MethodGet, path, h, mw...)
	r.Add(http.MethodHead, path, h, mw...)
}

// mcp is POST /mcp: one MCP exchange, answered by the tools as the caller.
func (a *API) mcp(c echo.Context) error {
	req := c.Request()
	ctx := agentfs.ContextWithCaller(req.Context(), caller(c))
	a.deps.MCP.ServeHTTP(c.Response(), req.WithContext(ctx))
	return nil
}
