package batch

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

// apply runs one pending item. It returns an error only for failures that
// may pass when repeated (storage unavailable, an item key in progress
// elsewhere): the batch is then retried from this item. Every other outcome
// is recorded on the item.
func (q *Queue) apply(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) error {
	var err error
	switch it.Op {
	case agentfs.OpPut:
		return q.applyPut(ctx, b, it)
	case agentfs.OpDelete:
		_, err = q.store.DeleteFile(ctx, b.Subject, it.FileID, "", q.succeed(b, it, nil, nil))
	case agentfs.OpRestore:
		_, err = q.store.RestoreFile(ctx, b.Subject, it.FileID, q.succeed(b, it, nil, nil))
	case agentfs.OpCopy:
		put := agentfs.Put{Subject: b.Subject, Path: it.Path, Replace: it.Replace, Size: -1, By: b.By}
		_, _, err = q.store.CopyFile(ctx, it.FileID, put, q.succeed(b, it, nil, nil))
	default:
		err = problem.Validation("op", "unknown operation "+strconv.Quote(it.Op))
	}
	return q.settle(ctx, b, it, err)
}

// succeed is the commit hook of an item's effect: it marks the item
// succeeded (only if still pending) and, for a keyed put, records the
// outcome under the key, all in the effect's transaction.
func (q *Queue) succeed(b *agentfs.Batch, it agentfs.BatchItem, claim *idempotency.Claim, content []byte) storage.CommitHook {
	return func(ctx context.Context, tx pgx.Tx, f *agentfs.File, created bool) error {
		out := storage.ItemOutcome{Status: agentfs.ItemSucceeded, ResultID: f.ID}
		if err := storage.MarkItemTx(ctx, tx, b.ID, it.Index, out); err != nil {
			return err
		}
		if claim != nil {
			return claim.Complete(ctx, tx, content, q.cfg.Render(f, created))
		}
		return nil
	}
}

// settle records how an item that did not succeed ended, unless the
// failure may pass when repeated.
func (q *Queue) settle(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem, err error) error {
	switch {
	case err == nil, errors.Is(err, storage.ErrItemDone):
		return nil
	case transient(err):
		return err
	}
	p, _ := problem.From(err)
	return q.fail(ctx, b, it, p, false)
}

// transient reports whether an item's failure may pass when the batch is
// retried: storage unavailable, a lost claim, a cancelled run.
func transient(err error) bool {
	return errors.Is(err, agentfs.ErrUnavailable) || errors.Is(err, idempotency.ErrClaimLost) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (q *Queue) fail(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem, p *problem.Problem, replayed bool) error {
	body, _ := json.Marshal(itemProblem(b, it, p))
	return q.store.MarkItem(ctx, b.ID, it.Index, storage.ItemOutcome{Status: agentfs.ItemFailed, Replayed: replayed, Error: body})
}

func itemProblem(b *agentfs.Batch, it agentfs.BatchItem, p *problem.Problem) *problem.Problem {
	out := *p
	out.Instance = "/v1/batch/" + b.ID + "/items/" + strconv.Itoa(it.Index)
	return &out
}

// applyPut runs a put item. An item key shares the subject's key space
// with standalone uploads: the same key and content replays the recorded
// file (replayed: true), other content under the key fails the item.
func (q *Queue) applyPut(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) error {
	content, err := q.store.ItemContent(ctx, b.ID, it.Index)
	if err != nil {
		return q.settle(ctx, b, it, err)
	}
	put := agentfs.Put{Subject: b.Subject, Path: it.Path, ContentType: it.ContentType, Replace: it.Replace,
		Size: int64(len(content)), By: b.By}
	if it.Key == "" {
		_, err := q.store.PutFile(ctx, put, bytes.NewReader(content), q.succeed(b, it, nil, nil))
		return q.settle(ctx, b, it, err)
	}
	sum := sha256.Sum256(content)
	claim, rec, err := q.keys.Begin(ctx, b.Subject, it.Key, "POST", "/v1/files", idempotency.PutRequest(put).Sum())
	var busy *idempotency.InProgressError
	switch {
	case errors.Is(err, idempotency.ErrConflict):
		return q.fail(ctx, b, it, conflict(it.Key), false)
	case errors.As(err, &busy):
		return err // the key's first request is still running: wait for it
	case err != nil:
		return q.settle(ctx, b, it, err)
	case rec != nil:
		return q.replayItem(ctx, b, it, rec, sum[:])
	}
	defer claim.Close()
	_, err = q.store.PutFile(ctx, put, bytes.NewReader(content), q.succeed(b, it, claim, sum[:]))
	if err == nil {
		return nil
	}
	p, _ := problem.From(err)
	if transient(err) || errors.Is(err, storage.ErrItemDone) || idempotency.DispositionOf(p.Status, p.Code) == idempotency.Release {
		_ = claim.Release(ctx)
		return q.settle(ctx, b, it, err)
	}
	body, _ := json.Marshal(p)
	if rerr := claim.Record(ctx, sum[:], idempotency.Outcome{Status: p.Status, Body: body}); rerr != nil {
		return rerr // retried; the item is still pending
	}
	return q.fail(ctx, b, it, p, false)
}

// replayItem ends a keyed put item whose key already holds an outcome.
func (q *Queue) replayItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem, rec *idempotency.Record, sum []byte) error {
	if !bytes.Equal(rec.ContentHash, sum) {
		return q.fail(ctx, b, it, conflict(it.Key), false)
	}
	if rec.Outcome.Status >= 300 {
		var p problem.Problem
		if err := json.Unmarshal(rec.Outcome.Body, &p); err != nil {
			return err
		}
		return q.fail(ctx, b, it, &p, true)
	}
	return q.store.MarkItem(ctx, b.ID, it.Index, storage.ItemOutcome{
		Status: agentfs.ItemSucceeded, Replayed: true, ResultID: rec.Outcome.Resource.ID})
}

func conflict(key string) *problem.Problem {
	return problem.New(problem.IdempotencyConflict,
		"Idempotency-Key "+strconv.Quote(key)+" was used for a different request; use a new key for a new request")
}
