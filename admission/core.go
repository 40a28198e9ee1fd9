// Package admission is the admission core: the one place where AgentFS keeps
// "no record, no effect". Every door — an HTTP route, a batch item, an MCP
// tool — binds its input, calls one method of Core with the Caller and the
// write, and renders the Result. The core claims the Idempotency-Key, runs
// the write, and commits the effect and the key's record in one Postgres
// transaction that it owns and hands down to the storage helpers; it answers
// replays, conflicts and keys still in progress, takes over a claim whose
// owner died (fenced, so a late owner commits nothing), and records or
// releases the key when the write fails (the idempotency rules). No door handles a
// transaction, a claim or a fingerprint itself.
package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// Queue puts a batch on the durable queue in the transaction that creates
// it, so the batch runs once that transaction commits and never otherwise.
type Queue interface {
	Enqueue(ctx context.Context, tx pgx.Tx, batchID string) error
}

// Config is what the core needs.
type Config struct {
	Store *storage.Store
	Queue Queue
	// PublicURL is the base of every file's url in the responses the core
	// renders and records.
	PublicURL string
	Log       *slog.Logger
	// AfterCommit, when set, runs after a keyed write committed and before
	// its door answers. Fault-injection tests use it to crash there.
	AfterCommit func()
	// MidComplete, when set, runs once a complete has assembled its upload
	// session and before it commits the file. Fault-injection tests use it
	// to crash there.
	MidComplete func()
	// Now is the clock of what the core renders (0: time.Now).
	Now func() time.Time
	// Observer, when set, hears what became of each keyed request and each
	// batch item (the metrics of cmd/agentfs).
	Observer Observer
	// RecordKeys seal the secrets of recorded answers (a share link's url),
	// so that a replay to the token that made the request shows them
	// again. Nil keeps none: a replay shows them null, as to any other
	// token.
	RecordKeys *idempotency.RecordKeys
}

// Observer hears the core's decisions, so they can be counted without the
// core knowing how. Every value it is given comes from a closed set (the
// Key… and Item… constants, agentfs.Op… or "other"), never a subject, key or
// path. Its methods are called on the request's goroutine: keep them cheap.
type Observer interface {
	// KeyOutcome hears how a request with an Idempotency-Key was admitted.
	KeyOutcome(outcome string)
	// ItemOutcome hears how one run of a batch item ended.
	ItemOutcome(op, outcome string)
}

// What became of a keyed request (Observer.KeyOutcome).
const (
	KeyExecuted   = "executed"    // claimed and run (whatever the write answered)
	KeyReplayed   = "replayed"    // answered with the recorded outcome
	KeyConflict   = "conflict"    // the key holds another request: 409 IDEMPOTENCY_CONFLICT
	KeyInProgress = "in_progress" // the key is held by a live claim: 409 OPERATION_IN_PROGRESS
	KeyClaimLost  = "claim_lost"  // the claim was taken over while this request ran (its lease lapsed)
)

// What became of one run of a batch item (Observer.ItemOutcome).
const (
	ItemApplied  = "applied"  // its effect committed with its status
	ItemReplayed = "replayed" // its key held a recorded success
	ItemFailed   = "failed"   // recorded as failed (including a replayed failure)
	ItemRetried  = "retried"  // a transient failure: the batch runs it again later
	ItemSkipped  = "skipped"  // another worker had already settled it
)

// Core admits and runs every keyed (and unkeyed) write.
type Core struct {
	store *storage.Store
	queue Queue
	cfg   Config
}

// New returns the core.
func New(cfg Config) (*Core, error) {
	if cfg.Store == nil || cfg.Queue == nil || cfg.Log == nil || cfg.PublicURL == "" {
		return nil, errors.New("admission: Store, Queue, Log and PublicURL are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Core{store: cfg.Store, queue: cfg.Queue, cfg: cfg}, nil
}

// Operation returns what the subject's key holds, or agentfs.ErrNotFound:
// a key that holds nothing proves that nothing happened under it.
func (c *Core) Operation(ctx context.Context, subject, key string) (*idempotency.Record, error) {
	return c.store.Operation(ctx, subject, key)
}

// write is one effect as the core runs it. The methods that build one (in
// writes.go) close over storage's helpers: every call goes down.
type write struct {
	method, route string // recorded with the key, shown by /v1/operations
	request       idempotency.Request
	// content is the content's fingerprint: the SHA-256 of the bytes, or of
	// a JSON body's canonical form. It may read the body to learn it (a
	// repeat whose content must be compared).
	content func() ([]byte, error)
	// prepare does what must happen before the transaction and outside it,
	// such as streaming the bytes into a new blob.
	prepare func(ctx context.Context) error
	// apply writes the effect in tx and renders the response it earns.
	apply func(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error)
	// alone, when set, commits a write that has nothing to commit with it
	// (no key, no batch item) without a transaction; ok false leaves it to
	// apply.
	alone func(ctx context.Context) (out idempotency.Outcome, ok bool, err error)
	// finish ends the write once its transaction is over (err is how):
	// it removes what the effect did not come to reference.
	finish func(ctx context.Context, err error)
	// after runs once the effect committed: work that follows it and
	// cannot undo it (dropping S3 parts, waiting for a batch).
	after func(ctx context.Context, out idempotency.Outcome) (idempotency.Outcome, error)
	// current answers a replay with the resource's current state, for the
	// routes whose resource keeps changing (sessions, batches).
	current func(ctx context.Context, rec *idempotency.Record) (idempotency.Outcome, error)
	// pending, for a put whose bytes go into a new blob, is that put once
	// prepared, and origin what its event records: a batch commits many
	// such puts in one statement (storage.ApplyPutsTx) instead of apply.
	pending **storage.PendingPut
	origin  agentfs.Origin
}

// item names the batch item a write runs as: its status commits with the
// effect, and only while it is still pending.
type item struct {
	batch *agentfs.Batch
	index int
}

// run admits w for who and runs it: unkeyed, it just commits; keyed, it
// claims the key, then commits the effect with the key's record, or replays
// the recorded outcome, or refuses.
func (c *Core) run(ctx context.Context, who agentfs.Caller, it *item, w *write) (idempotency.Result, error) {
	if err := admit(who, w); err != nil {
		return idempotency.Result{}, err
	}
	if who.Key == "" {
		out, err := c.commit(ctx, who, it, w, nil)
		if err != nil {
			return idempotency.Result{}, err
		}
		return c.after(ctx, w, idempotency.Result{Outcome: out})
	}
	claim, rec, err := c.store.BeginKey(ctx, who.Subject, who.Key, w.method, w.route, w.request.Sum())
	switch {
	case err != nil:
		c.noteRefusal(err)
		return idempotency.Result{}, err
	case rec != nil:
		res, err := c.replay(ctx, who, w, rec)
		if err == nil {
			c.noteKey(KeyReplayed)
		} else {
			c.noteRefusal(err)
		}
		return res, err
	}
	defer claim.Close()
	c.noteKey(KeyExecuted)
	out, err := c.commit(ctx, who, it, w, claim)
	if err != nil {
		return idempotency.Result{}, c.settle(ctx, who, w, claim, err)
	}
	if c.cfg.AfterCommit != nil {
		c.cfg.AfterCommit()
	}
	return c.after(ctx, w, idempotency.Result{Outcome: out})
}

// admit refuses a write whose caller may not run it, before anything is
// claimed or read (403 FORBIDDEN, nothing claimed): checked before the key
// is looked at, a replay is answered only to a caller who may make the
// request. Every write of every door, standalone or a batch item, passes
// here; a grant's path prefixes are checked here too, against the
// write's targets.
func admit(who agentfs.Caller, w *write) error {
	return who.Allow(w.request.Operation)
}

// commit runs the write and commits its effect in one transaction with
// everything that must commit with it: the key's record and the batch
// item's status.
func (c *Core) commit(ctx context.Context, who agentfs.Caller, it *item, w *write, claim *storage.Claim) (out idempotency.Outcome, err error) {
	if w.prepare != nil {
		if err := w.prepare(ctx); err != nil {
			return out, err
		}
	}
	return c.commitPrepared(ctx, who, it, w, claim)
}

// commitPrepared is commit once w is prepared: its transaction, then its
// finish.
func (c *Core) commitPrepared(ctx context.Context, who agentfs.Caller, it *item, w *write, claim *storage.Claim) (out idempotency.Outcome, err error) {
	if w.finish != nil {
		defer func() { w.finish(ctx, err) }()
	}
	if claim == nil && it == nil && w.alone != nil {
		out, ok, err := w.alone(ctx)
		if ok || err != nil {
			return out, err
		}
	}
	err = c.store.WithTxRetry(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = c.applyTx(ctx, tx, who, it, w, claim)
		return err
	})
	return out, err
}

// applyTx writes w's effect in tx with what must commit with it: the key's
// record, and the batch item's status, set only while the item is pending.
func (c *Core) applyTx(ctx context.Context, tx pgx.Tx, who agentfs.Caller, it *item, w *write, claim *storage.Claim) (idempotency.Outcome, error) {
	out, err := w.apply(ctx, tx)
	if err == nil {
		err = c.record(ctx, tx, who, w, claim, out)
	}
	if err != nil || it == nil {
		return out, err
	}
	return out, storage.MarkItemTx(ctx, tx, it.batch.ID, it.index, succeeded(out))
}

// record records the outcome of w's effect on the key's claim in tx, if
// it has one, its secrets sealed for who.
func (c *Core) record(ctx context.Context, tx pgx.Tx, who agentfs.Caller, w *write, claim *storage.Claim, out idempotency.Outcome) error {
	if claim == nil {
		return nil
	}
	content, err := w.content()
	if err != nil {
		return err
	}
	recorded, sealed, err := c.seal(who, out)
	if err != nil {
		return err
	}
	return claim.Complete(ctx, tx, content, recorded, sealed)
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

// reveal is a replay of rec for who: the recorded answer, its secrets put
// back for the token that made it; any other token (or one whose secrets
// this server can no longer open) gets them null, named in Redacted.
func (c *Core) reveal(ctx context.Context, who agentfs.Caller, rec *idempotency.Record) idempotency.Result {
	res := idempotency.Result{Outcome: rec.Outcome, Replayed: true}
	if len(rec.Outcome.Secrets) == 0 {
		return res
	}
	if who.TokenID != "" && who.TokenID == rec.Sealed.For {
		withheld, err := c.cfg.RecordKeys.Open(rec.Sealed.Data, idempotency.SealedFor(who.Subject, who.Key, rec.Sealed.For))
		if err == nil {
			var body []byte
			if body, err = idempotency.Reveal(rec.Outcome.Body, withheld); err == nil {
				res.Body = body
				return res
			}
		}
		c.cfg.Log.WarnContext(ctx, "a recorded secret cannot be opened (AGENTFS_RECORD_KEY changed?): the replay shows it redacted",
			"route", rec.Route, "err", err)
	}
	res.Redacted = rec.Outcome.Secrets
	return res
}

func (c *Core) after(ctx context.Context, w *write, res idempotency.Result) (idempotency.Result, error) {
	if w.after == nil {
		return res, nil
	}
	out, err := w.after(ctx, res.Outcome)
	res.Outcome = out
	return res, err
}

// settle ends a claim whose write failed: an outcome decided against the
// stored state is recorded (the key replays it); anything that may succeed
// when repeated releases the key.
func (c *Core) settle(ctx context.Context, who agentfs.Caller, w *write, claim *storage.Claim, err error) error {
	if errors.Is(err, storage.ErrClaimLost) {
		c.noteKey(KeyClaimLost)
		return &agentfs.InProgressError{Key: who.Key, RetryAfter: time.Second}
	}
	p, _ := problem.From(err)
	if !problem.Recorded(p) || errors.Is(err, storage.ErrItemDone) {
		c.release(ctx, claim)
		return err
	}
	content, cerr := w.content()
	if cerr != nil {
		c.release(ctx, claim)
		return cerr
	}
	recorded := *p
	recorded.RequestID = who.RequestID
	out := idempotency.Outcome{Status: p.Status, Body: problem.Encode(&recorded)}
	rerr := c.store.WithTx(ctx, func(tx pgx.Tx) error { return claim.Complete(ctx, tx, content, out, idempotency.Sealed{}) })
	switch {
	case errors.Is(rerr, storage.ErrClaimLost):
		c.noteKey(KeyClaimLost)
		return &agentfs.InProgressError{Key: who.Key, RetryAfter: time.Second}
	case rerr != nil:
		c.release(ctx, claim)
		return rerr
	}
	return err
}

// noteKey tells the observer, if any, what became of a keyed request.
func (c *Core) noteKey(outcome string) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.KeyOutcome(outcome)
	}
}

// noteRefusal tells the observer about a keyed request refused as a
// conflict or as in progress; other failures are not the key's doing.
func (c *Core) noteRefusal(err error) {
	var (
		conflict *agentfs.ConflictError
		busy     *agentfs.InProgressError
	)
	switch {
	case errors.As(err, &conflict):
		c.noteKey(KeyConflict)
	case errors.As(err, &busy):
		c.noteKey(KeyInProgress)
	}
}

func (c *Core) release(ctx context.Context, claim *storage.Claim) {
	if err := claim.Release(ctx); err != nil {
		c.cfg.Log.WarnContext(ctx, "release idempotency key", "err", err)
	}
}

// replay answers a repeat of a completed request with its recorded
// outcome, once its content is known to be the same.
func (c *Core) replay(ctx context.Context, who agentfs.Caller, w *write, rec *idempotency.Record) (idempotency.Result, error) {
	sum, err := w.content()
	if err != nil {
		return idempotency.Result{}, err
	}
	if !bytes.Equal(sum, rec.ContentHash) {
		return idempotency.Result{}, &agentfs.ConflictError{Key: who.Key}
	}
	if w.current != nil && rec.Outcome.Status < 300 {
		out, err := w.current(ctx, rec)
		if err != nil {
			return idempotency.Result{}, err
		}
		return idempotency.Result{Outcome: out, Replayed: true}, nil
	}
	return c.reveal(ctx, who, rec), nil
}

// hashBody reads a body to its end only to learn its SHA-256 (a repeat
// whose content must be compared; nothing is stored). More than limit bytes
// is agentfs.ErrTooLarge; a limit of 0 or less is none, as storage reads
// agentfs.Put.MaxBytes, so a write that committed without a cap replays.
func hashBody(body io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = math.MaxInt64 - 1
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, limit+1))
	if err != nil {
		return nil, agentfs.BodyError(err)
	}
	if n > limit {
		return nil, agentfs.ErrTooLarge
	}
	return h.Sum(nil), nil
}

func noContent() ([]byte, error) { return nil, nil }

// fileID is the file an outcome names, if any.
func fileID(out idempotency.Outcome) string {
	if out.Resource.Object == "file" {
		return out.Resource.ID
	}
	return ""
}
