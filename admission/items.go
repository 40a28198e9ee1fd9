package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	p, err := c.PrepareItem(ctx, b, it, ItemHint{})
	if p != nil {
		err = c.CommitItems(ctx, []*PreparedItem{p})[0]
	}
	if errors.Is(err, storage.ErrItemDone) {
		return nil
	}
	return err
}

// ItemHint is what a runner already found out for an item, to spare it a
// query of its own.
type ItemHint struct {
	// Known says Live is the live file at a put's path (nil: none), as
	// found once every earlier item on the path had ended
	// (storage.LivePaths). The put is decided against it before its bytes
	// go out, and again under a lock when it commits.
	Known bool
	Live  *agentfs.File
}

// PreparedItem is a pending batch item that has done everything that
// comes before its transaction: its key claimed and its bytes in a new
// blob, or its outcome decided without an effect (a failure, a replay).
// CommitItems commits it, alone or with others; AbandonItem drops it.
type PreparedItem struct {
	it    item
	op    string
	who   agentfs.Caller
	w     *write // nil when the item ended before its transaction
	claim *storage.Claim
	end   storage.ItemOutcome // when w is nil: what to record on the item
	// failed says the write itself failed and its problem was recorded
	// on the item (endItem).
	failed bool
}

// PrepareItem does for a pending item of b what comes before the
// transaction that records it: it binds the item's write (a put's content
// is it.Content when loaded, else read here), claims its key or finds the
// key's outcome, and writes its bytes into a new blob. Items on different
// paths, files and keys may be prepared at once, so several items' bytes
// are on their way to S3 together. An item that fails here (the problem a
// standalone request would get) or replays is prepared too, with nothing to
// apply: its outcome is recorded when it commits, so items end in the order
// they commit. The error, with no item, is a failure that may pass when the
// batch is retried; the item stays pending.
func (c *Core) PrepareItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem, hint ItemHint) (*PreparedItem, error) {
	who := batchCaller(b, it.Key)
	o := agentfs.OriginOf(who)
	o.BatchID = b.ID
	p := &PreparedItem{it: item{batch: b, index: it.Index}, op: it.Op, who: who}
	w, err := c.itemWrite(ctx, who, o, b, it, hint)
	if err == nil {
		err = admit(who, w)
	}
	if err != nil {
		return c.endBefore(p, err)
	}
	if who.Key != "" {
		claim, rec, err := c.store.BeginKey(ctx, who.Subject, who.Key, w.method, w.route, w.request.Sum())
		switch {
		case err != nil:
			return c.endBefore(p, err)
		case rec != nil:
			res, err := c.replay(ctx, who, w, rec)
			if err == nil {
				p.end, err = c.replayedOutcome(p.it, res.Outcome)
			}
			if err != nil {
				return c.endBefore(p, err)
			}
			return p, nil
		}
		p.claim = claim
	}
	if w.prepare != nil {
		if err := w.prepare(ctx); err != nil {
			if p.claim != nil {
				err = c.settle(ctx, who, w, p.claim, err)
				p.claim.Close()
				p.claim = nil
			}
			return c.endBefore(p, err)
		}
	}
	p.w = w
	return p, nil
}

// batchScopes are what a batch's items may do: the scope its creation
// needed (POST /v1/batch, a run revert), the authority it was admitted
// with. A token's grant (prefixes) is to be recorded with the batch, so
// that each item is held to it as a standalone write would be.
var batchScopes = []string{agentfs.ScopeWrite}

// batchCaller is who runs b's item under key: the batch's subject and
// attribution, with the batch's authority.
func batchCaller(b *agentfs.Batch, key string) agentfs.Caller {
	return agentfs.Caller{Subject: b.Subject, Scopes: batchScopes, Key: key, By: b.By, RequestID: b.RequestID}
}

// endBefore ends an item whose write failed before its transaction: a
// failure that may pass when the batch is retried leaves it pending; any
// other is the outcome to record.
func (c *Core) endBefore(p *PreparedItem, err error) (*PreparedItem, error) {
	if transient(err) || errors.Is(err, storage.ErrItemDone) {
		c.noteItem(p, err)
		return nil, err
	}
	prob, _ := problem.From(err)
	p.w, p.end = nil, c.failedOutcome(p.it, prob, false)
	return p, nil
}

// CommitItems commits prepared items of one batch, in their order, which
// must not depend on each other (no two on one path, one file or one key).
// When it can, they commit in one transaction: each item's effect with its
// key's record, puts of new files in one statement, and every item's
// status in one statement, set only if every item is still pending, so a
// batch pays for a few statements and one commit per group, not several
// per item. When that transaction fails, nothing of it is kept and each
// item commits in a transaction of its own, so one item's failure never
// costs the others theirs. Every item is ended; its result is nil
// (committed, or failed with its problem recorded on the item),
// storage.ErrItemDone (no longer pending: the batch was canceled, or
// another worker ran it), or a failure that may pass when the batch is
// retried. Items after one that stays pending are abandoned (AbandonItem)
// and fail with ErrNotCommitted, so items never commit out of order.
func (c *Core) CommitItems(ctx context.Context, items []*PreparedItem) []error {
	errs := c.commitItems(ctx, items)
	for i, p := range items {
		if !errors.Is(errs[i], ErrNotCommitted) { // AbandonItem counted it
			c.noteItem(p, errs[i])
		}
	}
	return errs
}

func (c *Core) commitItems(ctx context.Context, items []*PreparedItem) []error {
	errs := make([]error, len(items))
	if len(items) > 1 {
		err := c.store.WithTx(ctx, func(tx pgx.Tx) error { return c.commitGroup(ctx, tx, items) })
		if storage.CommitUncertain(err) && !transient(err) {
			// Whatever the error, no item of the group may end as if the
			// commit had failed: every one stays pending, and the retry
			// finds each done or still pending.
			err = fmt.Errorf("%w: %w", agentfs.ErrUnavailable, err)
		}
		if err == nil || storage.CommitUncertain(err) {
			// Committed, or perhaps: an item is not tried again as if it
			// had not (its blob must stay, for the rows may reference it);
			// the batch's retry finds it pending or not.
			for i, p := range items {
				switch {
				case p.w == nil:
					errs[i] = err // its outcome is recorded, or is left for the retry to decide again
				default:
					if p.w.finish != nil {
						p.w.finish(ctx, err)
					}
					errs[i] = c.itemEnded(ctx, p, err)
				}
			}
			return errs
		}
		c.cfg.Log.DebugContext(ctx, "batch items commit one by one", "batch_id", items[0].it.batch.ID,
			"items", len(items), "err", err)
	}
	for i, p := range items {
		if i > 0 && errs[i-1] != nil && !errors.Is(errs[i-1], storage.ErrItemDone) {
			c.AbandonItem(ctx, p)
			errs[i] = ErrNotCommitted
			continue
		}
		if p.w == nil {
			errs[i] = c.store.WithTx(ctx, func(tx pgx.Tx) error {
				return storage.MarkItemTx(ctx, tx, p.it.batch.ID, p.it.index, p.end)
			})
			continue
		}
		_, err := c.commitPrepared(ctx, p.who, &p.it, p.w, p.claim)
		errs[i] = c.itemEnded(ctx, p, err)
	}
	return errs
}

// ErrNotCommitted is the result of a prepared item that was not committed
// because an item before it stays pending: it stays pending too, and runs
// again when the batch is retried.
var ErrNotCommitted = errors.New("batch item not committed: an earlier item stays pending")

// commitGroup writes the effects of independent items and all their
// statuses in tx.
func (c *Core) commitGroup(ctx context.Context, tx pgx.Tx, items []*PreparedItem) error {
	outs := make([]idempotency.Outcome, len(items))
	var puts []*storage.PendingPut
	var origins []agentfs.Origin
	var putItems []int
	// flush applies the puts gathered so far in one statement. It runs
	// before any other effect and at the end, so effects apply in index
	// order even if the items turn out not to be independent after all (a
	// file moved by another request since the batch was planned).
	flush := func() error {
		if len(puts) == 0 {
			return nil
		}
		files, _, err := c.store.ApplyPutsTx(ctx, tx, puts, origins)
		if err != nil {
			return err
		}
		for k, i := range putItems {
			outs[i].Resource = idempotency.Resource{Object: "file", ID: files[k].ID}
		}
		puts, origins, putItems = nil, nil, nil
		return nil
	}
	for i, p := range items {
		switch {
		case p.w == nil:
		case p.w.pending != nil && p.claim == nil:
			// A put without a key: only its file id is recorded, on the item.
			puts, origins, putItems = append(puts, *p.w.pending), append(origins, p.w.origin), append(putItems, i)
		default:
			if err := flush(); err != nil {
				return err
			}
			out, err := p.w.apply(ctx, tx)
			if err == nil {
				err = c.record(ctx, tx, p.who, p.w, p.claim, out)
			}
			if err != nil {
				return err
			}
			outs[i] = out
		}
	}
	if err := flush(); err != nil {
		return err
	}
	marks := make([]storage.ItemMark, len(items))
	for i, p := range items {
		marks[i] = storage.ItemMark{Index: p.it.index, ItemOutcome: p.end}
		if p.w != nil {
			marks[i].ItemOutcome = succeeded(outs[i])
		}
	}
	return storage.MarkItemsTx(ctx, tx, items[0].it.batch.ID, marks)
}

// AbandonItem drops a prepared item that will not commit now (an item
// before it stays pending, or the run stopped): its blob is removed and
// its key released, and the item stays pending, to run again when the
// batch is retried.
func (c *Core) AbandonItem(ctx context.Context, p *PreparedItem) {
	c.noteItem(p, ErrNotCommitted)
	if p.w == nil {
		return
	}
	if p.w.finish != nil {
		p.w.finish(ctx, ErrNotCommitted)
	}
	if p.claim != nil {
		c.release(ctx, p.claim)
	}
	p.w = nil
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
	if err != nil && !errors.Is(err, storage.ErrItemDone) && !transient(err) {
		p.failed = true // endItem records its problem on the item
	}
	return c.endItem(ctx, &p.it, err)
}

// noteItem tells the observer, if any, how an item's run ended with err
// (CommitItems' result for it, or the failure that left it unprepared). An
// op outside the known ones (never admitted by validation) is "other".
func (c *Core) noteItem(p *PreparedItem, err error) {
	if c.cfg.Observer == nil {
		return
	}
	outcome := ItemApplied
	switch {
	case errors.Is(err, storage.ErrItemDone):
		outcome = ItemSkipped
	case err != nil:
		outcome = ItemRetried
	case p.failed || p.end.Status == agentfs.ItemFailed:
		outcome = ItemFailed // a replayed failure too
	case p.end.Replayed:
		outcome = ItemReplayed
	}
	op := p.op
	switch op {
	case agentfs.OpPut, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpCopy, agentfs.OpUndo:
	default:
		op = "other"
	}
	c.cfg.Observer.ItemOutcome(op, outcome)
}

// endItem ends an item whose write ended with err: a failure that may pass
// when the batch is retried is returned and leaves the item pending; an
// item no longer pending is storage.ErrItemDone; any other failure is
// recorded on the item as the problem a standalone request would get.
func (c *Core) endItem(ctx context.Context, it *item, err error) error {
	switch {
	case err == nil, errors.Is(err, storage.ErrItemDone), transient(err):
		return err
	}
	p, _ := problem.From(err)
	return c.store.WithTx(ctx, func(tx pgx.Tx) error {
		return storage.MarkItemTx(ctx, tx, it.batch.ID, it.index, c.failedOutcome(*it, p, false))
	})
}

// itemWrite is the write an item asks for.
func (c *Core) itemWrite(ctx context.Context, who agentfs.Caller, o agentfs.Origin, b *agentfs.Batch, it agentfs.BatchItem, hint ItemHint) (*write, error) {
	switch it.Op {
	case agentfs.OpPut:
		content := it.Content
		if content == nil {
			var err error
			if content, err = c.store.ItemContent(ctx, b.ID, it.Index); err != nil {
				return nil, err
			}
		}
		// No Digest: the bytes are hashed once, on their way to S3 (or, for
		// a key's replay, to compare them with the recorded content).
		put := agentfs.Put{Subject: b.Subject, Path: it.Path, ContentType: it.ContentType, Replace: it.Replace,
			Size: int64(len(content)), ExpiresIn: it.ExpiresIn, By: b.By}
		body := bytes.NewReader(content)
		prepareBlob := func(ctx context.Context) (*storage.PendingPut, error) { return c.store.PreparePut(ctx, put, body) }
		if hint.Known {
			prepareBlob = func(ctx context.Context) (*storage.PendingPut, error) {
				return c.store.PreparePutAgainst(ctx, put, body, hint.Live)
			}
		}
		w := c.putWriteWith(put, body, o, func(ctx context.Context) (*storage.PendingPut, error) {
			p, err := prepareBlob(ctx)
			if err == nil {
				body.Reset(nil) // the bytes are in the blob: a prepared item waiting to commit holds none
			} else {
				// A failure recorded under the item's key records the hash
				// of the whole content, however much of it was read.
				body.Reset(content)
			}
			return p, err
		})
		return w, nil
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

// succeeded is the status of an item whose effect committed with out.
func succeeded(out idempotency.Outcome) storage.ItemOutcome {
	return storage.ItemOutcome{Status: agentfs.ItemSucceeded, ResultID: fileID(out)}
}

// replayedOutcome is the status of an item whose key already held out: it
// ends as the recorded request did.
func (c *Core) replayedOutcome(it item, out idempotency.Outcome) (storage.ItemOutcome, error) {
	if out.Status >= 300 {
		var p problem.Problem
		if err := json.Unmarshal(out.Body, &p); err != nil {
			return storage.ItemOutcome{}, err
		}
		return c.failedOutcome(it, &p, true), nil
	}
	return storage.ItemOutcome{Status: agentfs.ItemSucceeded, Replayed: true, ResultID: fileID(out)}, nil
}

// failedOutcome is the status of an item that had no effect: the problem a
// standalone request would have answered, named as the item and carrying
// the batch request's id.
func (c *Core) failedOutcome(it item, p *problem.Problem, replayed bool) storage.ItemOutcome {
	out := *p
	out.Instance = "/v1/batch/" + it.batch.ID + "/items/" + strconv.Itoa(it.index)
	out.RequestID = it.batch.RequestID
	return storage.ItemOutcome{Status: agentfs.ItemFailed, Replayed: replayed, Error: problem.Encode(&out)}
}
