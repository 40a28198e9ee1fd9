package storage

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/hashwindow"
)

// The complete of an upload session: it holds the session under a fence and
// a lease, assembles the parts in S3, learns the content's SHA-256 from the
// running hash (reading back only what it lacks), and commits the file.

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
	args := pgx.NamedArgs{"id": id, "subject": subject}
	if err := tx.QueryRow(ctx, `SELECT path FROM uploads WHERE id = @id AND subject = @subject
		AND `+visiblePath(ctx, "path", args), args).Scan(&path); err != nil {
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
	// The parts reached S3 by many requests, perhaps on many instances:
	// the search index reads the assembled content back, once, when it is
	// small enough to be indexed.
	text, err := s.readText(ctx, u.BlobKey, u.SizeBytes)
	if err != nil {
		return nil, err
	}
	b := &writtenBlob{key: u.BlobKey, size: u.SizeBytes, sha256: sum, tags: blobTags(fileIDFor(live), u.By), text: &text}
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
