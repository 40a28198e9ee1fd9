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
	// Deliveries, when set, is the webhook delivery queue; without it,
	// webhooks are kept but nothing delivers them.
	Deliveries Deliveries
	// GroupMax is the most puts of one caller that commit together in one
	// transaction when they arrive while the caller's previous commit
	// runs (gather.go; 0: DefaultGroupMax, 1: each put commits alone).
	GroupMax int
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
	// CommitGroup hears that a put of its own committed, with writes-1
	// others of its caller gathered into its transaction (gather.go).
	CommitGroup(writes int)
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
	lanes lanes
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
