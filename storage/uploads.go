package storage

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
)

// UploadHook runs at the end of the transaction that commits a change to
// an upload session (its creation, a part, its abort).
type UploadHook = func(ctx context.Context, tx pgx.Tx, u *agentfs.Upload, created bool) error

// PartHook runs at the end of the transaction that records a part.
type PartHook = func(ctx context.Context, tx pgx.Tx, p *agentfs.Part) error

// completionLease bounds how long a complete holds a session in completing
// before another complete may take over (from a process that died, or one
// slower than this); the taken-over complete then cannot commit.
const completionLease = 10 * time.Minute

const uploadColumns = `id, subject, path, size_bytes, content_type, replace, sha256, part_size, part_count,
	status, s3_upload_id, blob_key, hashed_parts, coalesce(hash_state, ''::bytea), assembled,
	coalesce(file_id, ''), coalesce(error, ''::bytea), coalesce(agent_id, ''), coalesce(run_id, ''),
	created_at, expires_at`

func scanUpload(row pgx.Row) (*agentfs.Upload, error) {
	var u agentfs.Upload
	err := row.Scan(&u.ID, &u.Subject, &u.Path, &u.SizeBytes, &u.ContentType, &u.Replace, &u.SHA256,
		&u.PartSize, &u.PartCount, &u.Status, &u.S3UploadID, &u.BlobKey, &u.HashedParts, &u.HashState,
		&u.Assembled, &u.FileID, &u.Error, &u.By.AgentID, &u.By.RunID, &u.CreatedAt, &u.ExpiresAt)
	if err != nil {
		return nil, Translate(err)
	}
	return &u, nil
}

func (s *Store) core() minio.Core { return minio.Core{Client: s.s3} }

// NewUpload is what a caller asks of a new session.
type NewUpload struct {
	Subject     string
	Path        string
	SizeBytes   int64
	ContentType string
	Replace     bool
	SHA256      string
	By          agentfs.Attribution
	PartSize    int64         // preferred; the plan may grow it
	TTL         time.Duration // how long the session lives
}

// CreateUpload opens a session, or returns the live session that matches
// the request (subject, path, size, content type and declared sha256), so a
// caller that lost the answer resumes where it was. created says which.
func (s *Store) CreateUpload(ctx context.Context, req NewUpload, hook UploadHook) (*agentfs.Upload, bool, error) {
	var (
		u       *agentfs.Upload
		created bool
	)
	err := WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		// One creator at a time per path, so two racing creates share a session.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentfs.upload.' || $1 || '/' || $2))`,
			req.Subject, req.Path); err != nil {
			return Translate(err)
		}
		var err error
		u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE subject = $1 AND path = $2 AND size_bytes = $3 AND content_type = $4 AND sha256 = $5
			  AND status = 'pending' AND expires_at > now()
			ORDER BY created_at DESC LIMIT 1`, req.Subject, req.Path, req.SizeBytes, req.ContentType, req.SHA256))
		switch {
		case errors.Is(err, agentfs.ErrNotFound):
			created = true
			u, err = s.insertUpload(ctx, tx, req)
		case err == nil:
			err = s.loadParts(ctx, tx, u)
		}
		if err == nil && hook != nil {
			err = hook(ctx, tx, u, created)
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create upload: %w", err)
	}
	return u, created, nil
}

func (s *Store) insertUpload(ctx context.Context, tx pgx.Tx, req NewUpload) (*agentfs.Upload, error) {
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
		 s3_upload_id, blob_key, agent_id, run_id, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, nullif($12, ''), nullif($13, ''),
		        now() + make_interval(secs => $14))
		RETURNING `+uploadColumns,
		NewID("upl"), req.Subject, req.Path, req.SizeBytes, req.ContentType, req.Replace, req.SHA256,
		partSize, count, uploadID, key, req.By.AgentID, req.By.RunID, req.TTL.Seconds()))
	if err != nil {
		_ = s.core().AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, key, uploadID)
		return nil, err
	}
	return u, nil
}

func (s *Store) loadParts(ctx context.Context, q pgx.Tx, u *agentfs.Upload) error {
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
	err := WithTx(ctx, s.pool, func(tx pgx.Tx) error {
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

// ensurePending fails with the session's state unless it still takes parts.
func ensurePending(u *agentfs.Upload) error {
	switch {
	case u.Status == agentfs.UploadPending && !u.ExpiresAt.After(time.Now()):
		return &agentfs.UploadStateError{Status: agentfs.UploadExpired}
	case u.Status == agentfs.UploadPending && u.Assembled:
		return &agentfs.UploadStateError{Status: agentfs.UploadCompleted}
	case u.Status == agentfs.UploadPending:
		return nil
	case u.Status == agentfs.UploadCompleting:
		return &agentfs.UploadStateError{Status: agentfs.UploadCompleted}
	}
	return &agentfs.UploadStateError{Status: u.Status}
}

// PutPart streams part n of a session straight into its S3 multipart
// upload, hashing it on the way, and records its size and SHA-256. size is
// the body's declared length and must be the part's exact size. digest, if
// given, is sent upstream so S3 itself rejects a mismatch. A repeated part
// overwrites the earlier one. Parts that arrive in order also extend the
// session's running hash of the whole content.
func (s *Store) PutPart(ctx context.Context, subject, id string, n int, body io.Reader, size int64, digest []byte, hook PartHook) (*agentfs.Part, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	u, err := scanUpload(s.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE id = $1 AND subject = $2`, id, subject))
	if err != nil {
		return nil, fmt.Errorf("put part: %w", err)
	}
	if err := ensurePending(u); err != nil {
		return nil, err
	}
	want, err := u.PartSizeOf(n)
	if err != nil {
		return nil, err
	}
	if size != want {
		return nil, fmt.Errorf("%w: part %d must have %d bytes, got %d", agentfs.ErrSizeMismatch, n, want, size)
	}
	chain, err := chainFor(u, n)
	if err != nil {
		return nil, err
	}
	part, err := s.sendPart(ctx, u, n, body, size, digest, chain)
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
	err = WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		return s.recordPart(ctx, tx, u.ID, part, chain, hook)
	})
	if err != nil {
		return nil, fmt.Errorf("put part: %w", err)
	}
	return part, nil
}

// chainFor returns the running hash to extend with part n, or nil when n
// does not follow the parts already folded in.
func chainFor(u *agentfs.Upload, n int) (hash.Hash, error) {
	if u.HashedParts != n-1 {
		return nil, nil
	}
	h := sha256.New()
	if n > 1 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(u.HashState); err != nil {
			return nil, fmt.Errorf("restore running hash: %w", err)
		}
	}
	return h, nil
}

func (s *Store) sendPart(ctx context.Context, u *agentfs.Upload, n int, body io.Reader, size int64, digest []byte, chain hash.Hash) (*agentfs.Part, error) {
	src := body
	if chain != nil {
		src = io.TeeReader(body, chain)
	}
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
	case err != nil && minio.ToErrorResponse(err).Code == "NoSuchUpload":
		return nil, &agentfs.UploadStateError{Status: agentfs.UploadAborted}
	case err != nil:
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
func (s *Store) recordPart(ctx context.Context, tx pgx.Tx, id string, p *agentfs.Part, chain hash.Hash, hook PartHook) error {
	u, err := scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return err
	}
	if err := ensurePending(u); err != nil {
		return err
	}
	var previous string
	err = tx.QueryRow(ctx, `SELECT sha256 FROM upload_parts WHERE upload_id = $1 AND part_number = $2`, id, p.Number).Scan(&previous)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Translate(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO upload_parts (upload_id, part_number, size_bytes, sha256, etag)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (upload_id, part_number)
		DO UPDATE SET size_bytes = excluded.size_bytes, sha256 = excluded.sha256, etag = excluded.etag, updated_at = now()`,
		id, p.Number, p.SizeBytes, p.SHA256, p.ETag); err != nil {
		return Translate(fmt.Errorf("record part: %w", err))
	}
	switch {
	case chain != nil && u.HashedParts == p.Number-1:
		state, err := chain.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE uploads SET hashed_parts = $2, hash_state = $3 WHERE id = $1`, id, p.Number, state)
		if err != nil {
			return Translate(err)
		}
	case previous != "" && previous != p.SHA256 && p.Number <= u.HashedParts:
		if _, err := tx.Exec(ctx, `UPDATE uploads SET hashed_parts = 0, hash_state = NULL WHERE id = $1`, id); err != nil {
			return Translate(err)
		}
	}
	if hook != nil {
		return hook(ctx, tx, p)
	}
	return nil
}

// forgetParts drops part records that no longer match what S3 holds, and
// the running hash if it covered any of them.
func (s *Store) forgetParts(ctx context.Context, id string, numbers []int) error {
	return WithTx(context.WithoutCancel(ctx), s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM upload_parts WHERE upload_id = $1 AND part_number = ANY($2)`, id, numbers); err != nil {
			return Translate(err)
		}
		_, err := tx.Exec(ctx, `UPDATE uploads SET hashed_parts = 0, hash_state = NULL
			WHERE id = $1 AND hashed_parts >= (SELECT min(n) FROM unnest($2::int[]) AS n)`, id, numbers)
		return Translate(err)
	})
}

// CompleteRequest overrides a session's if_exists, declared sha256 and
// adds a precondition at complete time.
type CompleteRequest struct {
	Replace *bool
	SHA256  string
	IfMatch string
}

// CompleteUpload assembles a session into a file. The part list comes from
// the server's own records; every part must be there, and if_exists and
// preconditions are decided at this moment. The file's sha256 is the whole
// content's: from the running hash when the parts came in order, else by
// reading back what the running hash lacks. A declared sha256 that does
// not match fails the session. A completed session answers with its file.
func (s *Store) CompleteUpload(ctx context.Context, subject, id string, req CompleteRequest, hook CommitHook) (*agentfs.File, bool, error) {
	if err := checkID(id); err != nil {
		return nil, false, err
	}
	u, put, token, done, err := s.beginComplete(ctx, subject, id, req, hook)
	if err != nil || done != nil {
		return done, false, err
	}
	f, created, err := s.assemble(ctx, u, put, req, token, hook)
	if err != nil {
		s.abandonComplete(ctx, u.ID, token)
		return nil, false, fmt.Errorf("complete upload: %w", err)
	}
	return f, created, nil
}

// beginComplete decides a complete against the session and the path, and
// marks the session completing. A session already completed returns its
// file as done (with hook run, so a keyed repeat is recorded).
// The returned token (the completing_until it set) is the complete's claim:
// only the holder of the current token may commit the file.
func (s *Store) beginComplete(ctx context.Context, subject, id string, req CompleteRequest, hook CommitHook) (u *agentfs.Upload, put agentfs.Put, token time.Time, done *agentfs.File, err error) {
	err = WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+`
			FROM uploads WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject))
		if err != nil {
			return err
		}
		switch u.Status {
		case agentfs.UploadCompleted:
			if done, err = s.lockFile(ctx, tx, subject, u.FileID); err == nil && hook != nil {
				err = hook(ctx, tx, done, false)
			}
			return err
		case agentfs.UploadFailed:
			return agentfs.ErrChecksumMismatch
		case agentfs.UploadAborted, agentfs.UploadExpired:
			return &agentfs.UploadStateError{Status: u.Status}
		}
		if !u.ExpiresAt.After(time.Now()) {
			return &agentfs.UploadStateError{Status: agentfs.UploadExpired}
		}
		if err := s.loadParts(ctx, tx, u); err != nil {
			return err
		}
		if missing := u.MissingParts(); len(missing) > 0 {
			return &agentfs.PartsMissingError{Missing: missing}
		}
		put = putFor(u, req)
		if put.IfMatch != "" && !put.Replace {
			return agentfs.ErrIfMatchWithoutReplace
		}
		live, err := s.liveFile(ctx, tx, subject, u.Path)
		if err != nil {
			return err
		}
		if err := put.CheckAgainst(live); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `UPDATE uploads SET status = 'completing',
				completing_until = clock_timestamp() + make_interval(secs => $2)
			WHERE id = $1 AND (status = 'pending' OR completing_until < now())
			RETURNING completing_until`, id, completionLease.Seconds()).Scan(&token)
		if errors.Is(err, pgx.ErrNoRows) {
			return agentfs.ErrUploadCompleting
		}
		return Translate(err)
	})
	return u, put, token, done, err
}

func putFor(u *agentfs.Upload, req CompleteRequest) agentfs.Put {
	replace := u.Replace
	if req.Replace != nil {
		replace = *req.Replace
	}
	return agentfs.Put{
		Subject: u.Subject, Path: u.Path, ContentType: u.ContentType, Replace: replace,
		IfMatch: req.IfMatch, Size: u.SizeBytes, By: u.By,
	}
}

// assemble completes the S3 multipart upload, establishes the content's
// SHA-256 and commits the file and the session's completion together.
func (s *Store) assemble(ctx context.Context, u *agentfs.Upload, put agentfs.Put, req CompleteRequest, token time.Time, hook CommitHook) (*agentfs.File, bool, error) {
	if err := s.completeMultipart(ctx, u); err != nil {
		return nil, false, err
	}
	sum, err := s.contentHash(ctx, u)
	if err != nil {
		return nil, false, err
	}
	want := u.SHA256
	if req.SHA256 != "" {
		want = req.SHA256
	}
	if want != "" && want != sum {
		return nil, false, s.failUpload(ctx, u, token)
	}
	live, err := s.liveFile(ctx, s.pool, u.Subject, u.Path)
	if err != nil {
		return nil, false, err
	}
	b := &writtenBlob{key: u.BlobKey, size: u.SizeBytes, sha256: sum, tags: blobTags(fileIDFor(live), u.By)}
	if err := s.retagBlob(ctx, b.key, b.tags); err != nil {
		return nil, false, err
	}
	f, created, used, err := s.commitPut(ctx, put, live, b.tags["file-id"], b, func(ctx context.Context, tx pgx.Tx, f *agentfs.File, created bool) error {
		tag, err := tx.Exec(ctx, `UPDATE uploads SET status = 'completed', file_id = $2, completing_until = NULL
			WHERE id = $1 AND status = 'completing' AND completing_until = $3`, u.ID, f.ID, token)
		if err != nil {
			return Translate(err)
		}
		if tag.RowsAffected() == 0 {
			return agentfs.ErrUploadCompleting // another complete took over; it commits, not this one
		}
		if hook != nil {
			return hook(ctx, tx, f, created)
		}
		return nil
	})
	if err == nil && !used && f.BlobKey != u.BlobKey {
		s.removeBlob(ctx, u.BlobKey) // the file already held these bytes
	}
	return f, created, err
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
// covers every part, else the running hash extended by reading back the
// rest of the object once.
func (s *Store) contentHash(ctx context.Context, u *agentfs.Upload) (string, error) {
	h, err := chainFor(u, u.HashedParts+1)
	if err != nil {
		return "", err
	}
	if u.HashedParts < u.PartCount {
		offset := int64(u.HashedParts) * u.PartSize
		r, err := s.OpenBlob(ctx, u.BlobKey, offset, u.SizeBytes-offset)
		if err != nil {
			return "", err
		}
		defer r.Close()
		if _, err := io.CopyBuffer(h, r, make([]byte, 1<<20)); err != nil {
			return "", fmt.Errorf("read back assembled upload: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// failUpload marks a session failed because its content does not match the
// declared sha256, and removes the assembled object. No file is made.
func (s *Store) failUpload(ctx context.Context, u *agentfs.Upload, token time.Time) error {
	tag, err := s.pool.Exec(context.WithoutCancel(ctx), `UPDATE uploads SET status = 'failed', completing_until = NULL,
		error = $2 WHERE id = $1 AND status = 'completing' AND completing_until = $3`,
		u.ID, []byte(`{"code":"CHECKSUM_MISMATCH","detail":"the assembled content does not match the declared sha256"}`), token)
	if err != nil {
		return Translate(err)
	}
	if tag.RowsAffected() == 0 {
		return agentfs.ErrUploadCompleting
	}
	s.removeBlob(ctx, u.BlobKey)
	return agentfs.ErrChecksumMismatch
}

// abandonComplete puts a session whose complete failed back to pending, so
// a later complete can try again (S3 may have assembled it already).
func (s *Store) abandonComplete(ctx context.Context, id string, token time.Time) {
	_, _ = s.pool.Exec(context.WithoutCancel(ctx), `UPDATE uploads SET status = 'pending', completing_until = NULL
		WHERE id = $1 AND status = 'completing' AND completing_until = $2`, id, token)
}

// AbortUpload ends a session and removes its parts from S3. Aborting an
// aborted, expired or failed session returns it unchanged; a completed one
// is an *agentfs.UploadStateError. The session is marked aborted first and
// its S3 upload dropped after that commits (the sweeper retries a drop
// that failed), so S3 never loses parts of a session still pending.
func (s *Store) AbortUpload(ctx context.Context, subject, id string, hook UploadHook) (*agentfs.Upload, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var (
		u       *agentfs.Upload
		aborted bool
	)
	err := WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject)); err != nil {
			return err
		}
		switch u.Status {
		case agentfs.UploadCompleted, agentfs.UploadCompleting:
			return &agentfs.UploadStateError{Status: agentfs.UploadCompleted}
		case agentfs.UploadPending:
			if _, err := tx.Exec(ctx, `UPDATE uploads SET status = 'aborted' WHERE id = $1`, id); err != nil {
				return Translate(err)
			}
			u.Status, aborted = agentfs.UploadAborted, true
		}
		if err := s.loadParts(ctx, tx, u); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, u, false)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("abort upload: %w", err)
	}
	if aborted {
		_ = s.dropMultipart(ctx, u)
	}
	return u, nil
}

// dropMultipart removes a session's parts (or its assembled object) from S3.
func (s *Store) dropMultipart(ctx context.Context, u *agentfs.Upload) error {
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
		err := WithTx(ctx, s.pool, func(tx pgx.Tx) error {
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
