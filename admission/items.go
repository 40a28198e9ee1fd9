package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// RunItem applies one pending item of a batch through the same core as a
// standalone request: its effect and its status commit together, and only
// while the item is still pending, so an item is never applied twice. An
// item key shares the subject's key space with standalone requests: the
// same key and content replays the recorded outcome (replayed: true), other
// content fails the item with IDEMPOTENCY_CONFLICT. RunItem returns an
// error only for failures that may pass when the batch is retried (storage
// unavailable, the item's key in progress elsewhere); every other outcome
// is recorded on the item.
func (c *Core) RunItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) error {
	who := agentfs.Caller{Subject: b.Subject, Key: it.Key, By: b.By, RequestID: b.RequestID}
	o := agentfs.OriginOf(who)
	o.BatchID = b.ID
	w, err := c.itemWrite(ctx, who, o, b, it)
	var res idempotency.Result
	if err == nil {
		res, err = c.run(ctx, who, &item{batch: b, index: it.Index}, w)
	}
	switch {
	case err == nil:
		c.noteItem(it.Op, itemOutcome(res))
		return nil
	case errors.Is(err, storage.ErrItemDone):
		c.noteItem(it.Op, ItemSkipped)
		return nil
	case transient(err):
		c.noteItem(it.Op, ItemRetried)
		return err
	}
	p, _ := problem.From(err)
	if err := c.markFailed(ctx, b, it.Index, p, false); err != nil {
		c.noteItem(it.Op, ItemRetried)
		return err
	}
	c.noteItem(it.Op, ItemFailed)
	return nil
}

// itemOutcome names how an item that ran without error ended.
func itemOutcome(res idempotency.Result) string {
	switch {
	case res.Outcome.Status >= 300:
		return ItemFailed // a replayed failure
	case res.Replayed:
		return ItemReplayed
	}
	return ItemApplied
}

// noteItem tells the observer, if any, how an item's run ended. An op
// outside the known ones (never admitted by validation) is "other".
func (c *Core) noteItem(op, outcome string) {
	if c.cfg.Observer == nil {
		return
	}
	switch op {
	case agentfs.OpPut, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpCopy, agentfs.OpUndo:
	default:
		op = "other"
	}
	c.cfg.Observer.ItemOutcome(op, outcome)
}

// itemWrite is the write an item asks for.
func (c *Core) itemWrite(ctx context.Context, who agentfs.Caller, o agentfs.Origin, b *agentfs.Batch, it agentfs.BatchItem) (*write, error) {
	switch it.Op {
	case agentfs.OpPut:
		content, err := c.store.ItemContent(ctx, b.ID, it.Index)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(content)
		put := agentfs.Put{Subject: b.Subject, Path: it.Path, ContentType: it.ContentType, Replace: it.Replace,
			Size: int64(len(content)), Digest: sum[:], ExpiresIn: it.ExpiresIn, By: b.By}
		return c.putWrite(put, bytes.NewReader(content), o), nil
	case agentfs.OpDelete:
		return c.deleteWrite(who, it.FileID, "", o), nil
	case agentfs.OpRestore:
		return c.restoreWrite(who, it.FileID, o), nil
	case agentfs.OpCopy:
		put := agentfs.Put{Subject: b.Subject, Path: it.Path, Replace: it.Replace, Size: -1, By: b.By}
		return c.copyWrite(it.FileID, put, o), nil
	case agentfs.OpUndo:
		if it.Undo != nil {
			return c.undoWrite(who, it.FileID, *it.Undo, o), nil
		}
	}
	return nil, problem.Validation("op", "unknown operation "+strconv.Quote(it.Op))
}

// transient reports whether an item's failure may pass when the batch is
// retried: storage unavailable, a key in progress or a claim lost to
// another request, a cancelled run.
func transient(err error) bool {
	var busy *agentfs.InProgressError
	return errors.Is(err, agentfs.ErrUnavailable) || errors.As(err, &busy) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// markReplayed ends an item whose key already held an outcome.
func (c *Core) markReplayed(ctx context.Context, it *item, out idempotency.Outcome) error {
	if out.Status >= 300 {
		var p problem.Problem
		if err := json.Unmarshal(out.Body, &p); err != nil {
			return err
		}
		return c.markFailed(ctx, it.batch, it.index, &p, true)
	}
	return c.store.MarkItem(ctx, it.batch.ID, it.index, storage.ItemOutcome{
		Status: agentfs.ItemSucceeded, Replayed: true, ResultID: fileID(out)})
}

// markFailed records the problem a standalone request would have answered
// on an item that had no effect, named as the item and carrying the batch
// request's id.
func (c *Core) markFailed(ctx context.Context, b *agentfs.Batch, index int, p *problem.Problem, replayed bool) error {
	out := *p
	out.Instance = "/v1/batch/" + b.ID + "/items/" + strconv.Itoa(index)
	out.RequestID = b.RequestID
	return c.store.MarkItem(ctx, b.ID, index, storage.ItemOutcome{Status: agentfs.ItemFailed, Replayed: replayed,
		Error: problem.Encode(&out)})
}
