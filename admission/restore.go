package admission

import (
	"context"
	"net/http"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
)

// RestorePoint puts the caller's files under req.Prefix back to their state at
// req.To (POST /v1/restore; the key is required): a durable batch with one
// item per file that differs, planned from the diff between the point and
// now when the key is first claimed (202 with the batch). Each item is
// conditional on its file not changing after the plan (412
// PRECONDITION_FAILED unless force). A replay answers the batch's current
// state (200).
func (c *Core) RestorePoint(ctx context.Context, who agentfs.Caller, req agentfs.RestoreRequest) (idempotency.Result, error) {
	e := &queueBatch{c: c, who: who,
		plan: func(ctx context.Context) ([]agentfs.BatchItem, error) {
			items, _, err := c.planRestore(ctx, who, req)
			return items, err
		},
	}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/restore", agentfs.OpRestorePoint, req.Prefix, who,
		map[string]any{"prefix": req.Prefix, "to": req.To.Raw, "force": req.Force})
	return c.run(ctx, who, e)
}

// PlanRestorePoint is what RestorePoint would do now, changing nothing
// (POST /v1/restore with dry_run): the changes since the point it would
// undo, in the order its items would run, and the point.
func (c *Core) PlanRestorePoint(ctx context.Context, who agentfs.Caller, req agentfs.RestoreRequest) ([]agentfs.Change, agentfs.Point, error) {
	if err := who.Allow(agentfs.OpRestorePoint); err != nil {
		return nil, agentfs.Point{}, err
	}
	to, err := c.store.ResolvePoint(ctx, who.Subject, req.To)
	if err != nil {
		return nil, to, err
	}
	_, changes, err := c.planFrom(ctx, who, to, req)
	return changes, to, err
}

func (c *Core) planRestore(ctx context.Context, who agentfs.Caller, req agentfs.RestoreRequest) ([]agentfs.BatchItem, []agentfs.Change, error) {
	to, err := c.store.ResolvePoint(ctx, who.Subject, req.To)
	if err != nil {
		return nil, nil, err
	}
	return c.planFrom(ctx, who, to, req)
}

func (c *Core) planFrom(ctx context.Context, who agentfs.Caller, to agentfs.Point, req agentfs.RestoreRequest) ([]agentfs.BatchItem, []agentfs.Change, error) {
	now, err := c.store.ResolvePoint(ctx, who.Subject, agentfs.PointSpec{Field: "to", Kind: agentfs.PointNow, Raw: "now"})
	if err != nil {
		return nil, nil, err
	}
	return c.store.RestorePlan(ctx, who.Subject, agentfs.DiffRequest{From: to, To: now, Prefix: req.Prefix}, req.Force)
}
