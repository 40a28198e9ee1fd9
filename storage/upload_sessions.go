package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
)

// An upload session's life outside its parts and its complete: created (or
// resumed), read, listed, aborted and expired. Its parts are in
// upload_parts.go, its complete in upload_complete.go, and the leases both
// hold on it in upload_leases.go.

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
		args := pgx.NamedArgs{"id": id, "subject": subject}
		if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
			WHERE id = @id AND subject = @subject AND `+visiblePath(ctx, "path", args), args)); err != nil {
			return err
		}
		return s.loadParts(ctx, tx, u)
	})
	if err != nil {
		return nil, fmt.Errorf("get upload: %w", err)
	}
	return u, nil
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
	args := pgx.NamedArgs{"id": id, "subject": subject}
	if u, err = scanUpload(tx.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads
		WHERE id = @id AND subject = @subject AND `+visiblePath(ctx, "path", args)+` FOR UPDATE`, args)); err != nil {
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
	return s.listUploads(ctx, s.pool, subject, filter)
}

func (s *Store) listUploads(ctx context.Context, q querier, subject string, filter agentfs.UploadFilter) ([]*agentfs.Upload, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visiblePath(ctx, "path", w.args))
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
	w.when(filter.RunID != "", "run_id = @run_id", pgx.NamedArgs{"run_id": filter.RunID})
	w.when(filter.Open, "(status = 'pending' AND expires_at > now() OR status = 'completing')", nil)
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := q.Query(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE `+w.where()+
		` ORDER BY created_at DESC, id DESC LIMIT @limit`, w.args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list uploads: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Upload, error) { return scanUpload(r) })
	if err != nil {
		return nil, Translate(fmt.Errorf("list uploads: %w", err))
	}
	return out, s.loadPartsOf(ctx, q, out)
}

// loadPartsOf loads the parts of many sessions in one query.
func (s *Store) loadPartsOf(ctx context.Context, q querier, uploads []*agentfs.Upload) error {
	byID := make(map[string]*agentfs.Upload, len(uploads))
	ids := make([]string, 0, len(uploads))
	for _, u := range uploads {
		byID[u.ID], u.Parts = u, []agentfs.Part{}
		ids = append(ids, u.ID)
	}
	rows, err := q.Query(ctx, `SELECT upload_id, part_number, size_bytes, sha256, etag FROM upload_parts
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
