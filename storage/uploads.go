package storage

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/hashwindow"
)

// DefaultUploadHashWindow is Config.UploadHashWindow when zero: parts of a
// few sessions sending 4 at a time, well within the memory budget of 64 MiB.
const DefaultUploadHashWindow = 32 << 20

const uploadColumns = `id, subject, path, size_bytes, content_type, replace, sha256, part_size, part_count,
	status, s3_upload_id, blob_key, hashed_parts, coalesce(hash_state, ''::bytea), assembled,
	coalesce(file_id, ''), coalesce(error, ''::bytea), coalesce(agent_id, ''), coalesce(run_id, ''),
	created_at, expires_at, expires_in_seconds`

func scanUpload(row pgx.Row) (*agentfs.Upload, error) {
	var u agentfs.Upload
	var expiresIn int64
	err := row.Scan(&u.ID, &u.Subject, &u.Path, &u.SizeBytes, &u.ContentType, &u.Replace, &u.SHA256,
		&u.PartSize, &u.PartCount, &u.Status, &u.S3UploadID, &u.BlobKey, &u.HashedParts, &u.HashState,
		&u.Assembled, &u.FileID, &u.Error, &u.By.AgentID, &u.By.RunID, &u.CreatedAt, &u.ExpiresAt, &expiresIn)
	if err != nil {
		return nil, Translate(err)
	}
	u.ExpiresIn = time.Duration(expiresIn) * time.Second
	return &u, nil
}

func (s *Store) core() minio.Core { return minio.Core{Client: s.s3} }

// CreateUploadTx opens a session in tx, or returns the live session that
// matches the request (subject, path, size, content type and declared
// sha256), so a caller that lost the answer resumes where it was. created
// says which. A new session past the subject's bound of open sessions
// (req.MaxOpen) is an *agentfs.TooManyUploadsError; resuming one never is.
func (s *Store) CreateUploadTx(ctx context.Context, tx pgx.Tx, req agentfs.NewUpload) (*agentfs.Upload, bool, error) {
	// One creator at a time per path, so two racing creates share a session.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentfs.upload.' || $1 || '/' || $2))`,
		req.Subject, req.Path); err != nil {
		return nil, false, Translate(err)
	}
	u, err := scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
		WHERE subject = $1 AND path = $2 AND size_bytes = $3 AND content_type = $4 AND sha256 = $5
		  AND status = 'pending' AND expires_at > now()
		ORDER BY created_at DESC LIMIT 1`, req.Subject, req.Path, req.SizeBytes, req.ContentType, req.SHA256))
	switch {
	case errors.Is(err, agentfs.ErrNotFound):
		if err := s.checkOpenUploads(ctx, tx, req); err != nil {
			return nil, false, fmt.Errorf("create upload: %w", err)
		}
		u, err = s.insertUpload(ctx, tx, req)
		if err != nil {
			return nil, false, fmt.Errorf("create upload: %w", err)
		}
		return u, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("create upload: %w", err)
	}
	if err := s.loadParts(ctx, tx, u); err != nil {
		return nil, false, fmt.Errorf("create upload: %w", err)
	}
	return u, false, nil
}

// checkOpenUploads refuses a new session, as an
// *agentfs.TooManyUploadsError, when the subject already has req.MaxOpen
// open. Creates of one subject take turns here (after the lock of their
// path), so racing creates never open more than that.
func (s *Store) checkOpenUploads(ctx context.Context, tx pgx.Tx, req agentfs.NewUpload) error {
	if req.MaxOpen <= 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('agentfs.uploads.' || $1, 0))`, req.Subject); err != nil {
		return Translate(err)
	}
	var open int
	var first *float64
	if err := tx.QueryRow(ctx, `SELECT count(*), min(extract(epoch FROM expires_at - clock_timestamp()))::float8
		FROM uploads WHERE subject = $1 AND status IN ('pending', 'completing') AND expires_at > clock_timestamp()`,
		req.Subject).Scan(&open, &first); err != nil {
		return Translate(err)
	}
	if open < req.MaxOpen {
		return nil
	}
	wait := time.Second
	if first != nil {
		wait = max(wait, time.Duration(math.Ceil(*first))*time.Second)
	}
	return &agentfs.TooManyUploadsError{Limit: req.MaxOpen, RetryAfter: wait}
}

func (s *Store) insertUpload(ctx context.Context, tx pgx.Tx, req agentfs.NewUpload) (*agentfs.Upload, error) {
	partSize, count := agentfs.PlanParts(req.SizeBytes, req.PartSize)
	key := "blobs/" + NewID("blob")[len("blob_"):]
	uploadID, err := s.core().NewMultipartUpload(ctx, s.bucket, key, minio.PutObjectOptions{
		ContentType: req.ContentType,
	})
	if err != nil {
		return nil, translateS3(fmt.Errorf("start multipart upload: %w", err))
	}
	u, err := scanUpload(tx.QueryRow(ctx, `INSERT INTO uploads
		(id, subject, path, size_bytes, content_type, replace, sha256, part_size, part_count, status,
		 s3_upload_id, blob_key, agent_id, run_id, expires_at, expires_in_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, nullif($12, ''), nullif($13, ''),
		        now() + make_interval(secs => $14), $15)
		RETURNING `+uploadColumns,
		NewID("upl"), req.Subject, req.Path, req.SizeBytes, req.ContentType, req.Replace, req.SHA256,
		partSize, count, uploadID, key, req.By.AgentID, req.By.RunID, req.TTL.Seconds(), int64(req.ExpiresIn.Seconds())))
	if err != nil {
		_ = s.core().AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, key, uploadID)
		return nil, err
	}
	return u, nil
}

func (s *Store) loadParts(ctx context.Context, q querier, u *agentfs.Upload) error {
	rows, err := q.Query(ctx, `SELECT part_number, size_bytes, sha256, etag FROM upload_parts
		WHERE upload_id = $1 ORDER BY part_number`, u.ID)
	if err != nil {
		return Translate(fmt.Errorf("load parts: %w", err))
	}
	u.Parts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentfs.Part, error) {
		var p agentfs.Part
		err := r.Scan(&p.Number, &p.SizeBytes, &p.SHA256, &p.ETag)
		return p, err
	})
	return Translate(err)
}

// Upload returns the subject's session with the parts received so far.
func (s *Store) Upload(ctx context.Context, subject, id string) (*agentfs.Upload, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var u *agentfs.Upload
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE id = $1 AND subject = $2`, id, subject)); err != nil {
			return err
		}
		return s.loadParts(ctx, tx, u)
	})
	if err != nil {
		return nil, fmt.Errorf("get upload: %w", err)
	}
	return u, nil
}

// takesParts fails with the session's state unless it takes parts now. A
// session a live complete holds is busy for what is left of its lease.
func (s *Store) takesParts(ctx context.Context, q querier, u *agentfs.Upload) error {
	switch {
	case u.Status == agentfs.UploadCompleting:
		wait, _, err := s.completeHeld(ctx, q, u.ID)
		if err != nil {
			return err
		}
		return &agentfs.UploadBusyError{Reason: "a complete of this upload is running", RetryAfter: wait}
	case u.Status == agentfs.UploadPending && !u.ExpiresAt.After(time.Now()):
		return &agentfs.UploadStateError{Status: agentfs.UploadExpired}
	case u.Status == agentfs.UploadPending:
		return nil
	}
	return &agentfs.UploadStateError{Status: u.Status}
}

// PendingPart is a part whose bytes S3 holds, waiting to be recorded.
type PendingPart struct {
	store    *Store
	uploadID string
	same     bool // the part as the session assembled it: nothing to record
	hold     *partHold
	ended    bool // the transaction that ended hold committed
	// lost says the part's lease was taken over while its bytes were on
	// their way: what S3 holds of the part is unknown.
	lost bool
	Part *agentfs.Part
}

// SendPart streams part n of a session straight into its S3 multipart
// upload, hashing it on the way; Apply then records its size and SHA-256,
// and Finish ends the part once that transaction is over.
// size is the body's declared length and must be the part's exact size.
// digest, if given, is sent upstream so S3 itself rejects a mismatch. A
// repeated part overwrites the earlier one. The part's bytes also extend
// the session's running hash of the whole content, at once or, for a part
// ahead of it, when its turn comes (package hashwindow).
//
// While its bytes stream the part holds a lease on the session, so no
// complete takes the part list meanwhile; a part that comes while a
// complete holds the session is an *agentfs.UploadBusyError. A session whose
// parts an earlier complete assembled (and did not commit) takes a part
// again only with the same bytes, as a repeat with nothing to record.
func (s *Store) SendPart(ctx context.Context, subject, id string, n int, body io.Reader, size int64, digest []byte) (*PendingPart, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	u, hold, err := s.beginPart(ctx, subject, id, n)
	if err != nil {
		return nil, fmt.Errorf("put part: %w", err)
	}
	p, err := s.receivePart(ctx, u, n, body, size, digest)
	if err != nil {
		hold.release(ctx, false)
		return nil, err
	}
	p.hold = hold
	return p, nil
}

// beginPart admits a part to a session that takes parts and takes a lease
// on the session for it.
func (s *Store) beginPart(ctx context.Context, subject, id string, n int) (u *agentfs.Upload, hold *partHold, err error) {
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		// A complete whose lease lapsed died or stalled: the session takes
		// parts again, and that complete can no longer commit (it commits
		// only a session still completing).
		if _, err := tx.Exec(ctx, `UPDATE uploads SET status = 'pending', completing_until = NULL
			WHERE id = $1 AND subject = $2 AND status = 'completing' AND completing_until < clock_timestamp()`,
			id, subject); err != nil {
			return Translate(err)
		}
		// FOR SHARE: parts begin side by side, and a complete taking the
		// part list (FOR UPDATE) holds them off until the session is
		// completing.
		var err error
		if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE id = $1 AND subject = $2 FOR SHARE`, id, subject)); err != nil {
			return err
		}
		if err := s.takesParts(ctx, tx, u); err != nil {
			return err
		}
		hold, err = s.holdForPart(ctx, tx, id, n)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	hold.start()
	return u, hold, nil
}

// receivePart checks part n's size and streams it into S3, or, when the
// session's parts are assembled already, compares it with the part
// assembled.
func (s *Store) receivePart(ctx context.Context, u *agentfs.Upload, n int, body io.Reader, size int64, digest []byte) (*PendingPart, error) {
	want, err := u.PartSizeOf(n)
	if err != nil {
		return nil, err
	}
	if size != want {
		return nil, fmt.Errorf("%w: part %d must have %d bytes, got %d", agentfs.ErrSizeMismatch, n, want, size)
	}
	if u.Assembled {
		return s.compareAssembled(ctx, u, n, body, size, digest)
	}
	chain := s.window.Chain(u.ID)
	chain.Learn(u.HashedParts, u.HashState)
	sink := chain.Sink(n)
	part, err := s.sendPart(ctx, u, n, body, size, digest, sink)
	if err == nil {
		sink.Stored(part.SHA256)
	} else {
		sink.Dropped()
	}
	if errors.Is(err, agentfs.ErrChecksumMismatch) {
		// Some S3 servers replace the stored part before they check it: the
		// part is forgotten and must be sent again.
		if ferr := s.forgetParts(ctx, u.ID, []int{n}); ferr != nil {
			return nil, ferr
		}
	}
	if err != nil {
		return nil, err
	}
	return &PendingPart{store: s, uploadID: u.ID, Part: part}, nil
}

// compareAssembled answers part n of a session whose parts an earlier
// complete assembled: the same bytes as the part assembled are a repeat
// with nothing to record; other bytes are an *agentfs.PartAssembledError.
func (s *Store) compareAssembled(ctx context.Context, u *agentfs.Upload, n int, body io.Reader, size int64, digest []byte) (*PendingPart, error) {
	hr := newHashingReader(io.LimitReader(body, size+1))
	_, err := io.CopyBuffer(io.Discard, hr, make([]byte, 256<<10))
	got, sum, srcErr := hr.finish()
	switch {
	case srcErr != nil:
		return nil, agentfs.BodyError(srcErr)
	case err != nil:
		return nil, agentfs.BodyError(err)
	case got != size:
		return nil, agentfs.ErrSizeMismatch
	case digest != nil && subtle.ConstantTimeCompare(digest, sum) != 1:
		return nil, agentfs.ErrChecksumMismatch
	}
	if err := s.loadParts(ctx, s.pool, u); err != nil {
		return nil, err
	}
	for _, p := range u.Parts {
		if p.Number == n && p.SizeBytes == got && p.SHA256 == hex.EncodeToString(sum) {
			return &PendingPart{store: s, uploadID: u.ID, same: true, Part: &p}, nil
		}
	}
	return nil, &agentfs.PartAssembledError{Number: n}
}

// Apply records the part in tx, and the running hash it extends, and ends
// the part's lease with it.
func (p *PendingPart) Apply(ctx context.Context, tx pgx.Tx) error {
	if err := p.store.recordPart(ctx, tx, p); err != nil {
		return fmt.Errorf("put part: %w", err)
	}
	p.ended = true
	return nil
}

// Finish ends the part once its transaction is over (err is how): its lease
// goes with it, whether or not the part was recorded. A part whose lease
// was taken over forgets what the session recorded of the part: S3 may
// hold these bytes or the other writer's, and the session must not list a
// part S3 does not hold; the part is sent again.
func (p *PendingPart) Finish(ctx context.Context, err error) {
	p.hold.release(ctx, err == nil && p.ended)
	if p.lost {
		_ = p.store.forgetParts(ctx, p.uploadID, []int{p.Part.Number})
	}
}

// sendPart streams part n into S3; every byte S3 reads goes through sink
// first.
func (s *Store) sendPart(ctx context.Context, u *agentfs.Upload, n int, body io.Reader, size int64, digest []byte, sink io.Writer) (*agentfs.Part, error) {
	src := io.TeeReader(body, sink)
	hr := newHashingReader(src)
	opts := minio.PutObjectPartOptions{DisableContentSha256: true}
	if digest != nil {
		opts = minio.PutObjectPartOptions{Sha256Hex: hex.EncodeToString(digest)}
	}
	op, err := s.core().PutObjectPart(ctx, s.bucket, u.BlobKey, u.S3UploadID, n, hr, size, opts)
	got, sum, srcErr := hr.finish()
	switch {
	case srcErr != nil:
		return nil, agentfs.BodyError(srcErr)
	case err != nil && digest != nil && minio.ToErrorResponse(err).Code == "XAmzContentSHA256Mismatch":
		return nil, agentfs.ErrChecksumMismatch
	case err != nil:
		// The multipart upload may be gone (a complete assembled it, an
		// abort dropped it); S3 says so, or just drops the connection.
		if why := s.partRefusal(ctx, u.ID); why != nil {
			return nil, why
		}
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			return nil, &agentfs.UploadStateError{Status: agentfs.UploadAborted} // S3 lost a pending session's parts
		}
		return nil, translateS3(fmt.Errorf("put part: %w", err))
	case got != size:
		return nil, agentfs.ErrSizeMismatch
	case digest != nil && subtle.ConstantTimeCompare(digest, sum) != 1:
		return nil, agentfs.ErrChecksumMismatch
	}
	return &agentfs.Part{Number: n, SizeBytes: got, SHA256: hex.EncodeToString(sum), ETag: op.ETag}, nil
}

// recordPart stores a part and, when it extends the running hash, the new
// hash state. A part replaced by other bytes after it was folded into the
// running hash resets the hash; complete then reads the content back.
func (s *Store) recordPart(ctx context.Context, tx pgx.Tx, p *PendingPart) error {
	u, err := scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE id = $1 FOR UPDATE`, p.uploadID))
	if err != nil {
		return err
	}
	if err := s.takesParts(ctx, tx, u); err != nil {
		return err // this part's lease lapsed and a complete took the session
	}
	held, err := p.hold.endTx(ctx, tx)
	if err != nil {
		return err
	}
	switch {
	case p.same:
		return nil
	case !held:
		p.lost = true
		return &agentfs.UploadBusyError{Reason: fmt.Sprintf("part %d was sent again by another request while this one was on its way", p.Part.Number),
			RetryAfter: time.Second}
	case u.Assembled:
		// Assembled after this part's lease lapsed: what S3 took of it is
		// unknown. Sent again, it is compared with the part assembled.
		return &agentfs.UploadBusyError{Reason: "the upload's parts were assembled while this part was on its way", RetryAfter: time.Second}
	}
	var previous string
	err = tx.QueryRow(ctx, `SELECT sha256 FROM upload_parts WHERE upload_id = $1 AND part_number = $2`, u.ID, p.Part.Number).Scan(&previous)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Translate(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO upload_parts (upload_id, part_number, size_bytes, sha256, etag)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (upload_id, part_number)
		DO UPDATE SET size_bytes = excluded.size_bytes, sha256 = excluded.sha256, etag = excluded.etag, updated_at = now()`,
		u.ID, p.Part.Number, p.Part.SizeBytes, p.Part.SHA256, p.Part.ETag); err != nil {
		return Translate(fmt.Errorf("record part: %w", err))
	}
	return s.recordHash(ctx, tx, u, p, previous)
}

// recordHash keeps the running hash, under the session's row lock: reset
// by a part that replaced one of the parts hashed with other bytes, then
// moved forward over this instance's points that extend it exactly (their
// base is the recorded state, their part is recorded with their SHA-256),
// so a point built over bytes replaced meanwhile, or over a chain another
// instance changed, is never saved.
func (s *Store) recordHash(ctx context.Context, tx pgx.Tx, u *agentfs.Upload, p *PendingPart, previous string) error {
	k, state := u.HashedParts, u.HashState
	if previous != "" && previous != p.Part.SHA256 && p.Part.Number <= k {
		k, state = 0, nil
	}
	k, state, err := s.window.Chain(u.ID).Advance(k, state, recordedSums(ctx, tx, u.ID))
	if err != nil {
		return err
	}
	if k == u.HashedParts && bytes.Equal(state, u.HashState) {
		return nil
	}
	_, err = tx.Exec(ctx, `UPDATE uploads SET hashed_parts = $2, hash_state = $3 WHERE id = $1`, u.ID, k, nullIfEmpty(state))
	return Translate(err)
}

func nullIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// partRefusal explains a part that S3 refused by the session's state now,
// if that explains it: aborted or expired meanwhile, or assembled, by a
// complete that took the session after this part's lease lapsed or by one
// that died before it could record so (sent again, the part is compared
// with the part assembled). It is nil while the session still takes parts
// into its multipart upload, or when its state cannot be read.
func (s *Store) partRefusal(ctx context.Context, id string) error {
	u, err := scanUpload(s.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE id = $1`, id))
	if err != nil {
		return nil
	}
	if u.Status == agentfs.UploadPending && !u.Assembled {
		info, serr := s.s3.StatObject(ctx, s.bucket, u.BlobKey, minio.StatObjectOptions{})
		if serr == nil && info.Size == u.SizeBytes {
			if _, err := s.pool.Exec(ctx, `UPDATE uploads SET assembled = true WHERE id = $1`, u.ID); err != nil {
				return nil
			}
			u.Assembled = true
		}
	}
	if u.Status == agentfs.UploadPending && u.Assembled {
		return &agentfs.UploadBusyError{Reason: "the upload's parts were assembled while this part was on its way", RetryAfter: time.Second}
	}
	return s.takesParts(ctx, s.pool, u)
}

// forgetParts drops part records that no longer match what S3 holds, and
// the running hash if it covered any of them.
func (s *Store) forgetParts(ctx context.Context, id string, numbers []int) error {
	return s.WithTx(context.WithoutCancel(ctx), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM upload_parts WHERE upload_id = $1 AND part_number = ANY($2)`, id, numbers); err != nil {
			return Translate(err)
		}
		_, err := tx.Exec(ctx, `UPDATE uploads SET hashed_parts = 0, hash_state = NULL
			WHERE id = $1 AND hashed_parts >= (SELECT min(n) FROM unnest($2::int[]) AS n)`, id, numbers)
		return Translate(err)
	})
}

// PendingComplete is a complete whose content S3 has assembled (or a
// session found completed already), waiting to commit its file. It holds
// the session (completing) under a fencing token, with a lease renewed
// until Finish.
type PendingComplete struct {
	store *Store
	done  *agentfs.File // the file of a session completed before
	u     *agentfs.Upload
	fence int64 // the complete's claim on the session
	lease *renewal
	put   *PendingPut
}

// PrepareComplete decides a complete against the session and the path and
// assembles its content. The part list comes from the server's own records;
// every part must be there, and if_exists and preconditions are decided at
// this moment. The file's sha256 is the whole content's: from the running
// hash when the parts came in order, else by reading back what the running
// hash lacks. A declared sha256 that does not match fails the session. A
// session completed before prepares nothing: Apply answers with its file.
//
// Completes of one path take turns, and a complete does not take the part
// list while a part is on its way: either is an *agentfs.UploadBusyError,
// as is a session another live complete holds. A complete whose lease
// lapsed (its process died) is taken over.
func (s *Store) PrepareComplete(ctx context.Context, subject, id string, req agentfs.CompleteRequest) (*PendingComplete, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	u, put, fence, done, err := s.beginComplete(ctx, subject, id, req)
	if err != nil {
		return nil, err
	}
	pc := &PendingComplete{store: s, done: done, u: u, fence: fence}
	if done != nil {
		return pc, nil
	}
	pc.lease = renewEvery(s.cfg.UploadCompleteLease, pc.extend)
	if pc.put, err = s.assemble(ctx, u, put, req, fence); err != nil {
		pc.lease.end()
		s.abandonComplete(ctx, u.ID, fence)
		return nil, fmt.Errorf("complete upload: %w", err)
	}
	return pc, nil
}

// extend renews the complete's lease once; held is false once the session
// is no longer this complete's.
func (pc *PendingComplete) extend(ctx context.Context) (held bool, err error) {
	tag, err := pc.store.pool.Exec(ctx, `UPDATE uploads
		SET completing_until = clock_timestamp() + make_interval(secs => $3)
		WHERE id = $1 AND status = 'completing' AND complete_fence = $2`,
		pc.u.ID, pc.fence, pc.store.cfg.UploadCompleteLease.Seconds())
	return tag.RowsAffected() > 0, Translate(err)
}

// Apply commits the file and the session's completion in tx; created says
// whether the file is new. A complete taken over meanwhile commits nothing
// (agentfs.ErrUploadCompleting).
func (pc *PendingComplete) Apply(ctx context.Context, tx pgx.Tx, o agentfs.Origin) (*agentfs.File, bool, error) {
	if pc.done != nil {
		f, err := pc.store.LockFile(ctx, tx, pc.u.Subject, pc.done.ID)
		return f, false, err
	}
	f, created, err := pc.put.Apply(ctx, tx, o)
	if err != nil {
		return nil, false, err
	}
	tag, err := tx.Exec(ctx, `UPDATE uploads SET status = 'completed', file_id = $2, completing_until = NULL
		WHERE id = $1 AND status = 'completing' AND complete_fence = $3`, pc.u.ID, f.ID, pc.fence)
	if err != nil {
		return nil, false, Translate(err)
	}
	if tag.RowsAffected() == 0 {
		return nil, false, agentfs.ErrUploadCompleting // another complete took over; it commits, not this one
	}
	// Leases left by parts whose requests died.
	if _, err := tx.Exec(ctx, `DELETE FROM upload_part_leases WHERE upload_id = $1`, pc.u.ID); err != nil {
		return nil, false, Translate(err)
	}
	return f, created, nil
}

// Finish ends the complete once its transaction is over: its lease is no
// longer renewed; a complete that did not commit puts the session back to
// pending, so a later one can try again (S3 may have assembled it already);
// an assembled object no file took is removed.
func (pc *PendingComplete) Finish(ctx context.Context, err error) {
	if pc.done != nil {
		return
	}
	pc.lease.end()
	if err != nil {
		pc.store.abandonComplete(ctx, pc.u.ID, pc.fence)
		return
	}
	pc.put.Finish(ctx, nil) // the file already held these bytes: the assembled object goes
	pc.store.window.Forget(pc.u.ID)
}

// beginComplete decides a complete against the session and the path, and
// marks the session completing under a new fence, with a lease. A session
// already completed returns its file as done.
func (s *Store) beginComplete(ctx context.Context, subject, id string, req agentfs.CompleteRequest) (u *agentfs.Upload, put agentfs.Put, fence int64, done *agentfs.File, err error) {
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = s.lockForComplete(ctx, tx, subject, id); err != nil {
			return err
		}
		switch u.Status {
		case agentfs.UploadCompleted:
			done, err = s.LockFile(ctx, tx, subject, u.FileID)
			return err
		case agentfs.UploadFailed:
			return agentfs.ErrChecksumMismatch
		case agentfs.UploadAborted, agentfs.UploadExpired:
			return &agentfs.UploadStateError{Status: u.Status}
		case agentfs.UploadCompleting:
			wait, held, err := s.completeHeld(ctx, tx, u.ID)
			if err != nil {
				return err
			}
			if held {
				return &agentfs.UploadBusyError{Reason: "another complete of this upload is running", RetryAfter: wait}
			}
			// Its lease lapsed: its process died or stalled. This complete
			// takes over; the new fence keeps the old one from committing.
		}
		if !u.ExpiresAt.After(time.Now()) {
			return &agentfs.UploadStateError{Status: agentfs.UploadExpired}
		}
		if err := s.awaitTurn(ctx, tx, u); err != nil {
			return err
		}
		if put, err = s.decideComplete(ctx, tx, u, req); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `UPDATE uploads SET status = 'completing', complete_fence = complete_fence + 1,
				completing_until = clock_timestamp() + make_interval(secs => $2)
			WHERE id = $1 RETURNING complete_fence`, id, s.cfg.UploadCompleteLease.Seconds()).Scan(&fence)
		return Translate(err)
	})
	return u, put, fence, done, err
}

// lockForComplete locks the session for a complete, under the lock of its
// path: completes of one path take turns, so the loser of sessions racing
// for a path is decided before its parts are assembled, as if they had
// come one after the other.
func (s *Store) lockForComplete(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.Upload, error) {
	var path string
	if err := tx.QueryRow(ctx, `SELECT path FROM uploads WHERE id = $1 AND subject = $2`, id, subject).Scan(&path); err != nil {
		return nil, Translate(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentfs.upload.complete.' || $1 || '/' || $2))`,
		subject, path); err != nil {
		return nil, Translate(err)
	}
	return scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
		WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject))
}

// awaitTurn refuses a complete for now, as an *agentfs.UploadBusyError,
// while a live complete holds another session of the path (its outcome
// decides this one's), or while a part of this session is on its way (the
// part list would change under it). Part leases that lapsed are those of
// requests that died: they go.
func (s *Store) awaitTurn(ctx context.Context, tx pgx.Tx, u *agentfs.Upload) error {
	var left *float64
	err := tx.QueryRow(ctx, `SELECT max(extract(epoch FROM completing_until - clock_timestamp()))::float8
		FROM uploads WHERE subject = $1 AND path = $2 AND status = 'completing' AND id <> $3
		  AND completing_until > clock_timestamp()`, u.Subject, u.Path, u.ID).Scan(&left)
	if err != nil {
		return Translate(err)
	}
	if left != nil {
		return &agentfs.UploadBusyError{Reason: "another upload of this path is being completed",
			RetryAfter: retryAfter(*left, s.cfg.UploadCompleteLease)}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM upload_part_leases
		WHERE upload_id = $1 AND lease_until <= clock_timestamp()`, u.ID); err != nil {
		return Translate(err)
	}
	if err := tx.QueryRow(ctx, `SELECT max(extract(epoch FROM lease_until - clock_timestamp()))::float8
		FROM upload_part_leases WHERE upload_id = $1`, u.ID).Scan(&left); err != nil {
		return Translate(err)
	}
	if left != nil {
		return &agentfs.UploadBusyError{Reason: "a part of this upload is still on its way",
			RetryAfter: retryAfter(*left, s.partLease())}
	}
	return nil
}

// decideComplete checks that every part is there and decides the complete's
// put against the live file at the path.
func (s *Store) decideComplete(ctx context.Context, tx pgx.Tx, u *agentfs.Upload, req agentfs.CompleteRequest) (agentfs.Put, error) {
	if err := s.loadParts(ctx, tx, u); err != nil {
		return agentfs.Put{}, err
	}
	if missing := u.MissingParts(); len(missing) > 0 {
		return agentfs.Put{}, &agentfs.PartsMissingError{Missing: missing}
	}
	put := putFor(u, req)
	if put.IfMatch != "" && !put.Replace {
		return agentfs.Put{}, agentfs.ErrIfMatchWithoutReplace
	}
	live, _, err := s.fileAtPath(ctx, tx, u.Subject, u.Path)
	if err != nil {
		return agentfs.Put{}, err
	}
	return put, put.CheckAgainst(live)
}

func putFor(u *agentfs.Upload, req agentfs.CompleteRequest) agentfs.Put {
	replace := u.Replace
	if req.Replace != nil {
		replace = *req.Replace
	}
	return agentfs.Put{
		Subject: u.Subject, Path: u.Path, ContentType: u.ContentType, Replace: replace,
		IfMatch: req.IfMatch, Size: u.SizeBytes, ExpiresIn: u.ExpiresIn, By: u.By,
	}
}

// assemble completes the S3 multipart upload and establishes the content's
// SHA-256, giving a pending put of the assembled object.
func (s *Store) assemble(ctx context.Context, u *agentfs.Upload, put agentfs.Put, req agentfs.CompleteRequest, fence int64) (*PendingPut, error) {
	if err := s.completeMultipart(ctx, u); err != nil {
		return nil, err
	}
	sum, err := s.contentHash(ctx, u)
	if err != nil {
		return nil, err
	}
	want := u.SHA256
	if req.SHA256 != "" {
		want = req.SHA256
	}
	if want != "" && want != sum {
		return nil, s.failUpload(ctx, u, fence)
	}
	live, _, err := s.fileAtPath(ctx, s.pool, u.Subject, u.Path)
	if err != nil {
		return nil, err
	}
	b := &writtenBlob{key: u.BlobKey, size: u.SizeBytes, sha256: sum, tags: blobTags(fileIDFor(live), u.By)}
	if err := s.retagBlob(ctx, b.key, b.tags); err != nil {
		return nil, err
	}
	return &PendingPut{store: s, put: put, seen: live, fileID: b.tags["file-id"], blob: b}, nil
}

// completeMultipart asks S3 to assemble the recorded parts, once.
func (s *Store) completeMultipart(ctx context.Context, u *agentfs.Upload) error {
	if u.Assembled {
		return nil
	}
	parts := make([]minio.CompletePart, len(u.Parts))
	for i, p := range u.Parts {
		parts[i] = minio.CompletePart{PartNumber: p.Number, ETag: p.ETag}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	_, err := (minio.Core{Client: s.s3Long}).CompleteMultipartUpload(ctx, s.bucket, u.BlobKey, u.S3UploadID, parts, minio.PutObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code == "InvalidPart" {
		return s.reconcileParts(ctx, u)
	}
	if err != nil && minio.ToErrorResponse(err).Code == "NoSuchUpload" {
		// A complete that died after S3 assembled the object: it is there.
		if info, serr := s.s3.StatObject(ctx, s.bucket, u.BlobKey, minio.StatObjectOptions{}); serr == nil && info.Size == u.SizeBytes {
			err = nil
		}
	}
	if err != nil {
		return translateS3(fmt.Errorf("complete multipart upload: %w", err))
	}
	_, err = s.pool.Exec(ctx, `UPDATE uploads SET assembled = true WHERE id = $1`, u.ID)
	u.Assembled = true
	return Translate(err)
}

// reconcileParts compares the recorded parts with those S3 holds after S3
// refused to assemble them, forgets the ones that differ and reports them
// missing, so the caller sends them again.
func (s *Store) reconcileParts(ctx context.Context, u *agentfs.Upload) error {
	held := map[int]string{}
	for marker := 0; ; {
		res, err := s.core().ListObjectParts(ctx, s.bucket, u.BlobKey, u.S3UploadID, marker, 1000)
		if err != nil {
			return translateS3(fmt.Errorf("list parts: %w", err))
		}
		for _, p := range res.ObjectParts {
			held[p.PartNumber] = p.ETag
		}
		if !res.IsTruncated {
			break
		}
		marker = res.NextPartNumberMarker
	}
	var differ []int
	for _, p := range u.Parts {
		if trimETag(held[p.Number]) != trimETag(p.ETag) {
			differ = append(differ, p.Number)
		}
	}
	if len(differ) == 0 {
		return fmt.Errorf("S3 refused to assemble parts that match its own list")
	}
	if err := s.forgetParts(ctx, u.ID, differ); err != nil {
		return err
	}
	return &agentfs.PartsMissingError{Missing: differ}
}

func trimETag(e string) string { return strings.Trim(e, `"`) }

// contentHash is the assembled content's SHA-256: the running hash when it
// covers every part (moved forward over this instance's points first),
// else the running hash extended by reading back the rest of the object
// once.
func (s *Store) contentHash(ctx context.Context, u *agentfs.Upload) (string, error) {
	k, state := u.HashedParts, u.HashState
	if k > 0 && len(state) == 0 {
		k = 0 // no state to extend: read everything back
	}
	if chain := s.window.Known(u.ID); chain != nil {
		recorded := func(from, to int) (map[int]string, error) {
			out := map[int]string{}
			for _, p := range u.Parts {
				out[p.Number] = p.SHA256
			}
			return out, nil
		}
		var err error
		if k, state, err = chain.Advance(k, state, recorded); err != nil {
			return "", err
		}
	}
	h, err := hashwindow.Restore(state)
	if err != nil {
		return "", err
	}
	if k < u.PartCount {
		offset := int64(k) * u.PartSize
		r, err := s.OpenBlob(ctx, u.BlobKey, offset, u.SizeBytes-offset)
		if err != nil {
			return "", err
		}
		defer r.Close()
		n, err := io.CopyBuffer(h, r, make([]byte, 1<<20))
		s.counters.readBackBytes.Add(n)
		if err != nil {
			return "", fmt.Errorf("read back assembled upload: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// failUpload marks a session failed because its content does not match the
// declared sha256, and removes the assembled object. No file is made.
func (s *Store) failUpload(ctx context.Context, u *agentfs.Upload, fence int64) error {
	tag, err := s.pool.Exec(context.WithoutCancel(ctx), `UPDATE uploads SET status = 'failed', completing_until = NULL
		WHERE id = $1 AND status = 'completing' AND complete_fence = $2`, u.ID, fence)
	if err != nil {
		return Translate(err)
	}
	if tag.RowsAffected() == 0 {
		return agentfs.ErrUploadCompleting
	}
	s.window.Forget(u.ID)
	s.removeBlob(ctx, u.BlobKey)
	return agentfs.ErrChecksumMismatch
}

// abandonComplete puts a session whose complete failed back to pending, so
// a later complete can try again (S3 may have assembled it already).
func (s *Store) abandonComplete(ctx context.Context, id string, fence int64) {
	_, _ = s.pool.Exec(context.WithoutCancel(ctx), `UPDATE uploads SET status = 'pending', completing_until = NULL
		WHERE id = $1 AND status = 'completing' AND complete_fence = $2`, id, fence)
}

// AbortUploadTx ends a session in tx. Aborting an aborted, expired or
// failed session returns it unchanged (aborted false); a completed one is an
// *agentfs.UploadStateError, one a live complete holds an
// *agentfs.UploadBusyError (the complete decides; a complete whose lease
// lapsed does not, and the session is aborted). The caller drops the session's parts from S3
// with DropMultipart once tx committed (the sweeper retries a drop that
// failed), so S3 never loses parts of a session still pending.
func (s *Store) AbortUploadTx(ctx context.Context, tx pgx.Tx, subject, id string) (u *agentfs.Upload, aborted bool, err error) {
	if err := checkID(id); err != nil {
		return nil, false, err
	}
	if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
		WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject)); err != nil {
		return nil, false, fmt.Errorf("abort upload: %w", err)
	}
	switch u.Status {
	case agentfs.UploadCompleted:
		return nil, false, &agentfs.UploadStateError{Status: agentfs.UploadCompleted}
	case agentfs.UploadCompleting:
		wait, held, err := s.completeHeld(ctx, tx, id)
		if err != nil {
			return nil, false, fmt.Errorf("abort upload: %w", err)
		}
		if held {
			return nil, false, &agentfs.UploadBusyError{Reason: "a complete of this upload is running", RetryAfter: wait}
		}
		fallthrough // a complete whose lease lapsed: it can no longer commit
	case agentfs.UploadPending:
		if _, err := tx.Exec(ctx, `UPDATE uploads SET status = 'aborted', completing_until = NULL WHERE id = $1`, id); err != nil {
			return nil, false, Translate(fmt.Errorf("abort upload: %w", err))
		}
		u.Status, aborted = agentfs.UploadAborted, true
	}
	if err := s.loadParts(ctx, tx, u); err != nil {
		return nil, false, fmt.Errorf("abort upload: %w", err)
	}
	return u, aborted, nil
}

// DropMultipart removes an aborted session's parts (or its assembled
// object) from S3. A failure is left for the sweeper.
func (s *Store) DropMultipart(ctx context.Context, u *agentfs.Upload) { _ = s.dropMultipart(ctx, u) }

// dropMultipart removes a session's parts (or its assembled object) from S3.
func (s *Store) dropMultipart(ctx context.Context, u *agentfs.Upload) error {
	s.window.Forget(u.ID)
	if u.Assembled {
		s.removeBlob(ctx, u.BlobKey)
		return nil
	}
	err := s.core().AbortMultipartUpload(ctx, s.bucket, u.BlobKey, u.S3UploadID)
	if err != nil && minio.ToErrorResponse(err).Code != "NoSuchUpload" {
		return translateS3(fmt.Errorf("abort multipart upload: %w", err))
	}
	return nil
}

// ExpireUploads marks sessions past their expiry expired and aborts their
// S3 multipart uploads. It reports how many it expired. Several instances
// may run it at once: each session is taken by one (SKIP LOCKED).
func (s *Store) ExpireUploads(ctx context.Context) (int, error) {
	n := 0
	for {
		expired := false
		err := s.WithTx(ctx, func(tx pgx.Tx) error {
			u, err := scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
				WHERE status IN ('pending', 'completing') AND expires_at < now()
				  AND (completing_until IS NULL OR completing_until < now())
				LIMIT 1 FOR UPDATE SKIP LOCKED`))
			if errors.Is(err, agentfs.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := s.dropMultipart(ctx, u); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM upload_part_leases WHERE upload_id = $1`, u.ID); err != nil {
				return Translate(err)
			}
			_, err = tx.Exec(ctx, `UPDATE uploads SET status = 'expired', completing_until = NULL WHERE id = $1`, u.ID)
			expired = err == nil
			return Translate(err)
		})
		if err != nil {
			return n, fmt.Errorf("expire uploads: %w", err)
		}
		if !expired {
			return n, nil
		}
		n++
	}
}

// ListUploads returns up to filter.Limit of the subject's sessions, newest
// first, without their parts. A pending session past its expiry counts as
// expired, as the API shows it.
func (s *Store) ListUploads(ctx context.Context, subject string, filter agentfs.UploadFilter) ([]*agentfs.Upload, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	switch filter.Status {
	case "":
	case agentfs.UploadPending:
		w.when(true, "status = 'pending' AND expires_at > now()", nil)
	case agentfs.UploadExpired:
		w.when(true, "(status = 'expired' OR status = 'pending' AND expires_at <= now())", nil)
	default:
		w.when(true, "status = @status", pgx.NamedArgs{"status": filter.Status})
	}
	w.when(filter.Path != "", "path = @path", pgx.NamedArgs{"path": filter.Path})
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := s.pool.Query(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE `+w.where()+
		` ORDER BY created_at DESC, id DESC LIMIT @limit`, w.args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list uploads: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Upload, error) { return scanUpload(r) })
	if err != nil {
		return nil, Translate(fmt.Errorf("list uploads: %w", err))
	}
	return out, s.loadPartsOf(ctx, out)
}

// loadPartsOf loads the parts of many sessions in one query.
func (s *Store) loadPartsOf(ctx context.Context, uploads []*agentfs.Upload) error {
	byID := make(map[string]*agentfs.Upload, len(uploads))
	ids := make([]string, 0, len(uploads))
	for _, u := range uploads {
		byID[u.ID], u.Parts = u, []agentfs.Part{}
		ids = append(ids, u.ID)
	}
	rows, err := s.pool.Query(ctx, `SELECT upload_id, part_number, size_bytes, sha256, etag FROM upload_parts
		WHERE upload_id = ANY($1) ORDER BY upload_id, part_number`, ids)
	if err != nil {
		return Translate(fmt.Errorf("load parts: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p agentfs.Part
		if err := rows.Scan(&id, &p.Number, &p.SizeBytes, &p.SHA256, &p.ETag); err != nil {
			return Translate(err)
		}
		byID[id].Parts = append(byID[id].Parts, p)
	}
	return Translate(rows.Err())
}

// recordedSums returns the SHA-256 of the recorded parts from..to.
func recordedSums(ctx context.Context, q querier, id string) func(from, to int) (map[int]string, error) {
	return func(from, to int) (map[int]string, error) {
		rows, err := q.Query(ctx, `SELECT part_number, sha256 FROM upload_parts
			WHERE upload_id = $1 AND part_number BETWEEN $2 AND $3`, id, from, to)
		if err != nil {
			return nil, Translate(err)
		}
		out := map[int]string{}
		var (
			n   int
			sum string
		)
		_, err = pgx.ForEachRow(rows, []any{&n, &sum}, func() error { out[n] = sum; return nil })
		return out, Translate(err)
	}
}
