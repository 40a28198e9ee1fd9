package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"

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
// is recorded on the item. It is PrepareItem and CommitItems of one item.
func (c *Core) RunItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) error {
	p, err := c.PrepareItem(ctx, b, it)
	if p != nil {
		err = c.CommitItems(ctx, []*PreparedItem{p})[0]
	}
	if errors.Is(err, storage.ErrItemDone) {
		return nil
	}
	return err
}

// PreparedItem is a pending batch item that has done everything that
// comes before its transaction: its key is claimed and its bytes are in a
// new blob. CommitItems commits it, alone or with others, and ends it
// either way.
type PreparedItem struct {
	it    item
	who   agentfs.Caller
	w     *write
	claim *storage.Claim
}

// PrepareItem does for a pending item of b what comes before the
// transaction that commits its effect: it binds the item's write (a put's
// content is it.Content when loaded, else read here), claims its key, and
// writes its bytes into a new blob. Items on different paths, files and
// keys may be prepared at once; the bytes of several are then on their way
// to S3 together. It returns nil when the item ended here: replayed, failed
// with the problem a standalone request would get (recorded on the item),
// or met a failure that may pass when the batch is retried (the error, as
// CommitItems would return it).
func (c *Core) PrepareItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) (*PreparedItem, error) {
	who := agentfs.Caller{Subject: b.Subject, Key: it.Key, By: b.By, RequestID: b.RequestID}
	o := agentfs.OriginOf(who)
	o.BatchID = b.ID
	p := &PreparedItem{it: item{batch: b, index: it.Index}, who: who}
	w, err := c.itemWrite(ctx, who, o, b, it)
	if err != nil {
		return nil, c.endItem(ctx, &p.it, err)
	}
	p.w = w
	if who.Key != "" {
		claim, rec, err := c.store.BeginKey(ctx, who.Subject, who.Key, w.method, w.route, w.request.Sum())
		switch {
		case err != nil:
			return nil, c.endItem(ctx, &p.it, err)
		case rec != nil:
			_, err := c.replay(ctx, who, &p.it, w, rec)
			return nil, c.endItem(ctx, &p.it, err)
		}
		p.claim = claim
	}
	if w.prepare != nil {
		if err := w.prepare(ctx); err != nil {
			return nil, c.itemEnded(ctx, p, err)
		}
	}
	return p, nil
}

// CommitItems commits prepared items of one batch, which must not depend
// on each other (no two on one path, one file or one key): in one
// transaction when it can, each item's effect with its status (set only
// while it is still pending) and its key's record, so a batch pays for one
// commit, not one per item. When an item's effect fails in that
// transaction, nothing of it is kept and each item commits in a
// transaction of its own instead, so one item's failure never costs the
// others theirs. Every item is ended; its result is nil (committed, or
// failed with its problem recorded on the item), storage.ErrItemDone (it
// is no longer pending: the batch was canceled, or another worker applied
// it), or a failure that may pass when the batch is retried, which leaves
// the item pending.
func (c *Core) CommitItems(ctx context.Context, items []*PreparedItem) []error {
	errs := make([]error, len(items))
	if len(items) > 1 {
		outs := make([]idempotency.Outcome, len(items))
		err := c.store.WithTx(ctx, func(tx pgx.Tx) error {
			for i, p := range items {
				out, err := c.applyTx(ctx, tx, &p.it, p.w, p.claim)
				if err != nil {
					return err
				}
				outs[i] = out
			}
			return nil
		})
		if err == nil || storage.CommitUncertain(err) {
			// Committed, or perhaps: an item is not tried again in a
			// transaction of its own as if it had not (its blob must stay,
			// for the rows may reference it); the batch's retry finds it
			// pending or not.
			for i, p := range items {
				if p.w.finish != nil {
					p.w.finish(ctx, err)
				}
				errs[i] = c.itemEnded(ctx, p, err)
			}
			return errs
		}
		c.cfg.Log.DebugContext(ctx, "batch items commit one by one", "batch_id", items[0].it.batch.ID,
			"items", len(items), "err", err)
	}
	for i, p := range items {
		_, err := c.commitPrepared(ctx, &p.it, p.w, p.claim)
		errs[i] = c.itemEnded(ctx, p, err)
	}
	return errs
}

// itemEnded ends a prepared item whose write ended with err: its key's
// claim is recorded or released as a standalone request's would be, then
// the item is ended (endItem).
func (c *Core) itemEnded(ctx context.Context, p *PreparedItem, err error) error {
	if p.claim != nil {
		defer p.claim.Close()
		switch {
		case err != nil:
			err = c.settle(ctx, p.who, p.w, p.claim, err)
		case c.cfg.AfterCommit != nil:
			c.cfg.AfterCommit()
		}
	}
	return c.endItem(ctx, &p.it, err)
}

// endItem ends an item whose write ended with err: a failure that may pass
// when the batch is retried is returned and leaves the item pending; an
// item no longer pending is storage.ErrItemDone; any other failure is
// recorded on the item as the problem a standalone request would get.
func (c *Core) endItem(ctx context.Context, it *item, err error) error {
	switch {
	case err == nil, errors.Is(err, storage.ErrItemDone):
		return err
	case transient(err):
		return err
	}
	p, _ := problem.From(err)
	return c.markFailed(ctx, it.batch, it.index, p, false)
}

// itemWrite is the write an item asks for.
func (c *Core) itemWrite(ctx context.Context, who agentfs.Caller, o agentfs.Origin, b *agentfs.Batch, it agentfs.BatchItem) (*write, error) {
	switch it.Op {
	case agentfs.OpPut:
		content := it.Content
		if content == nil {
			var err error
			if content, err = c.store.ItemContent(ctx, b.ID, it.Index); err != nil {
				return nil, err
			}
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
