package admission

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
)

// CreateFork copies the caller's files under req.From, as they were at
// req.AsOf, to req.To (POST /v1/forks): 201 with the fork. Both prefixes
// are paths the write touches, so a grant must cover both.
func (c *Core) CreateFork(ctx context.Context, who agentfs.Caller, req agentfs.NewFork) (idempotency.Result, error) {
	req.Subject, req.By = who.Subject, who.By
	e := &createFork{withRequest(c, req, who)}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/forks", agentfs.OpCreateFork, req.To, who,
		map[string]any{"from": req.From, "to": req.To, "as_of": req.AsOf.Raw})
	e.adm.paths = []string{req.From, req.To}
	return c.run(ctx, who, e)
}

// createFork makes a fork.
type createFork struct{ onRequest[agentfs.NewFork] }

func (e *createFork) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	p, err := e.c.store.ResolvePoint(ctx, e.req.Subject, e.req.AsOf)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	f, err := e.c.store.CreateForkTx(ctx, tx, e.req, p, e.origin)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	out := outcome(http.StatusCreated, render.Fork(f), "fork", f.ID)
	out.Header["Location"] = "/v1/forks/" + f.ID
	return out, nil
}

// Merge merges the caller's fork back into its source (POST
// /v1/forks/{id}/merge): 200 with the merge, every change in one
// transaction, or 409 MERGE_CONFLICT listing every conflict with nothing
// applied. The fork's prefixes are the paths it touches, so the caller's
// grant must cover both; a fork outside its reach is 404.
func (c *Core) Merge(ctx context.Context, who agentfs.Caller, req agentfs.MergeRequest) (idempotency.Result, error) {
	req.Subject, req.By = who.Subject, who.By
	if req.OnConflict == "" {
		req.OnConflict = agentfs.OnConflictFail
	}
	// The scopes first: the fork is looked up (for the paths the grant
	// checks) before any key is claimed, and a caller that may not merge
	// must not learn from a 404 which forks exist.
	if err := who.Allow(agentfs.OpMerge); err != nil {
		return idempotency.Result{}, err
	}
	fork, err := c.store.Fork(within(ctx, who), who.Subject, req.ForkID)
	if err != nil {
		return idempotency.Result{}, err
	}
	e := &mergeFork{withRequest(c, req, who)}
	e.named = named{admission{method: http.MethodPost, route: "/v1/forks/:id/merge",
		request: idempotency.Request{Operation: agentfs.OpMerge, Target: req.ForkID, MediaType: "application/json",
			Params: map[string]string{"on_conflict": req.OnConflict}, By: who.By},
		paths: []string{fork.From, fork.To}}}
	e.fixed = jsonContent(map[string]any{"on_conflict": req.OnConflict, "dry_run": false})
	return c.run(ctx, who, e)
}

// PlanMerge is what Merge would do now, changing nothing (dry_run).
func (c *Core) PlanMerge(ctx context.Context, who agentfs.Caller, req agentfs.MergeRequest) (*agentfs.Merge, error) {
	if err := who.Allow(agentfs.OpMerge); err != nil {
		return nil, err
	}
	req.Subject = who.Subject
	return c.store.PlanMerge(within(ctx, who), req)
}

// mergeFork merges a fork.
type mergeFork struct {
	onRequest[agentfs.MergeRequest]
}

func (e *mergeFork) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	m, err := e.c.store.MergeTx(ctx, tx, e.req, e.origin)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return outcome(http.StatusOK, render.Merge(e.req.Subject, m), "merge", m.ForkID+":"+strconv.FormatInt(m.Base.Position, 10)), nil
}

// DeleteFork forgets a fork (DELETE /v1/forks/{id}); its files stay, and
// repeating it is safe: an unknown fork is 404.
func (c *Core) DeleteFork(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, &deleteFork{c.byID(http.MethodDelete, "/v1/forks/:id", agentfs.OpDeleteFork, id, who)})
}

// deleteFork forgets a fork.
type deleteFork struct{ onID }

func (e *deleteFork) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	f, err := e.c.store.DeleteForkTx(ctx, tx, e.who.Subject, e.id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return outcome(http.StatusOK, render.Fork(f), "fork", f.ID), nil
}
