package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// The pipeline: every write, a request of its own or an item of a batch,
// goes through the same stages, a request being a group of one.
//
//	admit     the caller's authority, then the key: claimed, or its recorded
//	          outcome replayed, or a refusal; then the effect prepared
//	          outside any transaction (bytes streamed into a new blob)
//	commit    one transaction for the group: each effect applied (puts
//	          gathered into one statement), each key's outcome recorded,
//	          each item's status set while it is still pending
//	settle    each write's preparation finished, its key recorded (an
//	          outcome decided against the stored state) or released (one
//	          that may pass when repeated)
//	follow    what comes after a committed effect and cannot undo it
//
// The core owns every transaction and hands it down; nothing below calls
// back up.

// effect is one write as the pipeline runs it: a small type of this
// package for each kind of write, holding what it needs and calling the
// storage helpers below it.
type effect interface {
	// admission names the write for its key.
	admission() admission
	// content is the fingerprint of the write's content: the SHA-256 of the
	// bytes, or of a JSON body's canonical form. It may read the body to
	// learn it (a repeat whose content must be compared).
	content() ([]byte, error)
	// apply writes the effect in tx and renders the response it earns.
	apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error)
}

// admission is what a key records of its write: the method and route, shown
// by /v1/operations, and the request its fingerprint covers.
type admission struct {
	method, route string
	request       idempotency.Request
	// paths are where the write puts a file (a put's path, a move's new
	// one); the caller's grant must cover each. What the write names by id
	// (a move's file, a copy's source) is found in the caller's reach, or
	// not at all.
	paths []string
}

// Optional parts of an effect.
type (
	// preparer does work before the transaction and outside it (streaming
	// bytes into a new blob), and finishes once the transaction is over
	// (err is how it ended), removing what the effect did not come to
	// reference.
	preparer interface {
		prepare(ctx context.Context) error
		finish(ctx context.Context, err error)
	}
	// loner commits a write that has nothing to commit with it (no key, no
	// batch item) in one statement instead of a transaction; ok false
	// leaves it to apply.
	loner interface {
		commitAlone(ctx context.Context) (out idempotency.Outcome, ok bool, err error)
	}
	// follower has work that follows the committed effect and cannot undo
	// it (dropping S3 parts, waiting for a batch).
	follower interface {
		follow(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error)
	}
	// changing is a write whose resource keeps changing (sessions,
	// batches): a replay answers its current state.
	changing interface {
		current(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error)
	}
	// grouped is a put that applies with the other puts of its transaction
	// in one statement (storage.ApplyPutsTx) instead of apply.
	grouped interface {
		pendingPut() (*storage.PendingPut, agentfs.Origin)
		outcomeOf(f *agentfs.File, created bool) idempotency.Outcome
	}
)

// write is one write on its way through the pipeline.
type write struct {
	who agentfs.Caller
	e   effect
	// item is the batch item the write runs as; nil for a request of its
	// own.
	item  *item
	claim *storage.Claim // the key's, while this write owns it
	// prepared says prepare succeeded: finish must end it.
	prepared bool
	out      idempotency.Outcome // once applied, or replayed
	replayed bool
	// redacted names the secret members a replay shows null (another
	// token's record).
	redacted []string
	// end is an item's outcome decided before its transaction (a refusal,
	// a replay): the transaction only records it.
	end *storage.ItemOutcome
	// settled says the write is over: its preparation finished and its key
	// recorded or released.
	settled bool
	// budget, when set, is the write's body read against its token's
	// max_bytes: settled with the write.
	budget *budget
	// failed says an item's write failed and its problem was recorded as
	// the item's outcome.
	failed bool
}

// item names the batch item a write runs as: its status commits with the
// effect, and only while it is still pending.
type item struct {
	batch *agentfs.Batch
	index int
}

// run takes one write of its own through the pipeline.
func (c *Core) run(ctx context.Context, who agentfs.Caller, e effect) (idempotency.Result, error) {
	ctx = within(ctx, who)
	w := &write{who: who, e: e}
	if err := c.admit(ctx, w); err != nil {
		return idempotency.Result{}, err
	}
	if w.replayed {
		return idempotency.Result{Outcome: w.out, Replayed: true, Redacted: w.redacted}, nil
	}
	commit := func() error { return c.commit(ctx, []*write{w})[0] }
	if _, ok := e.(grouped); ok {
		commit = func() error { return c.gathered(ctx, w) }
	}
	if err := commit(); err != nil {
		return idempotency.Result{}, err
	}
	return c.follow(ctx, w)
}

// admit takes w through what comes before its transaction: the caller's
// authority checked, its key claimed (or its recorded outcome replayed, or
// a refusal), then its preparation.
// An error ends w here: a refusal, or a preparation that failed, its key
// already recorded or released.
func (c *Core) admit(ctx context.Context, w *write) error {
	a := w.e.admission()
	// The caller's authority, before the key is looked at: a refused
	// write claims nothing, and a replay is answered only to a caller who
	// may make the request: its scopes and pins, and its prefixes against
	// each path the write puts a file at.
	if err := w.who.Allow(a.request.Operation); err != nil {
		return err
	}
	for _, p := range a.paths {
		if err := w.who.Permit(p); err != nil {
			return err
		}
	}
	if w.who.Key != "" {
		claim, rec, err := c.store.BeginKey(ctx, w.who.Subject, w.who.Key, a.method, a.route, a.request.Sum(), keyOrigin(w, a))
		switch {
		case err != nil:
			c.noteRefusal(w, err)
			return err
		case rec != nil:
			if err := c.replay(ctx, w, rec); err != nil {
				c.noteRefusal(w, err)
				return err
			}
			c.noteKey(w, KeyReplayed)
			return nil
		}
		w.claim = claim
		c.noteKey(w, KeyExecuted)
	}
	if err := c.meter(ctx, w); err != nil {
		return c.settle(ctx, w, err)
	}
	if p, ok := w.e.(preparer); ok {
		if err := p.prepare(ctx); err != nil {
			return c.settle(ctx, w, err)
		}
		w.prepared = true
	}
	return nil
}

// keyOrigin is what w's key records of it for a run's recovery: its run,
// the paths it writes and, for a request of its own, the request to send
// again (an item's is its batch's, which the batch resumes by itself).
func keyOrigin(w *write, a admission) storage.KeyOrigin {
	o := storage.KeyOrigin{RunID: w.who.By.RunID, Paths: a.paths}
	if w.item == nil {
		o.RequestURI = w.who.RequestURI
	}
	return o
}

// within is ctx holding the store to who's reach: what its queries find
// by id or list lies in the caller's prefixes, and a key it claims names
// its token.
func within(ctx context.Context, who agentfs.Caller) context.Context {
	return storage.Within(ctx, who.Grant.Prefixes, who.TokenID)
}

// replay answers a repeat of a completed request with its recorded
// outcome, once its content is known to be the same.
func (c *Core) replay(ctx context.Context, w *write, rec *idempotency.Record) error {
	sum, err := w.e.content()
	if err != nil {
		return err
	}
	if !bytes.Equal(sum, rec.ContentHash) {
		return &agentfs.ConflictError{Key: w.who.Key}
	}
	w.replayed = true
	if ch, ok := w.e.(changing); ok && rec.Outcome.Status < 300 {
		w.out, err = ch.current(ctx, rec)
		return err
	}
	w.out, w.redacted = c.reveal(ctx, w.who, rec)
	return nil
}

// reveal is a replay of rec for who: the recorded answer, its secrets put
// back for the token that made it; any other token (or one whose secrets
// this server can no longer open) gets them null, named in redacted.
func (c *Core) reveal(ctx context.Context, who agentfs.Caller, rec *idempotency.Record) (out idempotency.Outcome, redacted []string) {
	out = rec.Outcome
	if len(out.Secrets) == 0 {
		return out, nil
	}
	if who.TokenID != "" && who.TokenID == rec.Sealed.For {
		withheld, err := c.cfg.RecordKeys.Open(rec.Sealed.Data, idempotency.SealedFor(who.Subject, who.Key, rec.Sealed.For))
		if err == nil {
			var body []byte
			if body, err = idempotency.Reveal(out.Body, withheld); err == nil {
				out.Body = body
				return out, nil
			}
		}
		c.cfg.Log.WarnContext(ctx, "a recorded secret cannot be opened (AGENTFS_RECORD_KEY changed?): the replay shows it redacted",
			"route", rec.Route, "err", err)
	}
	return out, out.Secrets
}

// commit takes ws, which must not depend on each other (no two on one
// path, one file or one key), through the transaction and its settling, in
// their order: a lone write alone when it can, else in one transaction with
// their keys' records and their items' statuses. When a group's
// transaction fails, nothing of it is kept and each write commits in a
// transaction of its own, so one write's failure never costs the others
// theirs; a write after one that stays pending does not commit
// (ErrNotCommitted, and the caller abandons it), so writes never commit
// out of order. A commit whose outcome is unknown is that outcome for every
// write of the group. Each write is ended (end) with the error it ends
// with.
func (c *Core) commit(ctx context.Context, ws []*write) []error { return c.commitGroup(ctx, ws, true) }

// commitApart commits ws as commit does, but as independent requests
// (a group commit's): when their transaction fails, every one of them
// still commits in a transaction of its own, whatever the others' end.
func (c *Core) commitApart(ctx context.Context, ws []*write) []error {
	return c.commitGroup(ctx, ws, false)
}

func (c *Core) commitGroup(ctx context.Context, ws []*write, ordered bool) []error {
	errs := make([]error, len(ws))
	if len(ws) > 1 {
		err := c.inTx(ctx, ws)
		if storage.CommitUncertain(err) && !transient(err) {
			// Whatever the error, no write of the group may end as if the
			// commit had failed: every item stays pending, and the batch's
			// retry finds each done or still pending.
			err = fmt.Errorf("%w: %w", agentfs.ErrUnavailable, err)
		}
		if err == nil || storage.CommitUncertain(err) {
			for i, w := range ws {
				errs[i] = c.end(ctx, w, err)
			}
			return errs
		}
		c.cfg.Log.DebugContext(ctx, "writes commit one by one", "writes", len(ws), "err", err)
	}
	for i, w := range ws {
		if ordered && i > 0 && errs[i-1] != nil && !errors.Is(errs[i-1], storage.ErrItemDone) {
			errs[i] = ErrNotCommitted
			continue
		}
		errs[i] = c.end(ctx, w, c.commitOne(ctx, w))
	}
	return errs
}

// commitOne commits one write: alone when it has nothing to commit with it
// and can, else in a transaction.
func (c *Core) commitOne(ctx context.Context, w *write) error {
	if l, ok := w.e.(loner); ok && w.claim == nil && w.item == nil {
		out, ok, err := l.commitAlone(ctx)
		if ok || err != nil {
			w.out = out
			return err
		}
	}
	return c.inTx(ctx, []*write{w})
}

// inTx applies ws in a transaction the core owns and commits it. A
// transaction that lost a race to a path runs again, up to 3 more times,
// deciding again against the state that won.
func (c *Core) inTx(ctx context.Context, ws []*write) error {
	for attempt := 0; ; attempt++ {
		err := c.applyInTx(ctx, ws)
		if !storage.RaceLost(err) || attempt == 3 {
			return err
		}
	}
}

func (c *Core) applyInTx(ctx context.Context, ws []*write) error {
	tx, err := c.store.Begin(ctx)
	if err != nil {
		return err
	}
	defer storage.Rollback(ctx, tx)
	if err := c.applyAll(ctx, tx, ws); err != nil {
		return err
	}
	return storage.Commit(ctx, tx)
}

// applyAll writes the effects of ws in tx, in their order, each with its
// key's record, then every item's status in one statement. Puts are
// gathered into one statement until an effect of another kind comes, so
// effects apply in order even if writes turn out to depend on each other
// after all (a file moved by another request since a batch was planned).
func (c *Core) applyAll(ctx context.Context, tx pgx.Tx, ws []*write) error {
	var puts []*write
	for _, w := range ws {
		if w.end != nil {
			continue
		}
		if _, ok := w.e.(grouped); ok {
			puts = append(puts, w)
			continue
		}
		if err := c.applyPuts(ctx, tx, puts); err != nil {
			return err
		}
		puts = nil
		out, err := w.e.apply(ctx, tx)
		if err == nil {
			err = c.record(ctx, tx, w, out)
		}
		if err != nil {
			return err
		}
		w.out = out
	}
	if err := c.applyPuts(ctx, tx, puts); err != nil {
		return err
	}
	return c.markItems(ctx, tx, ws)
}

// applyPuts applies gathered puts in one statement, then records their
// keys.
func (c *Core) applyPuts(ctx context.Context, tx pgx.Tx, ws []*write) error {
	if len(ws) == 0 {
		return nil
	}
	pending, origins := make([]*storage.PendingPut, len(ws)), make([]agentfs.Origin, len(ws))
	for i, w := range ws {
		pending[i], origins[i] = w.e.(grouped).pendingPut()
	}
	files, created, err := c.store.ApplyPutsTx(ctx, tx, pending, origins)
	if err != nil {
		return err
	}
	for i, w := range ws {
		out := w.e.(grouped).outcomeOf(files[i], created[i])
		if err := c.record(ctx, tx, w, out); err != nil {
			return err
		}
		w.out = out
	}
	return nil
}

// record records the outcome of w's effect on its key's claim in tx, if
// it has one.
func (c *Core) record(ctx context.Context, tx pgx.Tx, w *write, out idempotency.Outcome) error {
	if w.claim == nil {
		return nil
	}
	content, err := w.e.content()
	if err != nil {
		return err
	}
	recorded, sealed, err := c.seal(w.who, out)
	if err != nil {
		return err
	}
	return w.claim.Complete(ctx, tx, content, recorded, sealed)
}

// seal is what a record keeps of an outcome with secret members: its body
// with them null, and their values sealed for the token that made the
// request (none without record keys or a token to show them to).
func (c *Core) seal(who agentfs.Caller, out idempotency.Outcome) (idempotency.Outcome, idempotency.Sealed, error) {
	if len(out.Secrets) == 0 {
		return out, idempotency.Sealed{}, nil
	}
	redacted, withheld, err := idempotency.Withhold(out.Body, out.Secrets)
	if err != nil {
		return out, idempotency.Sealed{}, err
	}
	out.Body = redacted
	if c.cfg.RecordKeys == nil || who.TokenID == "" {
		return out, idempotency.Sealed{}, nil
	}
	data, err := c.cfg.RecordKeys.Seal(withheld, idempotency.SealedFor(who.Subject, who.Key, who.TokenID))
	return out, idempotency.Sealed{Data: data, For: who.TokenID}, err
}

// markItems sets the status of every item of ws in tx, only while each is
// still pending (else storage.ErrItemDone, and the effects roll back).
func (c *Core) markItems(ctx context.Context, tx pgx.Tx, ws []*write) error {
	var marks []storage.ItemMark
	for _, w := range ws {
		if w.item == nil {
			continue
		}
		m := storage.ItemMark{Index: w.item.index, ItemOutcome: succeeded(w.out)}
		if w.end != nil {
			m.ItemOutcome = *w.end
		}
		marks = append(marks, m)
	}
	if len(marks) == 0 {
		return nil
	}
	return storage.MarkItemsTx(ctx, tx, ws[0].item.batch.ID, marks)
}

// end ends w once its transaction is over (err is how): it is settled, and
// an item whose write failed in a way that will not pass on retry has that
// failure recorded as its outcome. It returns the error w ends with: nil
// for such an item, as for a committed write.
func (c *Core) end(ctx context.Context, w *write, err error) error {
	if w.item == nil || w.end != nil {
		return c.settle(ctx, w, err)
	}
	err = c.settle(ctx, w, err)
	switch {
	case err == nil, errors.Is(err, storage.ErrItemDone), transient(err):
		return err
	}
	w.failed = true
	prob, _ := problem.From(err)
	return c.store.MarkItem(ctx, w.item.batch.ID, w.item.index, failedOutcome(*w.item, prob, false))
}

// settle ends w once its transaction is over (err is how): its preparation
// finishes, and its key is recorded or released. It returns the error the
// write ends with.
func (c *Core) settle(ctx context.Context, w *write, err error) error {
	if w.settled {
		return err
	}
	w.settled = true
	if w.prepared {
		w.e.(preparer).finish(ctx, err)
	}
	if w.budget != nil {
		w.budget.settle(err == nil)
	}
	if w.claim == nil {
		return err
	}
	defer w.claim.Close()
	if err == nil {
		if c.cfg.AfterCommit != nil {
			c.cfg.AfterCommit()
		}
		return nil
	}
	return c.settleKey(ctx, w, err)
}

// settleKey ends the claim of a write that failed: an outcome decided
// against the stored state is recorded (the key replays it); anything that
// may succeed when repeated releases the key.
func (c *Core) settleKey(ctx context.Context, w *write, err error) error {
	if errors.Is(err, storage.ErrClaimLost) {
		c.noteKey(w, KeyClaimLost)
		return &agentfs.InProgressError{Key: w.who.Key, RetryAfter: time.Second}
	}
	p, _ := problem.From(err)
	if !problem.Recorded(p) || errors.Is(err, storage.ErrItemDone) {
		c.release(ctx, w.claim)
		return err
	}
	content, cerr := w.e.content()
	if cerr != nil {
		c.release(ctx, w.claim)
		return cerr
	}
	recorded := *p
	recorded.RequestID = w.who.RequestID
	rerr := w.claim.Record(ctx, content, idempotency.Outcome{Status: p.Status, Body: problem.Encode(&recorded)})
	switch {
	case errors.Is(rerr, storage.ErrClaimLost):
		c.noteKey(w, KeyClaimLost)
		return &agentfs.InProgressError{Key: w.who.Key, RetryAfter: time.Second}
	case rerr != nil:
		c.release(ctx, w.claim)
		return rerr
	}
	return err
}

func (c *Core) release(ctx context.Context, claim *storage.Claim) {
	if err := claim.Release(ctx); err != nil {
		c.cfg.Log.WarnContext(ctx, "release idempotency key", "err", err)
	}
}

// follow runs what comes after w's committed effect.
func (c *Core) follow(ctx context.Context, w *write) (idempotency.Result, error) {
	res := idempotency.Result{Outcome: w.out}
	f, ok := w.e.(follower)
	if !ok {
		return res, nil
	}
	out, err := f.follow(ctx, w.out)
	res.Outcome = out
	return res, err
}

// noteKey tells the observer, if any, what became of a keyed request (a
// batch item's runs are heard as items).
func (c *Core) noteKey(w *write, outcome string) {
	if c.cfg.Observer != nil && w.item == nil {
		c.cfg.Observer.KeyOutcome(outcome)
	}
}

// noteRefusal tells the observer about a keyed request refused as a
// conflict or as in progress; other failures are not the key's doing.
func (c *Core) noteRefusal(w *write, err error) {
	var (
		conflict *agentfs.ConflictError
		busy     *agentfs.InProgressError
	)
	switch {
	case errors.As(err, &conflict):
		c.noteKey(w, KeyConflict)
	case errors.As(err, &busy):
		c.noteKey(w, KeyInProgress)
	}
}

// transient reports whether a write's failure may pass when it is
// repeated: storage unavailable, a key in progress or a claim lost to
// another request, a cancelled run.
func transient(err error) bool {
	var busy *agentfs.InProgressError
	return errors.Is(err, agentfs.ErrUnavailable) || errors.As(err, &busy) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
