package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfs/agentfs/storage"
)

// Why an effect and its record cannot part: a keyed write first claims its
// key (a row in_progress with a fencing token), then runs. The effect's own
// transaction ends by locking that row, checking the token is still the
// claim's, and marking the row completed with the outcome; it commits both or
// neither. So a file never exists without its key's record, and a completed
// record always names an effect that committed. A claim left by a dead
// process holds no effect; once its lease lapses the next request with the
// same key and request takes it over (bumping the token), and a paused owner
// that wakes late fails the token check and commits nothing.

// Errors of Begin and Complete.
var (
	// ErrConflict says the key was used for a different request.
	ErrConflict = errors.New("idempotency key reused for a different request")
	// ErrClaimLost says another request took the claim over; this one must
	// not commit its effect.
	ErrClaimLost = errors.New("idempotency claim was taken over")
)

// InProgressError says the key's first request is still running.
type InProgressError struct {
	Key        string
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string { return "a request with key " + e.Key + " is in progress" }

// Store keeps claims and recorded outcomes in Postgres.
type Store struct {
	pool      *pgxpool.Pool
	lease     time.Duration
	retention time.Duration
}

// NewStore returns a store on pool. lease is how long a claim lives without
// renewal; retention how long outcomes are kept.
func NewStore(pool *pgxpool.Pool, lease, retention time.Duration) (*Store, error) {
	if pool == nil || lease <= 0 || retention <= 0 {
		return nil, errors.New("idempotency: pool, lease and retention are required")
	}
	return &Store{pool: pool, lease: lease, retention: retention}, nil
}

// Retention is how long recorded outcomes are kept.
func (s *Store) Retention() time.Duration { return s.retention }

// Resource names what a write created or changed.
type Resource struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// Outcome is a response as recorded for replay.
type Outcome struct {
	Status   int
	Header   map[string]string // ETag, Location
	Body     []byte
	Resource Resource
}

// Record is what a key holds.
type Record struct {
	Key         string
	Method      string
	Route       string
	Completed   bool
	ContentHash []byte
	Outcome     Outcome
	CreatedAt   time.Time
	CompletedAt *time.Time
	ExpiresAt   *time.Time
}

// Begin admits a keyed request. It returns a Claim when this request now owns
// the key (first use, or a takeover of a lapsed claim); the completed Record
// when the key already holds an outcome for the same request (the caller
// compares the content, then replays or answers a conflict); ErrConflict when
// the key holds another request; *InProgressError while the owner runs.
func (s *Store) Begin(ctx context.Context, subject, key, method, route string, request []byte) (*Claim, *Record, error) {
	var (
		claim *Claim
		rec   *Record
	)
	err := storage.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var fence int64
		err := tx.QueryRow(ctx, `INSERT INTO idempotency_keys
			(subject, key, request_hash, method, route, status, fence, lease_expires_at)
			VALUES ($1, $2, $3, $4, $5, 'in_progress', 1, now() + make_interval(secs => $6))
			ON CONFLICT (subject, key) DO NOTHING RETURNING fence`,
			subject, key, request, method, route, s.lease.Seconds()).Scan(&fence)
		if err == nil {
			claim = s.newClaim(subject, key, fence)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return storage.Translate(err)
		}
		claim, rec, err = s.resolve(ctx, tx, subject, key, request)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	if claim != nil {
		go claim.renew() // only once the claim is committed
	}
	return claim, rec, nil
}

// resolve decides a request against the key's existing row, taking over a
// claim whose lease lapsed.
func (s *Store) resolve(ctx context.Context, tx pgx.Tx, subject, key string, request []byte) (*Claim, *Record, error) {
	var (
		stored    []byte
		leaseLeft *float64
	)
	rec, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+`, request_hash,
			extract(epoch FROM lease_expires_at - now())::float8
		FROM idempotency_keys WHERE subject = $1 AND key = $2 FOR UPDATE`, subject, key), &stored, &leaseLeft)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case string(stored) != string(request):
		return nil, nil, ErrConflict
	case rec.Completed:
		return nil, rec, nil
	case leaseLeft != nil && *leaseLeft > 0:
		return nil, nil, &InProgressError{Key: key, RetryAfter: time.Duration(math.Ceil(*leaseLeft)) * time.Second}
	}
	var fence int64
	err = tx.QueryRow(ctx, `UPDATE idempotency_keys SET fence = fence + 1,
			lease_expires_at = now() + make_interval(secs => $3)
		WHERE subject = $1 AND key = $2 RETURNING fence`, subject, key, s.lease.Seconds()).Scan(&fence)
	if err != nil {
		return nil, nil, storage.Translate(err)
	}
	return s.newClaim(subject, key, fence), nil, nil
}

// Operation returns what the subject's key holds, or agentfs.ErrNotFound.
func (s *Store) Operation(ctx context.Context, subject, key string) (*Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+`
		FROM idempotency_keys WHERE subject = $1 AND key = $2`, subject, key))
	if err != nil {
		return nil, fmt.Errorf("get operation: %w", err)
	}
	return rec, nil
}

// Sweep deletes outcomes past their retention and claims abandoned for as
// long, and reports how many rows went.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	// A batch's key is kept until the batch is terminal, however old. Keys
	// go in chunks, so each statement stays short however many expired.
	const chunk = 5000
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
			SELECT k.ctid FROM idempotency_keys k
			WHERE ((k.status = 'completed' AND k.expires_at < now())
			    OR (k.status = 'in_progress' AND k.lease_expires_at < now() - make_interval(secs => $1)))
			  AND NOT (k.resource_object = 'batch' AND EXISTS (
			        SELECT 1 FROM batches b WHERE b.id = k.resource_id AND b.status IN ('queued', 'running')))
			LIMIT $2))`,
			s.retention.Seconds(), chunk)
		if err != nil {
			return total, storage.Translate(fmt.Errorf("sweep idempotency keys: %w", err))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}

const recordColumns = `key, method, route, status = 'completed', coalesce(content_hash, ''::bytea),
	coalesce(response_status, 0), coalesce(response_headers, '{}'::jsonb), coalesce(response_body, ''::bytea),
	coalesce(resource_object, ''), coalesce(resource_id, ''), created_at, completed_at, expires_at`

func scanRecord(row pgx.Row, extra ...any) (*Record, error) {
	var r Record
	var headers []byte
	dest := append([]any{&r.Key, &r.Method, &r.Route, &r.Completed, &r.ContentHash,
		&r.Outcome.Status, &headers, &r.Outcome.Body, &r.Outcome.Resource.Object, &r.Outcome.Resource.ID,
		&r.CreatedAt, &r.CompletedAt, &r.ExpiresAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, storage.Translate(err)
	}
	if err := json.Unmarshal(headers, &r.Outcome.Header); err != nil {
		return nil, fmt.Errorf("decode recorded headers: %w", err)
	}
	return &r, nil
}

// Claim is a request's ownership of its key. Its lease is renewed until
// Close; Complete or Record ends it with an outcome, Release frees the key.
type Claim struct {
	store        *Store
	subject, key string
	fence        int64
	stop         chan struct{}
	stopOnce     sync.Once
}

func (s *Store) newClaim(subject, key string, fence int64) *Claim {
	return &Claim{store: s, subject: subject, key: key, fence: fence, stop: make(chan struct{})}
}

// renew extends the lease while the request runs (a long body streaming),
// until Close or until the claim is found taken over.
func (c *Claim) renew() {
	t := time.NewTicker(c.store.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.store.lease/3)
		tag, err := c.store.pool.Exec(ctx, `UPDATE idempotency_keys
			SET lease_expires_at = now() + make_interval(secs => $4)
			WHERE subject = $1 AND key = $2 AND fence = $3 AND status = 'in_progress'`,
			c.subject, c.key, c.fence, c.store.lease.Seconds())
		cancel()
		if err == nil && tag.RowsAffected() == 0 {
			return // completed, released or taken over
		}
	}
}

// Close stops renewing the lease.
func (c *Claim) Close() { c.stopOnce.Do(func() { close(c.stop) }) }

// Complete records the outcome in tx, the transaction that commits the
// effect, after checking under a row lock that this claim is still the
// key's owner; else it returns ErrClaimLost and the effect must roll back.
func (c *Claim) Complete(ctx context.Context, tx pgx.Tx, contentHash []byte, out Outcome) error {
	var fence int64
	var status string
	err := tx.QueryRow(ctx, `SELECT fence, status FROM idempotency_keys
		WHERE subject = $1 AND key = $2 FOR UPDATE`, c.subject, c.key).Scan(&fence, &status)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (fence != c.fence || status != "in_progress") {
		return ErrClaimLost
	}
	if err != nil {
		return storage.Translate(fmt.Errorf("lock idempotency key: %w", err))
	}
	headers, err := json.Marshal(out.Header)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE idempotency_keys SET status = 'completed', content_hash = $3,
			response_status = $4, response_headers = $5, response_body = $6,
			resource_object = nullif($7, ''), resource_id = nullif($8, ''),
			completed_at = now(), expires_at = now() + make_interval(secs => $9), lease_expires_at = NULL
		WHERE subject = $1 AND key = $2`,
		c.subject, c.key, contentHash, out.Status, headers, out.Body,
		out.Resource.Object, out.Resource.ID, c.store.retention.Seconds())
	if err != nil {
		return storage.Translate(fmt.Errorf("record idempotency outcome: %w", err))
	}
	return nil
}

// Record records an outcome that changed nothing (one decided against the
// stored state, such as 409 PATH_EXISTS) in a transaction of its own.
func (c *Claim) Record(ctx context.Context, contentHash []byte, out Outcome) error {
	defer c.Close()
	return storage.WithTx(ctx, c.store.pool, func(tx pgx.Tx) error {
		return c.Complete(ctx, tx, contentHash, out)
	})
}

// Release frees the key after a failure that may succeed when repeated
// (a 5xx, a timeout, a body that did not arrive), so the same key can run
// again. It releases only this claim, never a takeover's.
func (c *Claim) Release(ctx context.Context) error {
	c.Close()
	_, err := c.store.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM idempotency_keys
		WHERE subject = $1 AND key = $2 AND fence = $3 AND status = 'in_progress'`, c.subject, c.key, c.fence)
	return storage.Translate(err)
}

// Disposition says what becomes of a claimed key once its request ended.
type Disposition int

// Dispositions of DESIGN §6.
const (
	Keep    Disposition = iota // record the outcome; the key replays it
	Release                    // free the key; the same key may run again
)

// DispositionOf applies DESIGN §6's table to a response status and problem
// code: successes and outcomes decided against stored state are recorded;
// transient failures release the key.
func DispositionOf(status int, code string) Disposition {
	switch {
	case status >= 200 && status < 300:
		return Keep
	case code == "OPERATION_IN_PROGRESS":
		return Release
	case status == http.StatusNotFound, status == http.StatusConflict,
		status == http.StatusPreconditionFailed, status == http.StatusUnavailableForLegalReasons:
		return Keep
	case status == http.StatusUnprocessableEntity && (code == "SIZE_MISMATCH" || code == "PARTS_MISSING"):
		return Keep
	}
	return Release
}
