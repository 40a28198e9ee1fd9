package storage

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
)

// A part of an upload session: admitted under a lease on the session
// (upload_leases.go), streamed into S3's multipart upload through the
// session's running hash (package hashwindow), and recorded with the hash
// it extends.

// DefaultUploadHashWindow is Config.UploadHashWindow when zero: parts of a
// few sessions sending 4 at a time, well within the memory budget of 64 MiB.
const DefaultUploadHashWindow = 32 << 20

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
		args := pgx.NamedArgs{"id": id, "subject": subject}
		visible := visiblePath(ctx, "path", args)
		if _, err := tx.Exec(ctx, `UPDATE uploads SET status = 'pending', completing_until = NULL
			WHERE id = @id AND subject = @subject AND status = 'completing' AND completing_until < clock_timestamp()
			AND `+visible, args); err != nil {
			return Translate(err)
		}
		// FOR SHARE: parts begin side by side, and a complete taking the
		// part list (FOR UPDATE) holds them off until the session is
		// completing.
		var err error
		if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE id = @id AND subject = @subject AND `+visible+` FOR SHARE`, args)); err != nil {
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
		// S3 checks the bytes against the digest (x-amz-content-sha256,
		// signed) before it keeps the part, so the digest is the part's
		// SHA-256 and the bytes are hashed here only for the whole file
		// (the sink), once (DESIGN §7).
		// DisableContentSha256 keeps minio-go from signing the body in
		// chunks (its default without TLS), which would hash every byte
		// once more and send no digest for S3 to check.
		hr = newCountingReader(src)
		opts = minio.PutObjectPartOptions{Sha256Hex: hex.EncodeToString(digest), DisableContentSha256: true}
	}
	op, err := s.core().PutObjectPart(ctx, s.bucket, u.BlobKey, u.S3UploadID, n, hr, size, opts)
	got, sum, srcErr := hr.finish()
	if digest != nil {
		sum = digest
	}
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
