package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
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

// ErrClaimLost says another request took a claim over; the claim's owner
// must not commit its effect.
var ErrClaimLost = errors.New("idempotency claim was taken over")

// BeginKey admits a keyed request. It returns a Claim when this request now
// owns the key (first use, or a takeover of a lapsed claim); the completed
// Record when the key already holds an outcome for the same request (the
// caller compares the content, then replays or answers a conflict);
// *agentfs.ConflictError when the key holds another request;
// *agentfs.InProgressError while the owner runs. The claim names the token
// of ctx's reach (Within), whose records a scoped token may read back, and
// the run and paths of origin, which a run's recovery lists it by.
func (s *Store) BeginKey(ctx context.Context, subject, key, method, route string, request []byte, origin KeyOrigin) (*Claim, *idempotency.Record, error) {
	var (
		claim *Claim
		rec   *idempotency.Record
		fence int64
	)
	// A new key is one statement of its own (no transaction around it); a
	// key that is there already is decided against its row, locked.
	err := s.pool.QueryRow(ctx, `INSERT INTO idempotency_keys
			(subject, key, request_hash, method, route, status, fence, lease_expires_at, token_id, run_id, paths, request_uri)
			VALUES ($1, $2, $3, $4, $5, 'in_progress', 1, now() + make_interval(secs => $6), nullif($7, ''), nullif($8, ''), $9, nullif($10, ''))
			ON CONFLICT (subject, key) DO NOTHING RETURNING fence`,
		subject, key, request, method, route, s.cfg.IdempotencyLease.Seconds(), reachToken(ctx),
		origin.RunID, origin.paths(), origin.RequestURI).Scan(&fence)
	switch {
	case err == nil:
		claim = s.newClaim(subject, key, fence)
	case errors.Is(err, pgx.ErrNoRows):
		err = s.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			claim, rec, err = s.resolveKey(ctx, tx, subject, key, request)
			return err
		})
	default:
		err = Translate(err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	if claim != nil {
		// Renewed only once the claim is committed, until Close or until
		// the claim is found taken over.
		claim.lease = renewEvery(s.cfg.IdempotencyLease, claim.extend)
	}
	return claim, rec, nil
}

// KeyOrigin is what a key's record keeps of the request that claimed it,
// for a run's recovery (DESIGN §25): the run it carried (X-Run-ID, "" for
// none) and the paths its effect writes (none for a write that names its
// file by id), which a scoped token's recovery holds to its folders.
type KeyOrigin struct {
	RunID string
	Paths []string
	// RequestURI is the request's path and query, when a REST request of
	// its own claimed the key.
	RequestURI string
}

func (o KeyOrigin) paths() []string {
	if len(o.Paths) == 0 {
		return nil
	}
	return o.Paths
}

// resolveKey decides a request against the key's existing row, taking over
// a claim whose lease lapsed.
func (s *Store) resolveKey(ctx context.Context, tx pgx.Tx, subject, key string, request []byte) (*Claim, *idempotency.Record, error) {
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
		return nil, nil, &agentfs.ConflictError{Key: key}
	case rec.Completed:
		return nil, rec, nil
	case leaseLeft != nil && *leaseLeft > 0:
		return nil, nil, &agentfs.InProgressError{Key: key, RetryAfter: time.Duration(math.Ceil(*leaseLeft)) * time.Second}
	}
	var fence int64
	err = tx.QueryRow(ctx, `UPDATE idempotency_keys SET fence = fence + 1,
			lease_expires_at = now() + make_interval(secs => $3), token_id = nullif($4, '')
		WHERE subject = $1 AND key = $2 RETURNING fence`, subject, key, s.cfg.IdempotencyLease.Seconds(), reachToken(ctx)).Scan(&fence)
	if err != nil {
		return nil, nil, Translate(err)
	}
	return s.newClaim(subject, key, fence), nil, nil
}

// Operation returns what the subject's key holds, or agentfs.ErrNotFound;
// for a scoped reach (Within), only a key whose effect's paths lie in its
// folders, or one that names no path and its token or a descendant
// claimed (visibleKey): another's record may answer with files outside.
func (s *Store) Operation(ctx context.Context, subject, key string) (*idempotency.Record, error) {
	args := pgx.NamedArgs{"subject": subject, "key": key}
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+`
		FROM idempotency_keys WHERE subject = @subject AND key = @key AND `+visibleKey(ctx, args), args))
	if err != nil {
		return nil, fmt.Errorf("get operation: %w", err)
	}
	return rec, nil
}

// SweepKeys deletes outcomes past their retention and claims abandoned for
// as long, and reports how many rows went.
func (s *Store) SweepKeys(ctx context.Context) (int64, error) {
	// A batch's key is kept until the batch is terminal, however old. Keys
	// go in chunks, so each statement stays short however many expired.
	const chunk = 5000
	return s.inChunks(ctx, "sweep idempotency keys", chunk, `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
		SELECT k.ctid FROM idempotency_keys k
		WHERE ((k.status = 'completed' AND k.expires_at < now())
		    OR (k.status = 'in_progress' AND k.lease_expires_at < now() - make_interval(secs => $1)))
		  AND NOT (k.resource_object = 'batch' AND EXISTS (
		        SELECT 1 FROM batches b WHERE b.id = k.resource_id AND b.status IN ('queued', 'running')))
		LIMIT $2))`,
		s.cfg.IdempotencyRetention.Seconds(), chunk)
}

const recordColumns = `key, method, route, status = 'completed', coalesce(content_hash, ''::bytea),
	coalesce(response_status, 0), coalesce(response_headers, '{}'::jsonb), coalesce(response_body, ''::bytea),
	coalesce(resource_object, ''), coalesce(resource_id, ''), created_at, completed_at, expires_at,
	coalesce(response_secrets, '{}'), sealed_secrets, coalesce(sealed_for, ''),
	coalesce(status = 'in_progress' AND lease_expires_at <= now(), false),
	coalesce(extract(epoch FROM lease_expires_at - now())::float8, 0)`

func scanRecord(row pgx.Row, extra ...any) (*idempotency.Record, error) {
	var r idempotency.Record
	var headers []byte
	var leaseLeft float64
	dest := append([]any{&r.Key, &r.Method, &r.Route, &r.Completed, &r.ContentHash,
		&r.Outcome.Status, &headers, &r.Outcome.Body, &r.Outcome.Resource.Object, &r.Outcome.Resource.ID,
		&r.CreatedAt, &r.CompletedAt, &r.ExpiresAt, &r.Outcome.Secrets, &r.Sealed.Data, &r.Sealed.For,
		&r.Abandoned, &leaseLeft}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, Translate(err)
	}
	if !r.Completed && leaseLeft > 0 {
		r.RetryAfter = time.Duration(math.Ceil(leaseLeft)) * time.Second
	}
	if len(r.Outcome.Secrets) == 0 {
		r.Outcome.Secrets = nil
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
	lease        *renewal // extends the lease while the request runs (a long body streaming)
}

func (s *Store) newClaim(subject, key string, fence int64) *Claim {
	return &Claim{store: s, subject: subject, key: key, fence: fence}
}

// Key is the Idempotency-Key the claim holds.
func (c *Claim) Key() string { return c.key }

// extend renews the lease once; held is false when the claim is no longer
// this request's to renew.
func (c *Claim) extend(ctx context.Context) (held bool, err error) {
	tag, err := c.store.pool.Exec(ctx, `UPDATE idempotency_keys
		SET lease_expires_at = now() + make_interval(secs => $4)
		WHERE subject = $1 AND key = $2 AND fence = $3 AND status = 'in_progress'`,
		c.subject, c.key, c.fence, c.store.cfg.IdempotencyLease.Seconds())
	return tag.RowsAffected() > 0, Translate(err)
}

// Close stops renewing the lease.
func (c *Claim) Close() {
	if c.lease != nil {
		c.lease.end()
	}
}

// Complete records the outcome in tx, the transaction that commits the
// effect, after checking under a row lock that this claim is still the
// key's owner; else it returns ErrClaimLost and the effect must roll back.
// An outcome with Secrets is recorded as given (its body already shows
// them null), with their sealed values.
func (c *Claim) Complete(ctx context.Context, tx pgx.Tx, contentHash []byte, out idempotency.Outcome, sealed idempotency.Sealed) error {
	headers, err := json.Marshal(out.Header)
	if err != nil {
		return err
	}
	// The row's lock, taken by the update, decides against a takeover
	// that committed first: the condition is checked again on its row.
	tag, err := tx.Exec(ctx, `UPDATE idempotency_keys SET status = 'completed', content_hash = $3,
			response_status = $4, response_headers = $5, response_body = $6,
			resource_object = nullif($7, ''), resource_id = nullif($8, ''),
			completed_at = now(), expires_at = now() + make_interval(secs => $9), lease_expires_at = NULL,
			response_secrets = $10, sealed_secrets = $11, sealed_for = nullif($12, '')
		WHERE subject = $1 AND key = $2 AND fence = $13 AND status = 'in_progress'`,
		c.subject, c.key, contentHash, out.Status, headers, out.Body,
		out.Resource.Object, out.Resource.ID, c.store.cfg.IdempotencyRetention.Seconds(),
		out.Secrets, sealed.Data, sealed.For, c.fence)
	switch {
	case err != nil:
		return Translate(fmt.Errorf("record idempotency outcome: %w", err))
	case tag.RowsAffected() == 0:
		return ErrClaimLost
	}
	return nil
}

// Record records the outcome of a request whose effect did not happen
// (a failure decided against the stored state) in a transaction of its own,
// after the same check as Complete.
func (c *Claim) Record(ctx context.Context, contentHash []byte, out idempotency.Outcome) error {
	return c.store.WithTx(ctx, func(tx pgx.Tx) error { return c.Complete(ctx, tx, contentHash, out, idempotency.Sealed{}) })
}

// Release frees the key after a failure that may succeed when repeated
// (a 5xx, a timeout, a body that did not arrive), so the same key can run
// again. It releases only this claim, never a takeover's.
func (c *Claim) Release(ctx context.Context) error {
	c.Close()
	_, err := c.store.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM idempotency_keys
		WHERE subject = $1 AND key = $2 AND fence = $3 AND status = 'in_progress'`, c.subject, c.key, c.fence)
	return Translate(err)
}
