package admission

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// CreateBatch stores and queues a batch (POST /v1/batch; the key is
// required): 202 with the batch. raw is the request body, whose canonical
// form is the batch's content. With wait, it answers once the batch ended
// or wait passed. A replay answers the batch's current state (200).
func (c *Core) CreateBatch(ctx context.Context, who agentfs.Caller, b *agentfs.Batch, raw []byte, wait time.Duration) (idempotency.Result, error) {
	content, err := idempotency.JSONContentHash(raw)
	if err != nil {
		return idempotency.Result{}, problem.Invalid("body", "malformed JSON")
	}
	b.Subject, b.By, b.RequestID = who.Subject, who.By, who.RequestID
	heldTo(b, who)
	return c.run(ctx, who, &queueBatch{c: c, who: who, wait: wait, b: b,
		named: named{admission{method: http.MethodPost, route: "/v1/batch",
			request: idempotency.Request{Operation: agentfs.OpBatch, MediaType: "application/json", By: who.By}}},
		fixed: fixed{sum: content}})
}

// heldTo records with b the grant of who, its creator, which each of its
// items is held to when it runs (batchCaller).
func heldTo(b *agentfs.Batch, who agentfs.Caller) {
	b.TokenID, b.Prefixes, b.MaxBytes = who.TokenID, who.Grant.Prefixes, who.Grant.MaxBytes
}

// queueBatch stores a batch and puts it on the durable queue in one
// transaction, so it runs once that commits and never otherwise. A run
// revert is such a batch, planned in the same transaction.
type queueBatch struct {
	named
	fixed
	c    *Core
	who  agentfs.Caller
	wait time.Duration
	b    *agentfs.Batch
	// undo, when set, is the run whose revert the batch is: its items are
	// planned in the transaction.
	undo  string
	force bool
	// plan, when set, plans the batch's items in the transaction (a
	// restore to a point).
	plan func(ctx context.Context) ([]agentfs.BatchItem, error)
}

func (e *queueBatch) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	b := e.b
	if e.undo != "" {
		items, err := e.c.store.RunUndoPlan(ctx, tx, e.who.Subject, e.undo, e.force)
		if err != nil {
			return idempotency.Outcome{}, err
		}
		b = &agentfs.Batch{Subject: e.who.Subject, By: e.who.By, RequestID: e.who.RequestID, Items: items}
		heldTo(b, e.who)
	}
	if e.plan != nil {
		items, err := e.plan(ctx)
		if err != nil {
			return idempotency.Outcome{}, err
		}
		b = &agentfs.Batch{Subject: e.who.Subject, By: e.who.By, RequestID: e.who.RequestID, Items: items}
	}
	created, err := e.c.store.CreateBatchTx(ctx, tx, b)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	if err := e.c.queue.Enqueue(ctx, tx, created.ID); err != nil {
		return idempotency.Outcome{}, err
	}
	return e.c.batchOutcome(created, nil, http.StatusAccepted), nil
}

func (e *queueBatch) follow(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
	if e.wait <= 0 {
		return out, nil
	}
	return e.c.awaitBatch(ctx, e.who.Subject, out.Resource.ID, e.wait, http.StatusAccepted)
}

func (e *queueBatch) current(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error) {
	return e.c.awaitBatch(ctx, e.who.Subject, rec.Outcome.Resource.ID, e.wait, http.StatusOK)
}

// RevertRun undoes a run (POST /v1/runs/{run_id}/revert; the key is
// required): a durable batch with one item per file the run changed, the
// newest change first, each bringing its file back to its state before the
// run (202 with the batch). A file another run changed after this run fails
// its item with CHANGED_SINCE_RUN unless force. The undo's own events carry
// the caller's run id, so a revert can be reverted in turn. A replay answers
// the batch's current state (200).
func (c *Core) RevertRun(ctx context.Context, who agentfs.Caller, runID string, force bool) (idempotency.Result, error) {
	e := &queueBatch{c: c, who: who, undo: runID, force: force}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/runs/:run_id/revert", agentfs.OpRevertRun, runID, who,
		map[string]any{"force": force})
	return c.run(ctx, who, e)
}

// PlanRevertRun is what RevertRun would do now, changing nothing (POST
// /v1/runs/{run_id}/revert with dry_run): its items, newest change first,
// held to the caller's reach as the revert's own plan is.
func (c *Core) PlanRevertRun(ctx context.Context, who agentfs.Caller, runID string, force bool) ([]agentfs.BatchItem, error) {
	if err := who.Allow(agentfs.OpRevertRun); err != nil {
		return nil, err
	}
	return c.store.PlanRunUndo(within(ctx, who), who.Subject, runID, force)
}

// undoFile is the item of a run revert (OpUndo: undo the run on one file)
// and of a restore (OpRestoreTo: bring one file back to its state at a
// point). Both write one file in the core's transaction, conditional on what
// was planned, and answer the file as it is after.
type undoFile struct {
	named
	fixed
	c       *Core
	subject string
	fileID  string
	u       agentfs.Undo
	origin  agentfs.Origin
	toPoint bool
}

func (c *Core) undoFile(who agentfs.Caller, op, fileID string, u agentfs.Undo, o agentfs.Origin) *undoFile {
	route, params := "/v1/runs/:run_id/revert", map[string]string{"run_id": u.RunID}
	if op == agentfs.OpRestoreTo {
		route, params = "/v1/restore", map[string]string{"after": strconv.FormatInt(u.After, 10)}
	}
	params["force"] = strconv.FormatBool(u.Force)
	return &undoFile{c: c, subject: who.Subject, fileID: fileID, u: u, origin: o, toPoint: op == agentfs.OpRestoreTo,
		named: named{admission{method: http.MethodPost, route: route,
			request: idempotency.Request{Operation: op, Target: fileID, Params: params, By: who.By},
			paths:   []string{u.Path}}}}
}

func (e *undoFile) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	undo := e.c.store.UndoTx
	if e.toPoint {
		undo = e.c.store.RestoreToTx
	}
	f, err := undo(ctx, tx, e.subject, e.fileID, e.u, e.origin)
	return e.c.changedFile(f, false, err)
}

// CancelBatch cancels a batch's pending items (POST /v1/batch/{id}/cancel):
// 200 with the batch, canceled; an item already committing finishes first.
// Cancelling a batch that ended answers it unchanged.
func (c *Core) CancelBatch(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, &cancelBatch{c.byID(http.MethodPost, "/v1/batch/:id/cancel", agentfs.OpCancelBatch, id, who)})
}

// cancelBatch cancels a batch's pending items.
type cancelBatch struct{ onID }

func (e *cancelBatch) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	b, err := e.c.store.CancelBatchTx(ctx, tx, e.who.Subject, e.id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return e.c.batchOutcome(b, nil, http.StatusOK), nil
}

// follow shows the batch with the files its items left.
func (e *cancelBatch) follow(ctx context.Context, _ idempotency.Outcome) (idempotency.Outcome, error) {
	return e.c.currentBatch(ctx, e.who, e.id)
}

func (e *cancelBatch) current(ctx context.Context, _ *idempotency.Record) (idempotency.Outcome, error) {
	return e.c.currentBatch(ctx, e.who, e.id)
}

// currentBatch shows the subject's batch as it is now (200), with every
// item's outcome.
func (c *Core) currentBatch(ctx context.Context, who agentfs.Caller, id string) (idempotency.Outcome, error) {
	return c.awaitBatch(ctx, who.Subject, id, 0, http.StatusOK)
}

// awaitBatch waits up to wait for the batch to end, then shows it.
func (c *Core) awaitBatch(ctx context.Context, subject, id string, wait time.Duration, status int) (idempotency.Outcome, error) {
	b, err := c.store.AwaitBatch(ctx, subject, id, wait)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	files, err := c.store.BatchFiles(ctx, b)
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "load batch result files", "batch_id", b.ID, "err", err)
	}
	return c.batchOutcome(b, files, status), nil
}
