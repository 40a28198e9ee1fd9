package storage

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfs/agentfs"
)

// fileColumns are a file row as scanFile reads it. A file past its
// expires_at counts as deleted from that moment, before the sweeper records
// it (the last but two column says so).
const fileColumns = `id, subject, path, size_bytes, content_type, sha256, version, blob_key,
	coalesce(agent_id, ''), coalesce(run_id, ''), coalesce(last_agent_id, ''), coalesce(last_run_id, ''),
	created_at, updated_at, deleted_at, purge_after, expires_at, coalesce(expires_at <= now(), false),
	blocked, block_reason`

func (s *Store) scanFile(row pgx.Row) (*agentfs.File, error) {
	var f agentfs.File
	var expired bool
	err := row.Scan(&f.ID, &f.Subject, &f.Path, &f.SizeBytes, &f.ContentType, &f.SHA256, &f.Version, &f.BlobKey,
		&f.AgentID, &f.RunID, &f.LastAgentID, &f.LastRunID,
		&f.CreatedAt, &f.UpdatedAt, &f.DeletedAt, &f.PurgeAfter, &f.ExpiresAt, &expired, &f.Blocked, &f.BlockReason)
	if err != nil {
		return nil, Translate(err)
	}
	if expired && f.DeletedAt == nil {
		// Deleted from expires_at on, as the sweeper will record it.
		at := *f.ExpiresAt
		purge := at.Add(s.cfg.DeletedRetention)
		f.DeletedAt, f.PurgeAfter = &at, &purge
	}
	return &f, nil
}

// scanFiles reads every file of rows.
func (s *Store) scanFiles(rows pgx.Rows, err error) ([]*agentfs.File, error) {
	if err != nil {
		return nil, Translate(err)
	}
	defer rows.Close()
	var out []*agentfs.File
	for rows.Next() {
		f, err := s.scanFile(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, Translate(rows.Err())
}

// PendingPut is a put whose bytes are in a new blob, decided against the
// state before the body was read and waiting to be committed. Apply commits
// it in a transaction the caller owns (with whatever else must commit with
// it); Finish then removes the blob unless a committed row references it.
type PendingPut struct {
	store  *Store
	put    agentfs.Put
	seen   *agentfs.File // the live file decided against; nil when there was none
	fileID string        // the id the blob is tagged with
	blob   *writtenBlob
	used   bool // the last Apply pointed a file at the blob
}

// PreparePut decides put against the live file at its path before the body
// is read (preconditions, if_exists, a block), then streams the body into a
// new immutable blob while hashing it. A refusal before the body leaves the
// body unread.
func (s *Store) PreparePut(ctx context.Context, put agentfs.Put, body io.Reader) (*PendingPut, error) {
	live, _, err := s.fileAtPath(ctx, s.pool, put.Subject, put.Path)
	if err != nil {
		return nil, err
	}
	return s.PreparePutAgainst(ctx, put, body, live)
}

// PreparePutAgainst is PreparePut decided against live, the live file at
// put.Path as the caller found it (nil: none; LivePaths finds many at
// once). Apply decides again under a lock, so a live file that changed
// meanwhile costs a retag or a refusal there, never a wrong effect.
func (s *Store) PreparePutAgainst(ctx context.Context, put agentfs.Put, body io.Reader, live *agentfs.File) (*PendingPut, error) {
	if err := put.CheckAgainst(live); err != nil {
		return nil, err
	}
	fileID := fileIDFor(live)
	blob, err := s.writeBlob(ctx, put, fileID, body)
	if err != nil {
		return nil, err
	}
	return &PendingPut{store: s, put: put, seen: live, fileID: fileID, blob: blob}, nil
}

// Sum is the SHA-256 of the content.
func (p *PendingPut) Sum() []byte { b, _ := hex.DecodeString(p.blob.sha256); return b }

// Apply decides the put again against the state it locks in tx and points
// the file at the blob: a new file (created), a replace, or nothing when the
// live file already holds these bytes. A change makes a new version and
// records its event, from origin.
func (p *PendingPut) Apply(ctx context.Context, tx pgx.Tx, origin agentfs.Origin) (f *agentfs.File, created bool, err error) {
	f, created, p.used, err = p.store.applyPut(ctx, tx, p.put, p.seen == nil, p.fileID, p.blob, origin)
	return f, created, err
}

// Finish ends the put once its transaction is over (err is how it ended):
// the blob is removed unless a committed file references it, or the commit
// may have happened (the sweeper then decides from the rows). A blob the
// put shares with another version (a copy) is never removed here: it was
// not written for this put.
func (p *PendingPut) Finish(ctx context.Context, err error) {
	keep := p.used && err == nil || errors.Is(err, errCommitUncertain) || p.blob.from != nil
	if !keep {
		p.store.removeBlob(ctx, p.blob.key)
	}
}

func fileIDFor(live *agentfs.File) string {
	if live != nil {
		return live.ID
	}
	return NewID("file")
}

// writtenBlob is the blob a write points a file at: one just written and
// not yet referenced, or, with from, the blob of an existing version that
// the write shares (a copy or a revert: no bytes are copied in S3).
type writtenBlob struct {
	key    string
	size   int64
	sha256 string
	tags   map[string]string
	from   *versionRef
}

// versionRef names the version whose blob a write shares.
type versionRef struct {
	fileID  string
	version int
}

// shareBlobTx locks in tx the version whose blob b shares, so that neither
// a version sweep nor a purge can remove that version's row before tx
// commits a row of its own that references the blob: the blob sweep then
// always finds one of them (it removes only blobs no row references). FOR
// KEY SHARE waits only for a delete of the row, not for the update that
// supersedes it when its file is replaced. A version gone meanwhile is
// agentfs.ErrNotFound. A blob written for the write has nothing to lock.
func shareBlobTx(ctx context.Context, tx pgx.Tx, b *writtenBlob) error {
	if b.from == nil {
		return nil
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM file_versions
		WHERE file_id = $1 AND version = $2 AND blob_key = $3 FOR KEY SHARE) v`, b.from.fileID, b.from.version, b.key).Scan(&n)
	switch {
	case err != nil:
		return Translate(fmt.Errorf("share blob: %w", err))
	case n == 0:
		return fmt.Errorf("%w: the version whose content this write shares was removed meanwhile", agentfs.ErrNotFound)
	}
	return nil
}

// writeBlob streams body into a new blob, hashing it on the way, and checks
// it against the put's size limit and digest. On failure nothing is left
// referenced and the blob is removed.
func (s *Store) writeBlob(ctx context.Context, put agentfs.Put, fileID string, body io.Reader) (*writtenBlob, error) {
	if put.MaxBytes > 0 && put.Size > put.MaxBytes {
		return nil, agentfs.ErrTooLarge
	}
	src := body
	if put.MaxBytes > 0 {
		src = &limitedReader{r: body, left: put.MaxBytes}
	}
	hr := newHashingReader(src)
	key := "blobs/" + NewID("blob")[len("blob_"):]
	b := &writtenBlob{key: key, tags: blobTags(fileID, put.By)}
	err := s.putBlob(ctx, key, hr, put.Size, put.ContentType, b.tags)
	n, sum, srcErr := hr.finish()
	if srcErr != nil {
		err = agentfs.BodyError(srcErr) // the caller's body failed or was too large, not S3
	}
	if err == nil {
		b.size, b.sha256 = n, hex.EncodeToString(sum)
		if put.Digest != nil && subtle.ConstantTimeCompare(put.Digest, sum) != 1 {
			err = agentfs.ErrChecksumMismatch
		}
	}
	switch {
	case errors.Is(err, agentfs.ErrUnavailable):
		// S3 failed or did not answer: a remove would wait as long again
		// before the caller hears of it. If the PUT landed after all, the
		// blob is unreferenced and the sweeper removes it.
		return nil, err
	case err != nil:
		s.removeBlob(ctx, key)
		return nil, err
	}
	return b, nil
}

// limitedReader fails with agentfs.ErrTooLarge once more than left bytes
// have been read.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, agentfs.ErrTooLarge
	}
	return n, err
}

// CommitAlone commits a put that has nothing else to commit with it in one
// statement (the file, its version and its event), when the state is still
// the one the put was decided against: no file at the path (the insert's
// unique index says so), or the same version of the same live, unblocked
// file. It returns a nil file and no error when the state moved on, for a
// transaction to decide. This saves the 3 round trips of a transaction on
// the common path.
func (p *PendingPut) CommitAlone(ctx context.Context, origin agentfs.Origin) (*agentfs.File, bool, error) {
	s, put, seen, b := p.store, p.put, p.seen, p.blob
	var (
		f   *agentfs.File
		err error
	)
	switch {
	case b.from != nil:
		return nil, false, nil // a shared blob is referenced only in a transaction that locks its version
	case seen == nil:
		f, err = s.insertFile(ctx, s.pool, put, p.fileID, b, origin)
		if uniqueViolation(err, "files_live_path") {
			return nil, false, nil
		}
	case seen.SHA256 == b.sha256 && seen.ContentType == put.ContentType:
		return nil, false, nil // identical bytes: decided under the lock
	default:
		f, err = s.updateFile(ctx, s.pool, fileUpdate{id: seen.ID, put: put, blob: b, event: agentfs.EventReplaced, origin: origin,
			cond: "AND version = $13 AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND NOT blocked",
			args: []any{seen.Version}})
		if errors.Is(err, agentfs.ErrNotFound) { // no longer that version
			return nil, false, nil
		}
	}
	if err != nil && !isPgError(err) {
		// Postgres refusing the statement committed nothing; any other
		// failure (the connection died on it) may hide a commit.
		err = fmt.Errorf("%w: %w", errCommitUncertain, err)
	}
	p.used = f != nil
	return f, seen == nil && f != nil, err
}

func isPgError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// applyPut decides and commits the put in tx. fresh says fileID was made
// for this put, so no row can have it.
func (s *Store) applyPut(ctx context.Context, tx pgx.Tx, put agentfs.Put, fresh bool, fileID string, b *writtenBlob, origin agentfs.Origin) (*agentfs.File, bool, bool, error) {
	live, expired, err := s.fileAtPath(ctx, tx, put.Subject, put.Path, "FOR UPDATE")
	if err != nil {
		return nil, false, false, err
	}
	if err := put.CheckAgainst(live); err != nil {
		return nil, false, false, err
	}
	if live != nil && live.SHA256 == b.sha256 && live.ContentType == put.ContentType {
		return live, false, false, nil // identical bytes change nothing
	}
	if expired != nil {
		if err := s.recordExpiry(ctx, tx, expired); err != nil {
			return nil, false, false, err
		}
	}
	if err := shareBlobTx(ctx, tx, b); err != nil {
		return nil, false, false, err
	}
	id := fileID
	if live != nil {
		id = live.ID
	} else if !fresh {
		exists, err := s.fileExists(ctx, tx, fileID)
		if err != nil {
			return nil, false, false, err
		}
		if exists {
			id = NewID("file") // the file seen before the body was deleted meanwhile
		}
	}
	if b.from == nil && id != b.tags["file-id"] { // a shared blob keeps the tags of the write that made it
		b.tags["file-id"] = id
		if err := s.retagBlob(ctx, b.key, b.tags); err != nil {
			return nil, false, false, err
		}
	}
	if live == nil {
		f, err := s.insertFile(ctx, tx, put, id, b, origin)
		return f, true, err == nil, err
	}
	f, err := s.updateFile(ctx, tx, fileUpdate{id: id, put: put, blob: b, event: agentfs.EventReplaced, origin: origin})
	return f, false, err == nil, err
}

// insertFile makes a new file at version 1 in one statement: the file row,
// its version and its file.created event.
func (s *Store) insertFile(ctx context.Context, q querier, put agentfs.Put, id string, b *writtenBlob, o agentfs.Origin) (*agentfs.File, error) {
	return s.scanFile(q.QueryRow(ctx, `WITH f AS (
			INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
				agent_id, run_id, last_agent_id, last_run_id, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), nullif($8, ''), nullif($9, ''),
				CASE WHEN $10::float8 > 0 THEN now() + make_interval(secs => $10) END)
			RETURNING *),
		v AS (`+insertVersionFrom+`),
		e AS (`+insertEventFrom("'"+agentfs.EventCreated+"'", "NULL", 8, 11)+`)
		SELECT `+fileColumns+` FROM f`,
		id, put.Subject, put.Path, b.size, put.ContentType, b.sha256, b.key, put.By.AgentID, put.By.RunID,
		put.ExpiresIn.Seconds(), o.Key, o.RequestID, o.BatchID))
}

// fileUpdate is a new content for a file: a replace or a revert.
type fileUpdate struct {
	id     string
	put    agentfs.Put // size, content type, attribution and expiry of the write
	blob   *writtenBlob
	event  string // file.replaced or file.reverted
	origin agentfs.Origin
	cond   string // more of the WHERE clause, with arguments from $13
	args   []any
}

// updateFile points a file at a new content in one statement: the file
// row at the next version, the version it supersedes, the new version and
// the event. A replace without an expiry keeps the file's.
func (s *Store) updateFile(ctx context.Context, q querier, u fileUpdate) (*agentfs.File, error) {
	b, put, o := u.blob, u.put, u.origin
	return s.scanFile(q.QueryRow(ctx, `WITH f AS (
			UPDATE files SET size_bytes = $2, content_type = $3, sha256 = $4, blob_key = $5,
				version = version + 1, last_agent_id = nullif($6, ''), last_run_id = nullif($7, ''),
				updated_at = now(),
				expires_at = CASE WHEN $8::float8 > 0 THEN now() + make_interval(secs => $8) ELSE expires_at END
			WHERE id = $1 `+u.cond+` RETURNING *),
		s AS (UPDATE file_versions SET superseded_at = now() FROM f
			WHERE file_versions.file_id = f.id AND file_versions.version = f.version - 1),
		v AS (`+insertVersionFrom+`),
		e AS (`+insertEventFrom("$9", "NULL", 6, 10)+`)
		SELECT `+fileColumns+` FROM f`,
		append([]any{u.id, b.size, put.ContentType, b.sha256, b.key, put.By.AgentID, put.By.RunID,
			put.ExpiresIn.Seconds(), u.event, o.Key, o.RequestID, o.BatchID}, u.args...)...))
}

// insertVersionFrom records the version a statement's CTE f just wrote.
const insertVersionFrom = `INSERT INTO file_versions (file_id, version, subject, size_bytes, content_type, sha256,
		blob_key, agent_id, run_id, created_at)
	SELECT id, version, subject, size_bytes, content_type, sha256, blob_key, last_agent_id, last_run_id, updated_at FROM f`

// insertEventFrom records the event of each file a statement's CTE f just
// wrote: typ and previous are SQL expressions; the attribution is
// parameters $by and $by+1, and the key, request and batch are parameters
// $origin to $origin+2.
func insertEventFrom(typ, previous string, by, origin int) string {
	p := func(n int) string { return "$" + strconv.Itoa(n) }
	return `INSERT INTO events (subject, type, file_id, path, previous_path, version, size_bytes, sha256,
			agent_id, run_id, idempotency_key, request_id, batch_id)
		SELECT subject, ` + typ + `, id, path, ` + previous + `, version, size_bytes, sha256,
			nullif(` + p(by) + `, ''), nullif(` + p(by+1) + `, ''), nullif(` + p(origin) + `, ''),
			nullif(` + p(origin+1) + `, ''), nullif(` + p(origin+2) + `, '') FROM f`
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// fileAtPath returns the subject's live file at path (nil when there is
// none), and the file that still holds the path past its expiry (nil when
// there is none): it must be recorded expired before anything else takes
// the path. lock may be "FOR UPDATE".
func (s *Store) fileAtPath(ctx context.Context, q querier, subject, path string, lock ...string) (live, expired *agentfs.File, err error) {
	f, err := s.scanFile(q.QueryRow(ctx, `SELECT `+fileColumns+` FROM files
		WHERE subject = $1 AND path = $2 AND deleted_at IS NULL `+strings.Join(lock, " "), subject, path))
	switch {
	case errors.Is(err, agentfs.ErrNotFound):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("find live file: %w", err)
	case !f.Live():
		return nil, f, nil
	}
	return f, nil, nil
}

// recordExpiry records a file past its expires_at as deleted at that
// moment, with its file.expired event, freeing its path.
func (s *Store) recordExpiry(ctx context.Context, q querier, f *agentfs.File) error {
	_, err := q.Exec(ctx, `WITH f AS (
			UPDATE files SET deleted_at = expires_at, purge_after = expires_at + make_interval(secs => $2)
			WHERE id = $1 AND deleted_at IS NULL AND expires_at <= now() RETURNING *)
		`+insertEventFrom("'"+agentfs.EventExpired+"'", "NULL", 3, 5),
		f.ID, s.cfg.DeletedRetention.Seconds(), "", "", "", "", "")
	return Translate(err)
}

func (s *Store) fileExists(ctx context.Context, q querier, id string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM files WHERE id = $1)`, id).Scan(&ok)
	return ok, Translate(err)
}

// File returns the subject's file with this id, deleted or not.
func (s *Store) File(ctx context.Context, subject, id string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := s.scanFile(s.pool.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = $1 AND subject = $2`, id, subject))
	if err != nil {
		return nil, fmt.Errorf("get file: %w", err)
	}
	return f, nil
}

// ListFiles returns up to filter.Limit files, newest first, after the
// filter's cursor.
func (s *Store) ListFiles(ctx context.Context, subject string, filter agentfs.FileFilter) ([]*agentfs.File, error) {
	where := []string{"subject = $1"}
	args := []any{subject}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if !filter.IncludeDeleted {
		where = append(where, "deleted_at IS NULL", "(expires_at IS NULL OR expires_at > now())")
	}
	if filter.RunID != "" {
		add("run_id = ?", filter.RunID)
	}
	if filter.LastRunID != "" {
		add("last_run_id = ?", filter.LastRunID)
	}
	if filter.WrittenByRun != "" {
		add("(run_id = ? OR last_run_id = ?)", filter.WrittenByRun)
	}
	if filter.AgentID != "" {
		add("agent_id = ?", filter.AgentID)
	}
	if filter.Path != "" {
		add("path = ?", filter.Path)
	}
	if filter.Prefix != "" {
		add(`path LIKE ? ESCAPE '\'`, likePrefix(filter.Prefix))
	}
	if c := filter.After; c != nil {
		args = append(args, c.CreatedAt, c.ID)
		where = append(where, fmt.Sprintf("(created_at, id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	args = append(args, filter.Limit)
	out, err := s.scanFiles(s.pool.Query(ctx, `SELECT `+fileColumns+` FROM files WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT $`+strconv.Itoa(len(args)), args...))
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// DeleteFileTx soft-deletes a file in tx: it stays readable as metadata,
// frees its path, and is purged after the retention. Deleting a deleted (or
// expired) file returns it unchanged (changed false). ifMatch, when set,
// must name the file's etag.
func (s *Store) DeleteFileTx(ctx context.Context, tx pgx.Tx, subject, id, ifMatch string, o agentfs.Origin) (f *agentfs.File, changed bool, err error) {
	cur, err := s.LockFile(ctx, tx, subject, id)
	if err != nil {
		return nil, false, fmt.Errorf("delete file: %w", err)
	}
	if ifMatch != "" && !agentfs.ETagMatches(ifMatch, cur.ETag()) {
		return nil, false, agentfs.ErrPreconditionFailed
	}
	if !cur.Live() {
		return cur, false, nil
	}
	f, err = s.scanFile(tx.QueryRow(ctx, `WITH f AS (
			UPDATE files SET deleted_at = now(), updated_at = now(), purge_after = now() + make_interval(secs => $2)
			WHERE id = $1 RETURNING *),
		e AS (`+insertEventFrom("'"+agentfs.EventDeleted+"'", "NULL", 3, 5)+`)
		SELECT `+fileColumns+` FROM f`,
		id, s.cfg.DeletedRetention.Seconds(), o.By.AgentID, o.By.RunID, o.Key, o.RequestID, o.BatchID))
	if err != nil {
		return nil, false, fmt.Errorf("delete file: %w", err)
	}
	return f, true, nil
}

// RestoreFileTx undoes a delete (or an expiry) in tx, and clears the
// file's expiry. Restoring a live file returns it unchanged (changed
// false); a path taken meanwhile by another live file is a
// *agentfs.PathExistsError. The file's share links stay revoked: they died
// with it (migration 012), and an expiry not yet recorded is recorded
// first so that its links die too.
func (s *Store) RestoreFileTx(ctx context.Context, tx pgx.Tx, subject, id string, o agentfs.Origin) (f *agentfs.File, changed bool, err error) {
	cur, err := s.LockFile(ctx, tx, subject, id)
	if err != nil {
		return nil, false, fmt.Errorf("restore file: %w", err)
	}
	if cur.Live() {
		return cur, false, nil
	}
	if err := s.recordExpiry(ctx, tx, cur); err != nil { // nothing when its deletion is recorded
		return nil, false, fmt.Errorf("restore file: %w", err)
	}
	if err := s.freePath(ctx, tx, subject, cur.Path); err != nil {
		return nil, false, err
	}
	f, err = s.scanFile(tx.QueryRow(ctx, `WITH f AS (
			UPDATE files SET deleted_at = NULL, purge_after = NULL, expires_at = NULL, updated_at = now()
			WHERE id = $1 RETURNING *),
		e AS (`+insertEventFrom("'"+agentfs.EventRestored+"'", "NULL", 2, 4)+`)
		SELECT `+fileColumns+` FROM f`,
		id, o.By.AgentID, o.By.RunID, o.Key, o.RequestID, o.BatchID))
	if err != nil {
		return nil, false, fmt.Errorf("restore file: %w", err)
	}
	return f, true, nil
}

// freePath makes sure no live file holds path in tx: a file past its expiry
// is recorded expired; a live one is a *agentfs.PathExistsError.
func (s *Store) freePath(ctx context.Context, tx pgx.Tx, subject, path string) error {
	live, expired, err := s.fileAtPath(ctx, tx, subject, path, "FOR UPDATE")
	switch {
	case err != nil:
		return err
	case expired != nil:
		return s.recordExpiry(ctx, tx, expired)
	case live != nil:
		return &agentfs.PathExistsError{Path: path, ExistingFileID: live.ID}
	}
	return nil
}

// LockFile returns the subject's file with this id, locked in tx until it
// ends.
func (s *Store) LockFile(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return s.scanFile(tx.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject))
}

// BlockFile marks a file blocked by an operator: its content and any
// replace answer 451 with reason. Unblock with an empty reason and
// blocked false. An unknown id is agentfs.ErrNotFound.
func (s *Store) BlockFile(ctx context.Context, id string, blocked bool, reason string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := s.scanFile(s.pool.QueryRow(ctx, `UPDATE files SET blocked = $2, block_reason = $3
		WHERE id = $1 RETURNING `+fileColumns, id, blocked, reason))
	if err != nil {
		return nil, fmt.Errorf("block file: %w", err)
	}
	return f, nil
}
