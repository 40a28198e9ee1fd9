package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// The batch door: a batch runner takes each pending item through the same
// pipeline as a request of its own, in two steps, so that it can prepare
// many items at once and commit them in groups. The item's status commits
// with its effect, and only while the item is still pending, so an item is
// never applied twice. An item key shares the subject's key space with
// standalone requests: the same key and content replays the recorded
// outcome (replayed: true), other content fails the item with
// IDEMPOTENCY_CONFLICT.

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
	w  *write
	op string
}

// PrepareItem does for a pending item of b what comes before the
// transaction that records it (the pipeline's admit): it binds the item's
// write (a put's content is it.Content when loaded, else read here),
// claims its key or finds the key's outcome, and writes its bytes into a
// new blob. Items on different paths, files and keys may be prepared at
// once, so several items' bytes are on their way to S3 together. An item
// that fails here (the problem a standalone request would get) or replays
// is prepared too, with nothing to apply: its outcome is recorded when it
// commits, so items end in the order they commit. The error, with no item,
// is a failure that may pass when the batch is retried; the item stays
// pending.
func (c *Core) PrepareItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem, hint ItemHint) (*PreparedItem, error) {
	who := batchCaller(b, it.Key)
	ctx = within(ctx, who)
	w := &write{who: who, item: &item{batch: b, index: it.Index}}
	p := &PreparedItem{w: w, op: it.Op}
	e, err := c.itemEffect(ctx, who, b, it, hint)
	if err == nil {
		w.e = e
		err = c.admit(ctx, w)
	}
	if err == nil && w.replayed {
		var end storage.ItemOutcome
		end, err = replayedOutcome(*w.item, w.out)
		w.end = &end
	}
	if err != nil {
		return c.endBefore(p, err)
	}
	return p, nil
}

// batchScopes are what a batch's items may do: the scope its creation
// needed (POST /v1/batch, a run revert), the authority it was admitted
// with. The rest of its creator's grant (prefixes, byte budget) is
// recorded with the batch, so that each item is held to it as a
// standalone write would be.
var batchScopes = []string{agentfs.ScopeWrite}

// batchCaller is who runs b's item under key: the batch's subject and
// attribution, with the batch's authority and its creator's grant.
func batchCaller(b *agentfs.Batch, key string) agentfs.Caller {
	g := agentfs.Grant{Scopes: batchScopes, Prefixes: b.Prefixes, MaxBytes: b.MaxBytes}
	return agentfs.Caller{Subject: b.Subject, Grant: g, Key: key, By: b.By, TokenID: b.TokenID, RequestID: b.RequestID}
}

// itemEffect is the effect an item asks for.
func (c *Core) itemEffect(ctx context.Context, who agentfs.Caller, b *agentfs.Batch, it agentfs.BatchItem, hint ItemHint) (effect, error) {
	o := agentfs.OriginOf(who)
	o.BatchID = b.ID
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
			Size: int64(len(content)), ExpiresIn: it.ExpiresIn, By: b.By, Bulk: true}
		return &putFile{c: c, put: put, body: bytes.NewReader(content), origin: o,
			known: hint.Known, live: hint.Live, held: content}, nil
	case agentfs.OpDelete:
		return c.deleteFile(who, it.FileID, "", o), nil
	case agentfs.OpRestore:
		return c.restoreFile(who, it.FileID, o), nil
	case agentfs.OpCopy:
		put := agentfs.Put{Subject: b.Subject, Path: it.Path, Replace: it.Replace, Size: -1, By: b.By, Bulk: true}
		return &copyFile{putFile: putFile{c: c, put: put, origin: o}, src: it.FileID}, nil
	case agentfs.OpUndo, agentfs.OpRestoreTo:
		if it.Undo != nil {
			return c.undoFile(who, it.Op, it.FileID, *it.Undo, o), nil
		}
	}
	return nil, problem.Validation("op", "unknown operation "+strconv.Quote(it.Op))
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
	end := failedOutcome(*p.w.item, prob, false)
	p.w.end, p.w.settled = &end, true
	return p, nil
}

// CommitItems commits prepared items of one batch, in their order, which
// must not depend on each other (no two on one path, one file or one key):
// the pipeline's commit of a group. When it can, they commit in one
// transaction, so a batch pays for a few statements and one commit per
// group, not several per item. Every item is ended; its result is nil
// (committed, or failed with its problem recorded on the item),
// storage.ErrItemDone (no longer pending: the batch was canceled, or
// another worker ran it), or a failure that may pass when the batch is
// retried. Items after one that stays pending are abandoned (AbandonItem)
// and fail with ErrNotCommitted, so items never commit out of order.
func (c *Core) CommitItems(ctx context.Context, items []*PreparedItem) []error {
	ws := make([]*write, len(items))
	for i, p := range items {
		ws[i] = p.w
	}
	if len(ws) > 0 { // the items of one batch: one creator's grant
		ctx = within(ctx, ws[0].who)
	}
	errs := c.commit(ctx, ws)
	for i, p := range items {
		if errors.Is(errs[i], ErrNotCommitted) {
			c.AbandonItem(ctx, p)
			continue
		}
		c.noteItem(p, errs[i])
	}
	return errs
}

// ErrNotCommitted is the result of a prepared item that was not committed
// because an item before it stays pending: it stays pending too, and runs
// again when the batch is retried.
var ErrNotCommitted = errors.New("batch item not committed: an earlier item stays pending")

// AbandonItem drops a prepared item that will not commit now (an item
// before it stays pending, or the run stopped): its blob is removed and
// its key released, and the item stays pending, to run again when the
// batch is retried.
func (c *Core) AbandonItem(ctx context.Context, p *PreparedItem) {
	c.noteItem(p, ErrNotCommitted)
	_ = c.settle(ctx, p.w, ErrNotCommitted)
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
	case p.w.failed || p.w.end != nil && p.w.end.Status == agentfs.ItemFailed:
		outcome = ItemFailed // a replayed failure too
	case p.w.end != nil && p.w.end.Replayed:
		outcome = ItemReplayed
	}
	op := p.op
	switch op {
	case agentfs.OpPut, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpCopy, agentfs.OpUndo, agentfs.OpRestoreTo:
	default:
		op = "other"
	}
	c.cfg.Observer.ItemOutcome(op, outcome)
}

// succeeded is the status of an item whose effect committed with out.
func succeeded(out idempotency.Outcome) storage.ItemOutcome {
	return storage.ItemOutcome{Status: agentfs.ItemSucceeded, ResultID: fileID(out)}
}

// replayedOutcome is the status of an item whose key already held out: it
// ends as the recorded request did.
func replayedOutcome(it item, out idempotency.Outcome) (storage.ItemOutcome, error) {
	if out.Status >= 300 {
		var p problem.Problem
		if err := json.Unmarshal(out.Body, &p); err != nil {
			return storage.ItemOutcome{}, err
		}
		return failedOutcome(it, &p, true), nil
	}
	return storage.ItemOutcome{Status: agentfs.ItemSucceeded, Replayed: true, ResultID: fileID(out)}, nil
}

// failedOutcome is the status of an item that had no effect: the problem a
// standalone request would have answered, named as the item and carrying
// the batch request's id.
func failedOutcome(it item, p *problem.Problem, replayed bool) storage.ItemOutcome {
	out := *p
	out.Instance = "/v1/batch/" + it.batch.ID + "/items/" + strconv.Itoa(it.index)
	out.RequestID = it.batch.RequestID
	return storage.ItemOutcome{Status: agentfs.ItemFailed, Replayed: replayed, Error: problem.Encode(&out)}
}
