package admission

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
)

// CreateCheckpoint makes a checkpoint of the caller's present (POST
// /v1/checkpoints): 201 with it. Its cost is one row and one event
// whatever the number of files; a name the subject already uses is 409
// CHECKPOINT_EXISTS, recorded under the key.
func (c *Core) CreateCheckpoint(ctx context.Context, who agentfs.Caller, req agentfs.NewCheckpoint) (idempotency.Result, error) {
	req.Subject, req.By = who.Subject, who.By
	e := &createCheckpoint{withRequest(c, req, who)}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/checkpoints", agentfs.OpCreateCheckpoint, req.Name, who,
		map[string]any{"name": req.Name, "prefix": req.Prefix, "note": req.Note})
	// A checkpoint keeps the versions under its prefix: a grant must cover
	// it (no prefix: every path), as for a write there.
	e.adm.paths = []string{req.Prefix}
	return c.run(ctx, who, e)
}

// createCheckpoint makes a checkpoint.
type createCheckpoint struct {
	onRequest[agentfs.NewCheckpoint]
}

func (e *createCheckpoint) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	cp, err := e.c.store.CreateCheckpointTx(ctx, tx, e.req, e.origin)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	out := outcome(http.StatusCreated, render.Checkpoint(cp), "checkpoint", cp.ID)
	out.Header["Location"] = "/v1/checkpoints/" + cp.ID
	return out, nil
}

// DeleteCheckpoint forgets a checkpoint by id or name (DELETE
// /v1/checkpoints/{id_or_name}); repeating it is safe: an unknown one is
// 404 and changes nothing, as is one whose prefix lies outside the
// caller's grant.
func (c *Core) DeleteCheckpoint(ctx context.Context, who agentfs.Caller, idOrName string) (idempotency.Result, error) {
	return c.run(ctx, who, &deleteCheckpoint{c.byID(http.MethodDelete, "/v1/checkpoints/:id", agentfs.OpDeleteCheckpoint, idOrName, who)})
}

// deleteCheckpoint forgets a checkpoint; its id is the id or the name.
type deleteCheckpoint struct{ onID }

func (e *deleteCheckpoint) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	cp, err := e.c.store.DeleteCheckpointTx(ctx, tx, e.who.Subject, e.id, agentfs.OriginOf(e.who))
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return outcome(http.StatusOK, render.Checkpoint(cp), "checkpoint", cp.ID), nil
}
