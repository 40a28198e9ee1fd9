package reads

import (
	"context"

	"github.com/agentfs/agentfs"
)

// PointStore is what the gate reads of points in time (DESIGN §18).
type PointStore interface {
	ResolvePoint(ctx context.Context, subject string, spec agentfs.PointSpec) (agentfs.Point, error)
	FilesAsOf(ctx context.Context, subject string, filter agentfs.AsOfFilter) ([]*agentfs.File, error)
	FileAsOf(ctx context.Context, subject, id string, p agentfs.Point) (*agentfs.File, error)
	Checkpoint(ctx context.Context, subject, idOrName string) (*agentfs.Checkpoint, error)
	ListCheckpoints(ctx context.Context, subject string, filter agentfs.CheckpointFilter) ([]*agentfs.Checkpoint, error)
	Diff(ctx context.Context, subject string, req agentfs.DiffRequest) ([]agentfs.Change, error)
}

func (g *Gate) points() PointStore { return g.store }

// Point resolves a point of the caller's history; reading at it still
// needs the read's own operation.
func (g *Gate) Point(ctx context.Context, who agentfs.Caller, spec agentfs.PointSpec) (agentfs.Point, error) {
	return g.points().ResolvePoint(ctx, who.Subject, spec)
}

// FilesAsOf is one page of the caller's files live at a point, in path
// order (GET /v1/files?as_of=).
func (g *Gate) FilesAsOf(ctx context.Context, who agentfs.Caller, spec agentfs.PointSpec, filter agentfs.AsOfFilter) ([]*agentfs.File, agentfs.Point, error) {
	ctx, err := allow(ctx, who, agentfs.OpListFiles)
	if err != nil {
		return nil, agentfs.Point{}, err
	}
	p, err := g.Point(ctx, who, spec)
	if err != nil {
		return nil, p, err
	}
	filter.Point = p
	files, err := g.points().FilesAsOf(ctx, who.Subject, filter)
	return files, p, err
}

// FileAsOf is one of the caller's files as it was at a point (GET
// /v1/files/{id}?as_of=): agentfs.ErrNotFound when it was not live then.
func (g *Gate) FileAsOf(ctx context.Context, who agentfs.Caller, id string, spec agentfs.PointSpec) (*agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetFile)
	if err != nil {
		return nil, err
	}
	return g.fileAsOf(ctx, who, id, spec)
}

// ContentAsOf is a file as it was at a point, for its bytes (GET
// /v1/files/{id}/content?as_of=); a file blocked now is refused as its
// current content is.
func (g *Gate) ContentAsOf(ctx context.Context, who agentfs.Caller, id string, spec agentfs.PointSpec) (*agentfs.File, error) {
	ctx, err := allow(ctx, who, agentfs.OpReadContent)
	if err != nil {
		return nil, err
	}
	f, err := g.fileAsOf(ctx, who, id, spec)
	if err == nil && f.Blocked {
		return nil, &agentfs.BlockedError{FileID: f.ID, Reason: f.BlockReason}
	}
	return f, err
}

func (g *Gate) fileAsOf(ctx context.Context, who agentfs.Caller, id string, spec agentfs.PointSpec) (*agentfs.File, error) {
	p, err := g.Point(ctx, who, spec)
	if err != nil {
		return nil, err
	}
	return g.points().FileAsOf(ctx, who.Subject, id, p)
}

// Checkpoint is one of the caller's checkpoints, by id or name.
func (g *Gate) Checkpoint(ctx context.Context, who agentfs.Caller, idOrName string) (*agentfs.Checkpoint, error) {
	ctx, err := allow(ctx, who, agentfs.OpGetCheckpoint)
	if err != nil {
		return nil, err
	}
	return g.points().Checkpoint(ctx, who.Subject, idOrName)
}

// ListCheckpoints is one page of the caller's checkpoints, newest first.
func (g *Gate) ListCheckpoints(ctx context.Context, who agentfs.Caller, filter agentfs.CheckpointFilter) ([]*agentfs.Checkpoint, error) {
	ctx, err := allow(ctx, who, agentfs.OpListCheckpoints)
	if err != nil {
		return nil, err
	}
	return g.points().ListCheckpoints(ctx, who.Subject, filter)
}

// Diff is what changed under a prefix between two points of the caller's
// history, by path (GET /v1/diff).
func (g *Gate) Diff(ctx context.Context, who agentfs.Caller, from, to agentfs.PointSpec, req agentfs.DiffRequest) ([]agentfs.Change, error) {
	ctx, err := allow(ctx, who, agentfs.OpDiff)
	if err != nil {
		return nil, err
	}
	if req.Content {
		if err := who.Allow(agentfs.OpReadContent); err != nil {
			return nil, err
		}
	}
	if req.From, err = g.Point(ctx, who, from); err != nil {
		return nil, err
	}
	if req.To, err = g.Point(ctx, who, to); err != nil {
		return nil, err
	}
	return g.points().Diff(ctx, who.Subject, req)
}
