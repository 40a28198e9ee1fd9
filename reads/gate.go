// Package reads is the read path: every read a door serves (a REST route,
// an MCP tool of the /mcp door) passes through one Gate, which refuses a
// caller whose token may not make the read (agentfs.Caller.Allow against
// the operation table: 403 FORBIDDEN) before the store is asked, and asks
// the store as the caller's subject. It is the one place where a grant's
// path prefixes are to filter what a caller sees, as the admission core is
// for writes.
package reads

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
)

// Store is what the gate reads: the storage of one AgentFS, by subject.
type Store interface {
	File(ctx context.Context, subject, id string) (*agentfs.File, error)
	ListFiles(ctx context.Context, subject string, filter agentfs.FileFilter) ([]*agentfs.File, error)
	OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	Versions(ctx context.Context, subject, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error)
	Version(ctx context.Context, subject, fileID string, n int) (*agentfs.FileVersion, error)
	Links(ctx context.Context, subject, fileID string) ([]*agentfs.Link, error)
	ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error)
	Upload(ctx context.Context, subject, id string) (*agentfs.Upload, error)
	ListUploads(ctx context.Context, subject string, filter agentfs.UploadFilter) ([]*agentfs.Upload, error)
	Batch(ctx context.Context, subject, id string) (*agentfs.Batch, error)
	BatchFiles(ctx context.Context, b *agentfs.Batch) (map[string]*agentfs.File, error)
	ListBatches(ctx context.Context, subject string, filter agentfs.BatchFilter) ([]*agentfs.Batch, error)
	Operation(ctx context.Context, subject, key string) (*idempotency.Record, error)
	AwaitEvents(ctx context.Context, subject string, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error)
	EventsStart(ctx context.Context, subject string) (agentfs.EventCursor, error)
	RunSummary(ctx context.Context, subject, runID string) (*agentfs.RunSummary, error)
	PointStore
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
	if err := who.Allow(agentfs.OpGetFile); err != nil {
		return nil, err
	}
	return g.store.File(ctx, who.Subject, id)
}

// Content is a live file of the caller's, for its bytes (GET
// /v1/files/{id}/content): a deleted one is agentfs.ErrNotFound, a blocked
// one a *agentfs.BlockedError. Its blob is opened with OpenBlob.
func (g *Gate) Content(ctx context.Context, who agentfs.Caller, id string) (*agentfs.File, error) {
	if err := who.Allow(agentfs.OpReadContent); err != nil {
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

// ListFiles is one page of the caller's files (GET /v1/files).
func (g *Gate) ListFiles(ctx context.Context, who agentfs.Caller, filter agentfs.FileFilter) ([]*agentfs.File, error) {
	if err := who.Allow(agentfs.OpListFiles); err != nil {
		return nil, err
	}
	return g.store.ListFiles(ctx, who.Subject, filter)
}

// OpenBlob opens the bytes of a blob whose key came from a read this gate
// allowed (a file, a version) or from a share link's secret
// (ResolveLink): a key names no subject, and is learned no other way.
func (g *Gate) OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return g.store.OpenBlob(ctx, key, offset, length)
}

// Versions is one page of a file's versions (GET /v1/files/{id}/versions).
func (g *Gate) Versions(ctx context.Context, who agentfs.Caller, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error) {
	if err := who.Allow(agentfs.OpListVersions); err != nil {
		return nil, err
	}
	return g.store.Versions(ctx, who.Subject, fileID, filter)
}

// Version is one version of a file with the file (GET
// /v1/files/{id}/versions/{n}).
func (g *Gate) Version(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	if err := who.Allow(agentfs.OpGetVersion); err != nil {
		return nil, nil, err
	}
	return g.version(ctx, who, fileID, n)
}

// VersionContent is one version of a file with the file, for its bytes
// (GET /v1/files/{id}/versions/{n}/content): any version kept, also of a
// deleted file; a blocked file is a *agentfs.BlockedError.
func (g *Gate) VersionContent(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	if err := who.Allow(agentfs.OpReadContent); err != nil {
		return nil, nil, err
	}
	f, v, err := g.version(ctx, who, fileID, n)
	if err == nil && f.Blocked {
		return nil, nil, &agentfs.BlockedError{FileID: f.ID, Reason: f.BlockReason}
	}
	return f, v, err
}

func (g *Gate) version(ctx context.Context, who agentfs.Caller, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	f, err := g.store.File(ctx, who.Subject, fileID)
	if err != nil {
		return nil, nil, err
	}
	v, err := g.store.Version(ctx, who.Subject, f.ID, n)
	return f, v, err
}

// Links lists a file's share links, without their secrets (GET
// /v1/files/{id}/links).
func (g *Gate) Links(ctx context.Context, who agentfs.Caller, fileID string) ([]*agentfs.Link, error) {
	if err := who.Allow(agentfs.OpListLinks); err != nil {
		return nil, err
	}
	return g.store.Links(ctx, who.Subject, fileID)
}

// ResolveLink is what a share link's secret shares (GET /s/{secret}): the
// secret is its own authority, no caller's.
func (g *Gate) ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error) {
	return g.store.ResolveLink(ctx, secret)
}

// Upload is one of the caller's upload sessions, with its file once
// completed (GET /v1/uploads/{id}).
func (g *Gate) Upload(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Upload, *agentfs.File, error) {
	if err := who.Allow(agentfs.OpGetUpload); err != nil {
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
	if err := who.Allow(agentfs.OpListUploads); err != nil {
		return nil, err
	}
	return g.store.ListUploads(ctx, who.Subject, filter)
}

// Batch is one of the caller's batches with every item's outcome and the
// files its items left (GET /v1/batch/{id}); files is nil when they could
// not be loaded (logged), the batch is still shown.
func (g *Gate) Batch(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Batch, map[string]*agentfs.File, error) {
	if err := who.Allow(agentfs.OpGetBatch); err != nil {
		return nil, nil, err
	}
	b, err := g.store.Batch(ctx, who.Subject, id)
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
	if err := who.Allow(agentfs.OpListBatches); err != nil {
		return nil, err
	}
	return g.store.ListBatches(ctx, who.Subject, filter)
}

// Operation is what one of the caller's idempotency keys holds (GET
// /v1/operations/{key}), or agentfs.ErrNotFound.
func (g *Gate) Operation(ctx context.Context, who agentfs.Caller, key string) (*idempotency.Record, error) {
	if err := who.Allow(agentfs.OpGetOperation); err != nil {
		return nil, err
	}
	return g.store.Operation(ctx, who.Subject, key)
}

// AwaitEvents is a page of the caller's events, held up to wait for one
// that matches (GET /v1/events).
func (g *Gate) AwaitEvents(ctx context.Context, who agentfs.Caller, filter agentfs.EventFilter, wait time.Duration) ([]*agentfs.Event, agentfs.EventCursor, error) {
	if err := who.Allow(agentfs.OpListEvents); err != nil {
		return nil, agentfs.EventCursor{}, err
	}
	return g.store.AwaitEvents(ctx, who.Subject, filter, wait)
}

// EventsStart is the cursor at the end of the caller's events (after=now).
func (g *Gate) EventsStart(ctx context.Context, who agentfs.Caller) (agentfs.EventCursor, error) {
	if err := who.Allow(agentfs.OpListEvents); err != nil {
		return agentfs.EventCursor{}, err
	}
	return g.store.EventsStart(ctx, who.Subject)
}

// RunSummary is what one of the caller's runs did (GET /v1/runs/{run_id}).
func (g *Gate) RunSummary(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error) {
	if err := who.Allow(agentfs.OpGetRun); err != nil {
		return nil, err
	}
	return g.store.RunSummary(ctx, who.Subject, runID)
}

// RunArchive is the run whose files GET /v1/runs/{run_id}/archive streams
// (agentfs.ErrNotFound for a run no event names); its files are listed
// with ListFiles.
func (g *Gate) RunArchive(ctx context.Context, who agentfs.Caller, runID string) (*agentfs.RunSummary, error) {
	if err := who.Allow(agentfs.OpRunArchive); err != nil {
		return nil, err
	}
	return g.store.RunSummary(ctx, who.Subject, runID)
}
