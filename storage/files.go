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

const fileColumns = `id, subject, path, size_bytes, content_type, sha256, version, blob_key,
	coalesce(agent_id, ''), coalesce(run_id, ''), coalesce(last_agent_id, ''), coalesce(last_run_id, ''),
	created_at, updated_at, deleted_at, purge_after, blocked, block_reason`

func scanFile(row pgx.Row) (*agentfs.File, error) {
	var f agentfs.File
	err := row.Scan(&f.ID, &f.Subject, &f.Path, &f.SizeBytes, &f.ContentType, &f.SHA256, &f.Version, &f.BlobKey,
		&f.AgentID, &f.RunID, &f.LastAgentID, &f.LastRunID,
		&f.CreatedAt, &f.UpdatedAt, &f.DeletedAt, &f.PurgeAfter, &f.Blocked, &f.BlockReason)
	if err != nil {
		return nil, Translate(err)
	}
	return &f, nil
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
	live, err := s.liveFile(ctx, s.pool, put.Subject, put.Path)
	if err != nil {
		return nil, err
	}
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
// live file already holds these bytes.
func (p *PendingPut) Apply(ctx context.Context, tx pgx.Tx) (f *agentfs.File, created bool, err error) {
	f, created, p.used, err = p.store.applyPut(ctx, tx, p.put, p.seen == nil, p.fileID, p.blob)
	return f, created, err
}

// Finish ends the put once its transaction is over (err is how it ended):
// the blob is removed unless a committed file references it, or the commit
// may have happened (the sweeper then decides from the rows).
func (p *PendingPut) Finish(ctx context.Context, err error) {
	keep := p.used && err == nil || errors.Is(err, errCommitUncertain)
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

// writtenBlob is a blob just written and not yet referenced.
type writtenBlob struct {
	key    string
	size   int64
	sha256 string
	tags   map[string]string
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
// statement, when the state is still the one the put was decided against:
// no live file at the path (the insert's unique index says so), or the same
// version of the same live, unblocked file. It returns a nil file and no
// error when the state moved on, for a transaction to decide. This saves
// the 3 round trips of a transaction on the common path.
func (p *PendingPut) CommitAlone(ctx context.Context) (*agentfs.File, bool, error) {
	s, put, seen, b := p.store, p.put, p.seen, p.blob
	var (
		f   *agentfs.File
		err error
	)
	switch {
	case seen == nil:
		f, err = s.insertFile(ctx, s.pool, put, p.fileID, b)
		if uniqueViolation(err, "files_live_path") {
			return nil, false, nil
		}
	case seen.SHA256 == b.sha256 && seen.ContentType == put.ContentType:
		return nil, false, nil // identical bytes: decided under the lock
	default:
		f, err = s.updateFile(ctx, s.pool, put, seen.ID, b,
			"AND version = $8 AND deleted_at IS NULL AND NOT blocked", seen.Version)
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
func (s *Store) applyPut(ctx context.Context, tx pgx.Tx, put agentfs.Put, fresh bool, fileID string, b *writtenBlob) (*agentfs.File, bool, bool, error) {
	live, err := s.liveFile(ctx, tx, put.Subject, put.Path, "FOR UPDATE")
	if err != nil {
		return nil, false, false, err
	}
	if err := put.CheckAgainst(live); err != nil {
		return nil, false, false, err
	}
	if live != nil && live.SHA256 == b.sha256 && live.ContentType == put.ContentType {
		return live, false, false, nil // identical bytes change nothing
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
	if id != b.tags["file-id"] {
		b.tags["file-id"] = id
		if err := s.retagBlob(ctx, b.key, b.tags); err != nil {
			return nil, false, false, err
		}
	}
	if live == nil {
		f, err := s.insertFile(ctx, tx, put, id, b)
		return f, true, err == nil, err
	}
	f, err := s.updateFile(ctx, tx, put, id, b, "")
	return f, false, err == nil, err
}

func (s *Store) insertFile(ctx context.Context, q querier, put agentfs.Put, id string, b *writtenBlob) (*agentfs.File, error) {
	return scanFile(q.QueryRow(ctx, `INSERT INTO files
		(id, subject, path, size_bytes, content_type, sha256, blob_key, agent_id, run_id, last_agent_id, last_run_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), nullif($8, ''), nullif($9, ''))
		RETURNING `+fileColumns,
		id, put.Subject, put.Path, b.size, put.ContentType, b.sha256, b.key, put.By.AgentID, put.By.RunID))
}

// updateFile points file id at blob b; cond adds to the WHERE clause, with
// its arguments from $8.
func (s *Store) updateFile(ctx context.Context, q querier, put agentfs.Put, id string, b *writtenBlob, cond string, args ...any) (*agentfs.File, error) {
	return scanFile(q.QueryRow(ctx, `UPDATE files SET size_bytes = $2, content_type = $3, sha256 = $4,
			blob_key = $5, version = version + 1, last_agent_id = nullif($6, ''), last_run_id = nullif($7, ''),
			updated_at = now()
		WHERE id = $1 `+cond+` RETURNING `+fileColumns,
		append([]any{id, b.size, put.ContentType, b.sha256, b.key, put.By.AgentID, put.By.RunID}, args...)...))
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// liveFile returns the subject's live file at path, or nil when there is
// none. lock may be "FOR UPDATE".
func (s *Store) liveFile(ctx context.Context, q querier, subject, path string, lock ...string) (*agentfs.File, error) {
	f, err := scanFile(q.QueryRow(ctx, `SELECT `+fileColumns+` FROM files
		WHERE subject = $1 AND path = $2 AND deleted_at IS NULL `+strings.Join(lock, " "), subject, path))
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find live file: %w", err)
	}
	return f, nil
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
	f, err := scanFile(s.pool.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = $1 AND subject = $2`, id, subject))
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
		where = append(where, "deleted_at IS NULL")
	}
	if filter.RunID != "" {
		add("run_id = ?", filter.RunID)
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
	rows, err := s.pool.Query(ctx, `SELECT `+fileColumns+` FROM files WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, Translate(fmt.Errorf("list files: %w", err))
	}
	defer rows.Close()
	var out []*agentfs.File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		out = append(out, f)
	}
	return out, Translate(rows.Err())
}

func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// DeleteFileTx soft-deletes a file in tx: it stays readable as metadata,
// frees its path, and is purged after the retention. Deleting a deleted
// file returns it unchanged (changed false). ifMatch, when set, must name
// the file's etag.
func (s *Store) DeleteFileTx(ctx context.Context, tx pgx.Tx, subject, id, ifMatch string) (f *agentfs.File, changed bool, err error) {
	if err := checkID(id); err != nil {
		return nil, false, err
	}
	cur, err := s.lockFile(ctx, tx, subject, id)
	if err != nil {
		return nil, false, fmt.Errorf("delete file: %w", err)
	}
	if ifMatch != "" && !agentfs.ETagMatches(ifMatch, cur.ETag()) {
		return nil, false, agentfs.ErrPreconditionFailed
	}
	if !cur.Live() {
		return cur, false, nil
	}
	f, err = scanFile(tx.QueryRow(ctx, `UPDATE files SET deleted_at = now(), updated_at = now(),
		purge_after = now() + make_interval(secs => $2) WHERE id = $1 RETURNING `+fileColumns,
		id, s.cfg.DeletedRetention.Seconds()))
	if err != nil {
		return nil, false, fmt.Errorf("delete file: %w", err)
	}
	return f, true, nil
}

// RestoreFileTx undoes a delete in tx. Restoring a live file returns it
// unchanged (changed false); a path taken meanwhile by another live file is
// a *agentfs.PathExistsError.
func (s *Store) RestoreFileTx(ctx context.Context, tx pgx.Tx, subject, id string) (f *agentfs.File, changed bool, err error) {
	if err := checkID(id); err != nil {
		return nil, false, err
	}
	cur, err := s.lockFile(ctx, tx, subject, id)
	if err != nil {
		return nil, false, fmt.Errorf("restore file: %w", err)
	}
	if cur.Live() {
		return cur, false, nil
	}
	holder, err := s.liveFile(ctx, tx, subject, cur.Path)
	if err != nil {
		return nil, false, err
	}
	if holder != nil {
		return nil, false, &agentfs.PathExistsError{Path: cur.Path, ExistingFileID: holder.ID}
	}
	f, err = scanFile(tx.QueryRow(ctx, `UPDATE files SET deleted_at = NULL, purge_after = NULL, updated_at = now()
		WHERE id = $1 RETURNING `+fileColumns, id))
	if err != nil {
		return nil, false, fmt.Errorf("restore file: %w", err)
	}
	return f, true, nil
}

// LockFile returns the subject's file with this id, locked in tx until it
// ends.
func (s *Store) LockFile(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return s.lockFile(ctx, tx, subject, id)
}

func (s *Store) lockFile(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.File, error) {
	return scanFile(tx.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = $1 AND subject = $2 FOR UPDATE`, id, subject))
}

// BlockFile marks a file blocked by an operator: its content and any
// replace answer 451 with reason. Unblock with an empty reason and
// blocked false. An unknown id is agentfs.ErrNotFound.
func (s *Store) BlockFile(ctx context.Context, id string, blocked bool, reason string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	f, err := scanFile(s.pool.QueryRow(ctx, `UPDATE files SET blocked = $2, block_reason = $3
		WHERE id = $1 RETURNING `+fileColumns, id, blocked, reason))
	if err != nil {
		return nil, fmt.Errorf("block file: %w", err)
	}
	return f, nil
}
