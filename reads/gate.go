// Package reads is the read path: every read a door serves (a REST route,
// an MCP tool of the /mcp door) passes through one Gate, which refuses a
// caller whose token may not make the read (agentfs.Caller.Allow against
// the operation table: 403 FORBIDDEN) before the store is asked, and asks
// the store as the caller's subject. It is the one place where a grant's
// path prefixes filter what a caller sees, as the admission core is for
// writes: it hands the caller's reach down to the store (storage.Within),
// whose every query that can see a file holds to it, so a file outside a
// token's prefixes does not exist for it.
package reads

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
)

// Store is what the gate reads: the storage of one AgentFS, by subject.
type Store interface {
	File(ctx context.Context, subject, id string) (*agentfs.File, error)
	ListFiles(ctx context.Context, subject string, filter agentfs.FileFilter) ([]*agentfs.File, error)
	ListChildren(ctx context.Context, subject string, filter agentfs.ChildFilter) ([]agentfs.Child, error)
	OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	PresignBlob(ctx context.Context, key, filePath, contentType string) (*agentfs.BlobLink, error)
	Versions(ctx context.Context, subject, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error)
	Version(ctx context.Context, subject, fileID string, n int) (*agentfs.FileVersion, error)
	FileVersion(ctx context.Context, subject, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error)
	Links(ctx context.Context, subject, fileID string) ([]*agentfs.Link, error)
	ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error)
	Upload(ctx context.Context, subject, id string) (*agentfs.Upload, error)
	ListUploads(ctx context.Context, subject string, filter agentfs.UploadFilter) ([]*agentfs.Upload, error)
	Batch(ctx context.Context, subject, id string) (*agentfs.Batch, error)
	AwaitBatch(ctx context.Context, subject, id string, wait time.Duration) (*agentfs.Batch, error)
	BatchFiles(ctx context.Context, b *agentfs.Batch) (map[string]*agentfs.File, error)
	ListBatches(ctx context.Context, subject string, filter agentfs.BatchFilter) ([]*agentfs.Batch, error)
	Operation(ctx context.Context, subject, key string) (*idempotency.Record, error)
	AwaitEvents(ctx context.Context, subject string, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error)
	EventsStart(ctx context.Context, subject string) (agentfs.EventCursor, error)
	RunSummary(ctx context.Context, subject, runID string) (*agentfs.RunSummary, error)
	ListRuns(ctx context.Context, subject string, before int64, limit int) ([]*agentfs.RunSummary, error)
	Draining() <-chan struct{}
	RunRecovery(ctx context.Context, subject, runID string, filter agentfs.RecoveryFilter) (*agentfs.Recovery, error)
	Search(ctx context.Context, subject string, q agentfs.Search) (*agentfs.SearchPage, error)
	Tokens(ctx context.Context, subject, me string, after *agentfs.Cursor, limit int) ([]*agentfs.Token, error)
	Token(ctx context.Context, subject, me, id string) (*agentfs.Token, error)
	// The paths the /mcp door's sessions watch (watches.go).
	AddWatch(ctx context.Context, subject string, w agentfs.Watch) error
	RemoveWatch(ctx context.Context, subject, session, path string) error
	Watches(ctx context.Context, subject, session string) ([]agentfs.Watch, error)
	TouchWatches(ctx context.Context, subject, session string) error
	EndWatches(ctx context.Context, subject, session string) (int64, error)
	PointStore
	WebhookStore
	ForkStore
}

// allow checks that who may make the read op, and returns ctx holding the
// store to who's reach.
func allow(ctx context.Context, who agentfs.Caller, op string) (context.Context, error) {
	if err := who.Allow(op); err != nil {
		return ctx, err
	}
	return storage.Within(ctx, who.Grant.Prefixes, who.TokenID), nil
}

// gated runs read, a read of the caller's subject with one argument, if
// the caller may make op, within the caller's reach.
func gated[A, T any](ctx context.Context, who agentfs.Caller, op string, read func(context.Context, string, A) (T, error), arg A) (T, error) {
	ctx, err := allow(ctx, who, op)
	if err != nil {
		var none T
		return none, err
	}
	return read(ctx, who.Subject, arg)
}

// Gate serves every door's reads, each as its caller may make it.
type Gate struct {
	store Store
	log   *slog.Logger
}

// New returns the gate over store; log hears what a read survives (a
// batch's files that could not be loaded).
func New(store Store, log *slog.Logger) (*Gate, error) {
	if store == nil || log == nil {
		return nil, errors.New("reads: Store and Log are required")
	}
	return &Gate{store: store, log: log}, nil
}

// File is one of the caller's files, also a deleted one (GET
// /v1/files/{id}).
func (g *Gate) File(ctx context.Context, who agentfs.Caller, id string) (*agentfs.File, error) {
	return gated(ctx, who, agentfs.OpGetFile, g.store.File, id)
}

// Content is a live file of the caller's, for its bytes (GET
// /v1/files/{id}/content): a deleted one is agentfs.ErrNotFound, a blocked
// one a *agentfs.BlockedError. Its blob is opened with OpenBlob.
func (g *Gate) Content(ctx context.Context, who agentfs.Caller, id string) (*agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpReadContent)
	if err != nil {
		return nil, err
	}
	f, err := g.store.File(ctx, who.Subject, id)
	switch {
	case err != nil:
		return nil, err
	case !f.Live():
		return nil, agentfs.ErrNotFound
	case f.Blocked:
		return nil, &agentfs.BlockedError{FileID: f.ID, Reason: f.BlockReason}
	}
	return f, nil
}

// ContentAt is the caller's live file at path whose content the caller
// is about to read, in one query: what a lookup of the path (a listing)
// and then Content would allow and answer, so the caller needs both
// permissions (the MCP tools that read by path).
func (g *Gate) ContentAt(ctx context.Context, who agentfs.Caller, path string) (*agentfs.File, error) {
	if err := who.Allow(agentfs.OpListFiles); err != nil {
		return nil, err
	}
	ctx, err := allow(ctx, who, agentfs.OpReadContent)
	if err != nil {
		return nil, err
	}
	files, err := g.store.ListFiles(ctx, who.Subject, agentfs.FileFilter{Path: path, Limit: 1})
	switch {
	case err != nil:
		return nil, err
	case len(files) == 0 || !files[0].Live():
		return nil, agentfs.ErrNotFound
	case files[0].Blocked:
		return nil, &agentfs.BlockedError{FileID: files[0].ID, Reason: files[0].BlockReason}
	}
	return files[0], nil
}

// ListFiles is one page of the caller's files (GET /v1/files).
func (g *Gate) ListFiles(ctx context.Context, who agentfs.Caller, filter agentfs.FileFilter) ([]*agentfs.File, error) {
	return gated(ctx, who, agentfs.OpListFiles, g.store.ListFiles, filter)
}

// ListChildren is one page of the entries directly under a prefix (GET
// /v1/files?delimiter=/): files and folders, within the caller's grant.
func (g *Gate) ListChildren(ctx context.Context, who agentfs.Caller, filter agentfs.ChildFilter) ([]agentfs.Child, error) {
	return gated(ctx, who, agentfs.OpListFiles, g.store.ListChildren, filter)
}

// OpenBlob opens the bytes of a blob whose key came from a read this gate
// allowed (a file, a version) or from a share link's secret
// (ResolveLink): a key names no subject, and is learned no other way.
func (g *Gate) OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return g.store.OpenBlob(ctx, key, offset, length)
}

// PresignBlob signs a GET of a blob on the S3 service's public endpoint,
// for a key learned as OpenBlob's is; nil, nil when no public endpoint is
// configured (the bytes then stream through AgentFS).
func (g *Gate) PresignBlob(ctx context.Context, key, filePath, contentType string) (*agentfs.BlobLink, error) {
	link, err := g.store.PresignBlob(ctx, key, filePath, contentType)
	if errors.Is(err, storage.ErrNoPublicEndpoint) {
		return nil, nil
	}
	return link, err
}

// Versions is one page of a file's versions (GET /v1/files/{id}/versions).
func (g *Gate) Versions(ctx context.Context, who agentfs.Caller, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error) {
	ctx, err := allow(ctx, who, agentfs.OpListVersions)
	if err != nil {
		return nil, err
	}
	return g.store.Versions(ctx, who.Subject, fileID, filter)
}

// Version is one version of a file with the file (GET
// /v1/files/{id}/versions/{n}).
func (g *Gate) Version(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetVersion)
	if err != nil {
		return nil, nil, err
	}
	return g.version(ctx, who, fileID, n)
}

// VersionContent is one version of a file with the file, for its bytes
// (GET /v1/files/{id}/versions/{n}/content): any version kept, also of a
// deleted file; a blocked file is a *agentfs.BlockedError.
func (g *Gate) VersionContent(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	ctx, err := allow(ctx, who, agentfs.OpReadContent)
	if err != nil {
		return nil, nil, err
	}
	f, v, err := g.version(ctx, who, fileID, n)
	if err == nil && f.Blocked {
		return nil, nil, &agentfs.BlockedError{FileID: f.ID, Reason: f.BlockReason}
	}
	return f, v, err
}

// version is a file and its version n, in one statement.
func (g *Gate) version(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	return g.store.FileVersion(ctx, who.Subject, fileID, n)
}

// Links lists a file's share links, without their secrets (GET
// /v1/files/{id}/links).
func (g *Gate) Links(ctx context.Context, who agentfs.Caller, fileID string) ([]*agentfs.Link, error) {
	return gated(ctx, who, agentfs.OpListLinks, g.store.Links, fileID)
}

// ResolveLink is what a share link's secret shares (GET /s/{secret}): the
// secret is its own authority, no caller's.
func (g *Gate) ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error) {
	return g.store.ResolveLink(ctx, secret)
}

// Upload is one of the caller's upload sessions, with its file once
// completed (GET /v1/uploads/{id}).
func (g *Gate) Upload(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Upload, *agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetUpload)
	if err != nil {
		return nil, nil, err
	}
	u, err := g.store.Upload(ctx, who.Subject, id)
	if err != nil || u.FileID == "" {
		return u, nil, err
	}
	f, err := g.store.File(ctx, u.Subject, u.FileID)
	return u, f, err
}

// ListUploads is one page of the caller's upload sessions (GET
// /v1/uploads).
func (g *Gate) ListUploads(ctx context.Context, who agentfs.Caller, filter agentfs.UploadFilter) ([]*agentfs.Upload, error) {
	return gated(ctx, who, agentfs.OpListUploads, g.store.ListUploads, filter)
}

// Batch is one of the caller's batches with every item's outcome and the
// files its items left (GET /v1/batch/{id}); files is nil when they could
// not be loaded (logged), the batch is still shown.
func (g *Gate) Batch(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Batch, map[string]*agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetBatch)
	if err != nil {
		return nil, nil, err
	}
	return g.batch(ctx, who, id, 0)
}

// AwaitBatch is Batch once the batch is terminal, or as it is when wait
// has passed (GET /v1/batch/{id}?wait=N).
func (g *Gate) AwaitBatch(ctx context.Context, who agentfs.Caller, id string, wait time.Duration) (*agentfs.Batch, map[string]*agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetBatch)
	if err != nil {
		return nil, nil, err
	}
	return g.batch(ctx, who, id, wait)
}

func (g *Gate) batch(ctx context.Context, who agentfs.Caller, id string, wait time.Duration) (*agentfs.Batch, map[string]*agentfs.File, error) {
	b, err := g.store.AwaitBatch(ctx, who.Subject, id, wait)
	if err != nil {
		return nil, nil, err
	}
	files, err := g.store.BatchFiles(ctx, b)
	if err != nil {
		g.log.WarnContext(ctx, "load batch result files", "batch_id", b.ID, "err", err)
	}
	return b, files, nil
}

// ListBatches is one page of the caller's batches, without items (GET
// /v1/batch).
func (g *Gate) ListBatches(ctx context.Context, who agentfs.Caller, filter agentfs.BatchFilter) ([]*agentfs.Batch, error) {
	return gated(ctx, who, agentfs.OpListBatches, g.store.ListBatches, filter)
}

// Operation is what one of the caller's idempotency keys holds (GET
// /v1/operations/{key}), or agentfs.ErrNotFound.
func (g *Gate) Operation(ctx context.Context, who agentfs.Caller, key string) (*idempotency.Record, error) {
	return gated(ctx, who, agentfs.OpGetOperation, g.store.Operation, key)
}

// AwaitEvents is a page of the caller's events, held up to wait for one
// that matches (GET /v1/events).
func (g *Gate) AwaitEvents(ctx context.Context, who agentfs.Caller, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error) {
	ctx, err := allow(ctx, who, agentfs.OpListEvents)
	if err != nil {
		return nil, agentfs.EventCursor{}, err
	}
	return g.store.AwaitEvents(ctx, who.Subject, filter, wait)
}

// EventsStart is the cursor at the end of the caller's events (after=now).
func (g *Gate) EventsStart(ctx context.Context, who agentfs.Caller) (agentfs.EventCursor, error) {
	ctx, err := allow(ctx, who, agentfs.OpListEvents)
	if err != nil {
		return agentfs.EventCursor{}, err
	}
	return g.store.EventsStart(ctx, who.Subject)
}

// RunSummary is what one of the caller's runs did (GET /v1/runs/{run_id}).
func (g *Gate) RunSummary(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error) {
	return gated(ctx, who, agentfs.OpGetRun, g.store.RunSummary, runID)
}

// ListRuns is a page of the caller's runs, newest activity first (GET
// /v1/runs), before a feed position (0: from the newest).
func (g *Gate) ListRuns(ctx context.Context, who agentfs.Caller, before int64, limit int) ([]*agentfs.RunSummary, error) {
	ctx, err := allow(ctx, who, agentfs.OpListRuns)
	if err != nil {
		return nil, err
	}
	return g.store.ListRuns(ctx, who.Subject, before, limit)
}

// Draining is closed when the server shuts down: a stream of events
// ends on it instead of holding the shutdown.
func (g *Gate) Draining() <-chan struct{} { return g.store.Draining() }

// RunArchive is the run whose files GET /v1/runs/{run_id}/archive streams
// (agentfs.ErrNotFound for a run no event names); its files are listed
// with ListFiles.
func (g *Gate) RunArchive(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error) {
	return gated(ctx, who, agentfs.OpRunArchive, g.store.RunSummary, runID)
}

// Search is one page of a content search of the caller's files (GET
// /v1/search, the grep_files tool), after the page whose next cursor is
// cursor ("" for the first); next is this page's ("" on the last). A
// cursor is honoured only for the subject and search it came from
// (agentfs.SearchTag). The grant's path prefixes are handed to the store
// as q.Within, before the tag is taken (the store keeps every match
// inside them, in its SQL), so a cursor never carries one token's search
// to another's reach.
func (g *Gate) Search(ctx context.Context, who agentfs.Caller, q agentfs.Search, cursor string) (page *agentfs.SearchPage, next string, err error) {
	ctx, err = allow(ctx, who, agentfs.OpSearch)
	if err != nil {
		return nil, "", err
	}
	q.Within = who.Grant.Prefixes
	tag := agentfs.SearchTag(who.Subject, q)
	if cursor != "" {
		if q.After, err = agentfs.ParseSearchCursor(cursor, tag); err != nil {
			return nil, "", err
		}
	}
	page, err = g.store.Search(ctx, who.Subject, q)
	if err != nil {
		return nil, "", err
	}
	if page.Next != nil {
		page.Next.Tag = tag
		next = page.Next.String()
	}
	return page, next, nil
}

// maxTokens is how many tokens GET /v1/tokens lists: a token and its
// descendants, more than any delegation tree should hold.
const maxTokens = 1000

// Tokens lists the caller's token and every token descended from it,
// oldest first, without secrets (GET /v1/tokens).
func (g *Gate) Tokens(ctx context.Context, who agentfs.Caller) ([]*agentfs.Token, error) {
	ctx, err := allow(ctx, who, agentfs.OpListTokens)
	if err != nil {
		return nil, err
	}
	return g.store.Tokens(ctx, who.Subject, who.TokenID, nil, maxTokens)
}

// Token is the caller's token id when it is the caller's own or one of its
// descendants (GET /v1/tokens/{id}); any other is agentfs.ErrNotFound.
func (g *Gate) Token(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Token, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetToken)
	if err != nil {
		return nil, err
	}
	return g.store.Token(ctx, who.Subject, who.TokenID, id)
}
