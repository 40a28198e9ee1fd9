package admission

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
)

// RevertRun undoes a run (POST /v1/runs/{run_id}/revert; the key is
// required): a durable batch with one item per file the run changed, the
// newest change first, each bringing its file back to its state before the
// run (202 with the batch). A file another run changed after this run fails
// its item with CHANGED_SINCE_RUN unless force. The undo's own events carry
// the caller's run id, so a revert can be reverted in turn. A replay answers
// the batch's current state (200).
func (c *Core) RevertRun(ctx context.Context, who agentfs.Caller, runID string, force bool) (idempotency.Result, error) {
	return c.run(ctx, who, nil, &write{
		method: http.MethodPost, route: "/v1/runs/:run_id/revert",
		request: idempotency.Request{Operation: agentfs.OpRevertRun, Target: runID, MediaType: "application/json", By: who.By},
		content: jsonContent(map[string]any{"force": force}),
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			items, err := c.store.RunUndoPlan(ctx, tx, who.Subject, runID, force)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			b, err := c.store.CreateBatchTx(ctx, tx, &agentfs.Batch{Subject: who.Subject, By: who.By,
				RequestID: who.RequestID, Items: items})
			if err != nil {
				return idempotency.Outcome{}, err
			}
			if err := c.queue.Enqueue(ctx, tx, b.ID); err != nil {
				return idempotency.Outcome{}, err
			}
			return c.batchOutcome(b, nil, http.StatusAccepted), nil
		},
		current: func(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error) {
			return c.currentBatch(ctx, who, rec.Outcome.Resource.ID)
		},
	})
}

// undoWrite is the item of a run revert that undoes the run on one file.
func (c *Core) undoWrite(who agentfs.Caller, fileID string, u agentfs.Undo, o agentfs.Origin) *write {
	return &write{
		method: http.MethodPost, route: "/v1/runs/:run_id/revert",
		request: idempotency.Request{Operation: agentfs.OpUndo, Target: fileID, Params: map[string]string{
			"run_id": u.RunID, "force": strconv.FormatBool(u.Force)}, By: who.By},
		content: noContent,
		apply: func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
			f, err := c.store.UndoTx(ctx, tx, who.Subject, fileID, u, o)
			if err != nil {
				return idempotency.Outcome{}, err
			}
			return c.fileOutcome(f, false), nil
		},
	}
}
