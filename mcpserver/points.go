package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
	"github.com/agentfs/agentfs/textdiff"
)

// PointsBackend is what the tools of points in time need (DESIGN §18):
// checkpoints, diffs and restores.
type PointsBackend interface {
	// Checkpoint names the present as a point.
	Checkpoint(ctx context.Context, name, prefix, note string) (*Checkpoint, error)
	// Checkpoints lists checkpoints of a prefix, newest first (one page).
	Checkpoints(ctx context.Context, prefix string) ([]Checkpoint, error)
	// Diff is what changed between two points under prefix (one page of
	// at most 1000 changes), with its patch.
	Diff(ctx context.Context, from, to, prefix string) (*DiffResult, error)
	// RestorePoint puts prefix back to the point to (waiting, within
	// restoreWait, for the batch to end), or plans it with dryRun.
	RestorePoint(ctx context.Context, prefix, to string, dryRun bool) (*RestoreResult, error)
}

// Checkpoint is a checkpoint as the API shows it.
type Checkpoint = api.Checkpoint

// Change is one file that differs between two points.
type Change = api.Change

// DiffResult is the diff tool's structured output: the changes and their
// patch.
type DiffResult struct {
	Changes []Change `json:"changes"`
	HasMore bool     `json:"has_more"`
	Patch   string   `json:"patch"`
}

// RestoreResult is the restore tool's structured output: the plan (a dry
// run) or the batch that put the files back.
type RestoreResult struct {
	DryRun bool       `json:"dry_run"`
	Plan   []Change   `json:"plan,omitempty"`
	Batch  *api.Batch `json:"batch,omitempty"`
}

// restoreWait bounds how long the restore tool waits for its batch.
const restoreWait = 60 * time.Second

// diffPage is the most changes the diff tool shows.
const diffPage = 1000

// Checkpoint makes a checkpoint through the admission core.
func (b *CoreBackend) Checkpoint(ctx context.Context, name, prefix, note string) (*Checkpoint, error) {
	who, err := b.writer(ctx, "")
	if err != nil {
		return nil, err
	}
	res, err := b.Core.CreateCheckpoint(ctx, who, agentfs.NewCheckpoint{Name: name, Prefix: prefix, Note: note})
	var cp Checkpoint
	return &cp, decodeResult(res.Status, res.Body, err, &cp)
}

// decodeResult reads a write's recorded answer into v, or its problem.
func decodeResult(status int, body []byte, err error, v any) error {
	if err != nil {
		return problemOfCore(err)
	}
	if status >= 400 {
		var p problem.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("mcpserver: recorded problem: %w", err)
		}
		return problemFromAPI(&p)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("mcpserver: recorded answer: %w", err)
	}
	return nil
}

// Checkpoints lists checkpoints through the read gate.
func (b *CoreBackend) Checkpoints(ctx context.Context, prefix string) ([]Checkpoint, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	cps, err := b.Reads.ListCheckpoints(ctx, who, agentfs.CheckpointFilter{Prefix: prefix, Limit: 100})
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := make([]Checkpoint, 0, len(cps))
	for _, cp := range cps {
		out = append(out, render.Checkpoint(cp))
	}
	return out, nil
}

// Diff reads a diff and its patch through the read gate.
func (b *CoreBackend) Diff(ctx context.Context, from, to, prefix string) (*DiffResult, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	fromSpec, err := agentfs.ParsePoint("from", from, who.Subject)
	if err != nil {
		return nil, problemOfCore(err)
	}
	toSpec, err := agentfs.ParsePoint("to", cmp.Or(to, "now"), who.Subject)
	if err != nil {
		return nil, problemOfCore(err)
	}
	changes, err := b.Reads.Diff(ctx, who, fromSpec, toSpec, agentfs.DiffRequest{Prefix: prefix, Limit: diffPage + 1, Content: true})
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &DiffResult{Changes: []Change{}}
	if len(changes) > diffPage {
		changes, out.HasMore = changes[:diffPage], true
	}
	open := func(ctx context.Context, key string, size int64) (io.ReadCloser, error) {
		return b.Reads.OpenBlob(ctx, key, 0, size)
	}
	if out.Patch, err = textdiff.GitPatch(ctx, changes, open); err != nil {
		return nil, problemOfCore(err)
	}
	for _, ch := range changes {
		out.Changes = append(out.Changes, render.Change(ch))
	}
	return out, nil
}

// RestorePoint plans or runs a restore through the admission core.
func (b *CoreBackend) RestorePoint(ctx context.Context, prefix, to string, dryRun bool) (*RestoreResult, error) {
	who, err := b.writer(ctx, client.NewIdempotencyKey())
	if err != nil {
		return nil, err
	}
	spec, err := agentfs.ParsePoint("to", to, who.Subject)
	if err != nil {
		return nil, problemOfCore(err)
	}
	req := agentfs.RestoreRequest{Prefix: prefix, To: spec}
	if dryRun {
		changes, _, err := b.Core.PlanRestorePoint(ctx, who, req)
		if err != nil {
			return nil, problemOfCore(err)
		}
		out := &RestoreResult{DryRun: true, Plan: []Change{}}
		for _, ch := range changes {
			out.Plan = append(out.Plan, render.Change(ch))
		}
		return out, nil
	}
	res, err := b.Core.RestorePoint(ctx, who, req)
	var batch api.Batch
	if err := decodeResult(res.Status, res.Body, err, &batch); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(restoreWait)
	for !agentfs.TerminalBatch(batch.Status) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, problemOfCore(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		bt, files, err := b.Reads.Batch(ctx, who, batch.ID)
		if err != nil {
			return nil, problemOfCore(err)
		}
		batch = render.Batch("", bt, files)
	}
	return &RestoreResult{Batch: &batch}, nil
}

// Checkpoint makes a checkpoint (POST /v1/checkpoints).
func (cb *ClientBackend) Checkpoint(ctx context.Context, name, prefix, note string) (*Checkpoint, error) {
	key := client.NewIdempotencyKey()
	cp, err := cb.c.CreateCheckpoint(ctx, client.CheckpointOptions{Name: name, Prefix: prefix, Note: note, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return cp, nil
}

// Checkpoints lists checkpoints (GET /v1/checkpoints).
func (cb *ClientBackend) Checkpoints(ctx context.Context, prefix string) ([]Checkpoint, error) {
	l, err := cb.c.ListCheckpoints(ctx, client.CheckpointListOptions{Prefix: prefix, Limit: 100})
	if err != nil {
		return nil, problemOf(err, "")
	}
	return l.Data, nil
}

// Diff reads a diff and its patch (GET /v1/diff, twice).
func (cb *ClientBackend) Diff(ctx context.Context, from, to, prefix string) (*DiffResult, error) {
	opts := client.DiffOptions{To: to, Prefix: prefix, Limit: diffPage}
	d, err := cb.c.Diff(ctx, from, opts)
	if err != nil {
		return nil, problemOf(err, "")
	}
	patch, err := cb.c.DiffPatch(ctx, from, opts)
	if err != nil {
		return nil, problemOf(err, "")
	}
	return &DiffResult{Changes: d.Data, HasMore: d.HasMore, Patch: patch}, nil
}

// RestorePoint plans or runs a restore (POST /v1/restore).
func (cb *ClientBackend) RestorePoint(ctx context.Context, prefix, to string, dryRun bool) (*RestoreResult, error) {
	if dryRun {
		p, err := cb.c.PlanRestore(ctx, prefix, to)
		if err != nil {
			return nil, problemOf(err, "")
		}
		return &RestoreResult{DryRun: true, Plan: p.Items}, nil
	}
	key := client.NewIdempotencyKey()
	b, err := cb.c.Restore(ctx, prefix, to, client.RestorePointOptions{IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	wctx, cancel := context.WithTimeout(ctx, restoreWait)
	defer cancel()
	if done, err := cb.c.WaitBatch(wctx, b.ID); err == nil {
		b = done
	}
	return &RestoreResult{Batch: b}, nil
}

// asOfKey carries the point a read tool reads at (its as_of argument)
// down to the backend calls it makes.
type asOfKey struct{}

// withAsOf is ctx reading at point ("": the present).
func withAsOf(ctx context.Context, point string) context.Context {
	if point == "" {
		return ctx
	}
	return context.WithValue(ctx, asOfKey{}, point)
}

// asOfIn is the point ctx reads at ("" for the present).
func asOfIn(ctx context.Context) string {
	p, _ := ctx.Value(asOfKey{}).(string)
	return p
}

// listAsOf is one page of the files live at f.AsOf through the read gate,
// in path order; the cursor is the last path.
func (b *CoreBackend) listAsOf(ctx context.Context, who agentfs.Caller, f ListFilter) (*FileList, error) {
	spec, err := agentfs.ParsePoint("as_of", f.AsOf, who.Subject)
	if err != nil {
		return nil, problemOfCore(err)
	}
	prefix := cmp.Or(f.Path, f.Prefix)
	files, _, err := b.Reads.FilesAsOf(ctx, who, spec, agentfs.AsOfFilter{Prefix: prefix, After: f.Cursor, Limit: f.Limit + 1})
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &FileList{Files: []File{}}
	if len(files) > f.Limit {
		files, out.HasMore = files[:f.Limit], true
		out.NextCursor = files[len(files)-1].Path
	}
	for _, file := range files {
		if f.Path == "" || file.Path == f.Path {
			out.Files = append(out.Files, *fileOfDomain(b.Core, file))
		}
	}
	return out, nil
}
