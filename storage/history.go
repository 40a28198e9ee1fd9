package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

const versionColumns = `v.file_id, v.subject, v.version, v.size_bytes, v.content_type, v.sha256, v.blob_key,
	coalesce(v.agent_id, ''), coalesce(v.run_id, ''), v.created_at, v.version = f.version`

func scanVersion(row pgx.Row) (*agentfs.FileVersion, error) {
	var v agentfs.FileVersion
	err := row.Scan(&v.FileID, &v.Subject, &v.Version, &v.SizeBytes, &v.ContentType, &v.SHA256, &v.BlobKey,
		&v.By.AgentID, &v.By.RunID, &v.CreatedAt, &v.Current)
	if err != nil {
		return nil, Translate(err)
	}
	return &v, nil
}

// Versions lists the subject's file's versions, newest first, below
// filter.Before (0: from the newest). An unknown file is agentfs.ErrNotFound;
// a file whose versions were all swept but the current lists that one.
func (s *Store) Versions(ctx context.Context, subject, fileID string, filter agentfs.VersionFilter) ([]*agentfs.FileVersion, error) {
	before := filter.Before
	if before <= 0 {
		before = 1<<31 - 1
	}
	args := pgx.NamedArgs{"file_id": fileID, "subject": subject, "before": before, "limit": filter.Limit}
	rows, err := s.pool.Query(ctx, `SELECT `+versionColumns+` FROM file_versions v JOIN files f ON f.id = v.file_id
		WHERE v.file_id = @file_id AND f.subject = @subject AND v.version < @before AND `+visiblePath(ctx, "f.path", args)+`
		ORDER BY v.version DESC LIMIT @limit`, args)
	out, err := collect(rows, err, "list versions", rowOf(scanVersion))
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		// No versions below the cursor, or no such file.
		if _, err := s.File(ctx, subject, fileID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Version returns version n of the subject's file, or agentfs.ErrNotFound
// when there is no such version (or it was swept).
func (s *Store) Version(ctx context.Context, subject, fileID string, n int) (*agentfs.FileVersion, error) {
	if err := checkID(fileID); err != nil {
		return nil, err
	}
	return s.version(ctx, s.pool, subject, fileID, n)
}

// FileVersion is the subject's file with this id (deleted or not) and its
// version n, read in one statement: what a read of a version's content
// needs. Either missing is agentfs.ErrNotFound.
func (s *Store) FileVersion(ctx context.Context, subject, fileID string, n int) (*agentfs.File, *agentfs.FileVersion, error) {
	if err := checkID(fileID); err != nil {
		return nil, nil, err
	}
	args := pgx.NamedArgs{"id": fileID, "subject": subject, "version": n}
	var v agentfs.FileVersion
	row := s.pool.QueryRow(ctx, `WITH f AS (SELECT `+fileColumns+` FROM files WHERE id = @id AND subject = @subject
		AND `+visiblePath(ctx, "path", args)+`)
		SELECT f.*, v.version, v.size_bytes, v.content_type, v.sha256, v.blob_key, coalesce(v.agent_id, ''), coalesce(v.run_id, ''),
			v.created_at, v.version = f.version
		FROM f JOIN file_versions v ON v.file_id = f.id AND v.version = @version`, args)
	f, err := s.scanFile(alsoScan{row, []any{&v.Version, &v.SizeBytes, &v.ContentType, &v.SHA256, &v.BlobKey,
		&v.By.AgentID, &v.By.RunID, &v.CreatedAt, &v.Current}})
	if err != nil {
		return nil, nil, fmt.Errorf("get version: %w", err)
	}
	v.FileID, v.Subject = f.ID, f.Subject
	return f, &v, nil
}

// alsoScan is a row whose Scan fills more destinations after the ones
// it is given: one statement read by two scanners.
type alsoScan struct {
	row  pgx.Row
	more []any
}

func (r alsoScan) Scan(dest ...any) error { return r.row.Scan(append(dest, r.more...)...) }

func (s *Store) version(ctx context.Context, q querier, subject, fileID string, n int) (*agentfs.FileVersion, error) {
	args := pgx.NamedArgs{"file_id": fileID, "subject": subject, "version": n}
	v, err := scanVersion(q.QueryRow(ctx, `SELECT `+versionColumns+` FROM file_versions v JOIN files f ON f.id = v.file_id
		WHERE v.file_id = @file_id AND f.subject = @subject AND v.version = @version AND `+visiblePath(ctx, "f.path", args), args))
	if err != nil {
		return nil, fmt.Errorf("get version: %w", err)
	}
	return v, nil
}

// liveForChange locks the subject's live file for a change in tx: a deleted
// (or expired) file is agentfs.ErrNotFound, and ifMatch, when set, must name
// its etag.
func (s *Store) liveForChange(ctx context.Context, tx pgx.Tx, subject, id, ifMatch string) (*agentfs.File, error) {
	f, err := s.LockFile(ctx, tx, subject, id)
	if err != nil {
		return nil, err
	}
	if !f.Live() {
		return nil, fmt.Errorf("%w: the file is deleted; restore it first", agentfs.ErrNotFound)
	}
	if ifMatch != "" && !agentfs.ETagMatches(ifMatch, f.ETag()) {
		return nil, agentfs.ErrPreconditionFailed
	}
	return f, nil
}

// RevertFileTx makes version r.Version's content the file's current one in
// tx, as a new version that shares that version's blob (no bytes are
// copied; the version is locked until tx ends, so no sweep removes the blob
// meanwhile). Content identical to the current one changes nothing (changed
// false). A deleted file, or a version that does not exist or was swept, is
// agentfs.ErrNotFound; a blocked file is a *agentfs.BlockedError.
func (s *Store) RevertFileTx(ctx context.Context, tx pgx.Tx, r agentfs.Revert, o agentfs.Origin) (*agentfs.File, bool, error) {
	cur, err := s.liveForChange(ctx, tx, r.Subject, r.FileID, r.IfMatch)
	if err != nil {
		return nil, false, fmt.Errorf("revert file: %w", err)
	}
	if cur.Blocked {
		return nil, false, &agentfs.BlockedError{FileID: cur.ID, Reason: cur.BlockReason}
	}
	v, err := s.version(ctx, tx, r.Subject, r.FileID, r.Version)
	if err != nil {
		return nil, false, fmt.Errorf("revert file: %w", err)
	}
	if v.SHA256 == cur.SHA256 && v.ContentType == cur.ContentType {
		return cur, false, nil
	}
	shared := &writtenBlob{key: v.BlobKey, size: v.SizeBytes, sha256: v.SHA256, from: &versionRef{fileID: cur.ID, version: v.Version}}
	if err := shareBlobTx(ctx, tx, shared); err != nil {
		return nil, false, fmt.Errorf("revert file: %w", err)
	}
	f, err := s.updateFile(ctx, tx, fileUpdate{id: cur.ID, event: agentfs.EventReverted, origin: o,
		put: agentfs.Put{ContentType: v.ContentType, By: r.By}, blob: shared})
	if err != nil {
		return nil, false, fmt.Errorf("revert file: %w", err)
	}
	return f, true, nil
}

// MoveFileTx gives the subject's live file another path in tx; its id,
// url, version and history stay. A live file at the destination is a
// *agentfs.PathExistsError, or, with m.Replace, is soft-deleted in the same
// transaction, or, with m.Overwrite, takes the file's bytes as its next
// version (overwriteTx; a blocked one is a *agentfs.BlockedError either way). Moving a file to
// its own path changes nothing (changed false). S3 is not touched: blob
// keys never derive from paths.
func (s *Store) MoveFileTx(ctx context.Context, tx pgx.Tx, m agentfs.Move, o agentfs.Origin) (*agentfs.File, bool, error) {
	cur, err := s.liveForChange(ctx, tx, m.Subject, m.FileID, m.IfMatch)
	if err != nil {
		return nil, false, fmt.Errorf("move file: %w", err)
	}
	if cur.Path == m.Path {
		return cur, false, nil
	}
	// Moves onto one path take turns. A move that waited for the file it
	// replaces would otherwise find that file gone and miss the one that
	// took its place (READ COMMITTED re-checks only the rows it locked),
	// and collide with it on the live path.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('agentfs.move.' || $1 || '/' || $2, 0))`,
		m.Subject, m.Path); err != nil {
		return nil, false, Translate(fmt.Errorf("move file: %w", err))
	}
	dest, expired, err := s.fileAtPath(ctx, tx, m.Subject, m.Path, "FOR UPDATE")
	switch {
	case err != nil:
		return nil, false, err
	case expired != nil:
		err = s.recordExpiry(ctx, tx, expired)
	case dest != nil && !m.Replace && !m.Overwrite:
		err = &agentfs.PathExistsError{Path: m.Path, ExistingFileID: dest.ID}
	case dest != nil && dest.Blocked:
		err = &agentfs.BlockedError{FileID: dest.ID, Reason: dest.BlockReason}
	case dest != nil && m.Overwrite:
		return s.overwriteTx(ctx, tx, cur, dest, o)
	case dest != nil:
		_, _, err = s.DeleteFileTx(ctx, tx, m.Subject, dest.ID, "", o)
	}
	if err != nil {
		return nil, false, err
	}
	f, err := s.scanFile(tx.QueryRow(ctx, `WITH old AS (SELECT path FROM files WHERE id = @id),
		f AS (UPDATE files SET path = @path, updated_at = now(), last_agent_id = nullif(@agent_id, ''),
				last_run_id = nullif(@run_id, '')
			WHERE id = @id RETURNING *),
		e AS (`+insertEventFrom("'"+agentfs.EventMoved+"'", "(SELECT path FROM old)")+`)
		SELECT `+fileColumns+` FROM f`,
		originArgs(o, pgx.NamedArgs{"id": cur.ID, "path": m.Path})))
	if err != nil {
		return nil, false, fmt.Errorf("move file: %w", err)
	}
	return f, true, nil
}

// SetExpiryTx sets (or, with e.At nil, clears) when the subject's live file
// expires, unless e.KeepExpiry, and its mode and mtime when e sets them, in
// tx, without a new version. Values it already has change nothing (changed
// false).
func (s *Store) SetExpiryTx(ctx context.Context, tx pgx.Tx, e agentfs.Expiry) (*agentfs.File, bool, error) {
	cur, err := s.liveForChange(ctx, tx, e.Subject, e.FileID, e.IfMatch)
	if err != nil {
		return nil, false, fmt.Errorf("set expiry: %w", err)
	}
	meta := agentfs.FileMeta{Mode: e.Mode, MTime: e.MTime}
	expiry := !e.KeepExpiry && !sameTime(cur.ExpiresAt, e.At)
	if !expiry && !metaChanges(cur, meta) {
		return cur, false, nil
	}
	f, err := s.scanFile(tx.QueryRow(ctx, `UPDATE files SET
			expires_at = CASE WHEN @expiry THEN @at::timestamptz ELSE expires_at END,
			updated_at = CASE WHEN @expiry THEN now() ELSE updated_at END,
			mode = coalesce(@mode::int, mode), mtime = coalesce(@mtime::timestamptz, mtime)
		WHERE id = @id RETURNING `+fileColumns,
		pgx.NamedArgs{"id": cur.ID, "expiry": expiry, "at": e.At, "mode": e.Mode, "mtime": e.MTime}))
	if err != nil {
		return nil, false, fmt.Errorf("set expiry: %w", err)
	}
	return f, true, nil
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// ExpireFiles records every file past its expires_at as deleted at that
// moment, with its file.expired event, and reports how many. (The API
// already treats such files as deleted; this makes it so in the rows.)
// Several instances may run it at once: each file is taken by one.
func (s *Store) ExpireFiles(ctx context.Context) (int64, error) {
	const chunk = 500
	return s.inChunks(ctx, "expire files", chunk, `WITH f AS (
			UPDATE files SET deleted_at = expires_at, purge_after = expires_at + make_interval(secs => @retention)
			WHERE id IN (SELECT id FROM files WHERE `+expiredFile+`
				LIMIT @chunk FOR UPDATE SKIP LOCKED)
			RETURNING *)
		`+insertEventFrom("'"+agentfs.EventExpired+"'", "NULL"),
		originArgs(agentfs.Origin{}, pgx.NamedArgs{"retention": s.cfg.DeletedRetention.Seconds(), "chunk": chunk}))
}

// SweepVersions removes non-current versions superseded longer ago than
// retention, and those beyond the newest maxVersions of their file (the
// current one always stays), and reports how many. A version a live share
// link pins stays, and so does one a checkpoint keeps (pinnedBy). Their blobs go with the next blob sweep, once no row
// references them (versions share blobs after a revert or a copy).
func (s *Store) SweepVersions(ctx context.Context, retention time.Duration, maxVersions int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM file_versions v USING files f
		WHERE f.id = v.file_id AND v.version <> f.version
		  AND (v.superseded_at < now() - make_interval(secs => $1)
		       OR v.version <= f.version - $2)
		  AND NOT EXISTS (SELECT 1 FROM links l WHERE l.file_id = v.file_id AND l.version = v.version
		                  AND l.revoked_at IS NULL AND l.expires_at > now())
		  AND NOT `+pinnedBy("v.file_id", "v.version"),
		retention.Seconds(), maxVersions)
	if err != nil {
		return 0, Translate(fmt.Errorf("sweep versions: %w", err))
	}
	return tag.RowsAffected(), nil
}

// errVersionSwept is the reason a pinned version's bytes are gone.
var errVersionSwept = errors.New("the version was swept")

// overwriteTx makes src's content (its blob shared, no bytes copied) and
// its mode, mtime and kind the next version of dest, which keeps its id,
// url and history, then soft-deletes src (restorable), in tx: a rename
// over an existing file. Identical content makes no version. The answer is
// dest as it now is.
func (s *Store) overwriteTx(ctx context.Context, tx pgx.Tx, src, dest *agentfs.File, o agentfs.Origin) (*agentfs.File, bool, error) {
	mtime := src.MTime
	meta := agentfs.FileMeta{Mode: &src.Mode, MTime: &mtime, Kind: src.Kind}
	var f *agentfs.File
	var err error
	if src.SHA256 == dest.SHA256 && src.ContentType == dest.ContentType {
		f, err = s.keepMeta(ctx, tx, dest, meta)
	} else {
		shared := &writtenBlob{key: src.BlobKey, size: src.SizeBytes, sha256: src.SHA256,
			from: &versionRef{fileID: src.ID, version: src.Version}}
		if err = shareBlobTx(ctx, tx, shared); err == nil {
			f, err = s.updateFile(ctx, tx, fileUpdate{id: dest.ID, event: agentfs.EventReplaced, origin: o,
				put: agentfs.Put{ContentType: src.ContentType, By: o.By, Meta: meta}, blob: shared})
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("move file over another: %w", err)
	}
	if _, _, err := s.DeleteFileTx(ctx, tx, src.Subject, src.ID, "", o); err != nil {
		return nil, false, fmt.Errorf("move file over another: %w", err)
	}
	return f, true, nil
}
