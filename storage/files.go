package storage

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfs/agentfs"
)

// The one SQL definition of a live file: not deleted, and not past its
// expiry. A file past its expires_at counts as deleted from that moment,
// before the sweeper records it (expiredFile: past it, not yet recorded).
const (
	pastExpiry  = `coalesce(expires_at <= now(), false)`
	liveFile    = `(deleted_at IS NULL AND NOT ` + pastExpiry + `)`
	expiredFile = `(deleted_at IS NULL AND ` + pastExpiry + `)`
)

// fileColumns are a file row as scanFile reads it (the last but two column
// says whether it is past its expiry).
const fileColumns = `id, subject, path, size_bytes, content_type, sha256, version, blob_key,
	coalesce(agent_id, ''), coalesce(run_id, ''), coalesce(last_agent_id, ''), coalesce(last_run_id, ''),
	created_at, updated_at, deleted_at, purge_after, expires_at, ` + pastExpiry + `,
	blocked, block_reason, mode, coalesce(mtime, updated_at), kind, coalesce(forked_from_id, ''), coalesce(forked_from_version, 0)`

func (s *Store) scanFile(row pgx.Row) (*agentfs.File, error) {
	var f agentfs.File
	var expired bool
	err := row.Scan(&f.ID, &f.Subject, &f.Path, &f.SizeBytes, &f.ContentType, &f.SHA256, &f.Version, &f.BlobKey,
		&f.AgentID, &f.RunID, &f.LastAgentID, &f.LastRunID,
		&f.CreatedAt, &f.UpdatedAt, &f.DeletedAt, &f.PurgeAfter, &f.ExpiresAt, &expired, &f.Blocked, &f.BlockReason,
		&f.Mode, &f.MTime, &f.Kind, &f.ForkedFromID, &f.ForkedFromVersion)
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
// body unread. A small put that only creates is not looked up first
// (createsOnly, createUnseenMax): a path already taken refuses it after its
// body, when it commits.
func (s *Store) PreparePut(ctx context.Context, put agentfs.Put, body io.Reader) (*PendingPut, error) {
	if createsOnly(put) && put.Size >= 0 && put.Size <= createUnseenMax {
		// A small write that only creates (a mount's new file, a plain
		// POST) skips the lookup: its transaction decides against the
		// path's file under a lock anyway, so a file there is refused
		// (412, 409) after the body, not before.
		return s.PreparePutAgainst(ctx, put, body, nil)
	}
	live, _, err := s.fileAtPath(ctx, s.pool, put.Subject, put.Path)
	if err != nil {
		return nil, err
	}
	return s.PreparePutAgainst(ctx, put, body, live)
}

// createUnseenMax is the largest declared size of a put that only
// creates (createsOnly) that PreparePut writes without looking up the path
// first: a refusal costs the blob written and removed, a lookup a round
// trip to Postgres for every create.
const createUnseenMax = 1 << 20

// createsOnly reports whether put succeeds only where no live file holds
// its path (If-None-Match: *, or neither a replace nor If-Match): decided
// against no file, it ends as decided against the one it meets under the
// commit's lock (PreparePutAgainst).
func createsOnly(put agentfs.Put) bool {
	return put.IfNoneMatchAny || !put.Replace && put.IfMatch == ""
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
// the write shares (a copy or a revert: no bytes are copied in S3). text
// is its row of the search index, written with the file (nil for a shared
// blob: the write that made it wrote it).
type writtenBlob struct {
	key    string
	size   int64
	sha256 string
	tags   map[string]string
	from   *versionRef
	text   *blobText
}

// searchRow is the kind and text of the search index's row for b (-1:
// none to write): a text is written pending, for the mover to put into
// the trigram index after the write (KeepIndexingPending).
func (b *writtenBlob) searchRow() (int16, string) {
	switch {
	case b.text == nil:
		return -1, ""
	case b.text.kind == searchText:
		return searchPending, b.text.body
	}
	return b.text.kind, b.text.body
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
	hr.text = newTextCapture(s.searchMax(), put.Size)
	if !put.Bulk {
		hr.keepFor(s.blobs, put.Size)
	}
	key := "blobs/" + NewID("blob")[len("blob_"):]
	b := &writtenBlob{key: key, tags: blobTags(fileID, put.By)}
	err := s.putBlob(ctx, key, hr, put.Size, put.ContentType, b.tags)
	n, sum, srcErr := hr.finish()
	if srcErr != nil {
		err = agentfs.BodyError(srcErr) // the caller's body failed or was too large, not S3
	}
	if err == nil {
		b.size, b.sha256 = n, hex.EncodeToString(sum)
		t := hr.text.text(n)
		b.text = &t
		if put.Digest != nil && subtle.ConstantTimeCompare(put.Digest, sum) != 1 {
			err = agentfs.ErrChecksumMismatch
		}
	}
	if err == nil {
		// The bytes are in hand: a read of the new file needs no S3.
		if b, ok := hr.kept(n); ok {
			s.blobs.Put(key, b)
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
		if RaceLost(err) {
			return nil, false, nil
		}
	case seen.SHA256 == b.sha256 && seen.ContentType == put.ContentType:
		return nil, false, nil // identical bytes: decided under the lock
	default:
		f, err = s.updateFile(ctx, s.pool, fileUpdate{id: seen.ID, put: put, blob: b, event: agentfs.EventReplaced, origin: origin,
			onlyVersion: seen.Version})
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
		f, err := s.keepMeta(ctx, tx, live, put.Meta) // identical bytes make no version
		return f, false, false, err
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

// writeFiles is the one statement that gives files their content: f
// writes the file rows (an insert of new files, or an update of one;
// RETURNING *) from i, a row per file with the origin of its write (id,
// idempotency_key, request_id, batch_id, n for the order); each file's new
// version and its event of type typ (by the write's agent and run) follow,
// in i's order, with the search index's row of each new blob (i's
// search_kind and search_body; a kind of -1 writes none: the blob is
// shared and has its row), and the statement answers the files. supersede
// marks the version an update replaced.
func writeFiles(i, f, typ string, supersede bool) string {
	s := ""
	if supersede {
		s = `s AS (UPDATE file_versions SET superseded_at = now() FROM f
			WHERE file_versions.file_id = f.id AND file_versions.version = f.version - 1),`
	}
	return `WITH i AS (` + i + `), f AS (` + f + `), ` + s + `
		v AS (INSERT INTO file_versions (file_id, version, subject, size_bytes, content_type, sha256,
				blob_key, agent_id, run_id, created_at)
			SELECT id, version, subject, size_bytes, content_type, sha256, blob_key, last_agent_id, last_run_id, updated_at
			FROM f),
		e AS (INSERT INTO events (subject, type, file_id, path, previous_path, version, size_bytes, sha256,
				agent_id, run_id, idempotency_key, request_id, batch_id, fork_id, origin)
			SELECT f.subject, ` + typ + `, f.id, f.path, NULL, f.version, f.size_bytes, f.sha256,
				f.last_agent_id, f.last_run_id, nullif(i.idempotency_key, ''), nullif(i.request_id, ''),
				nullif(i.batch_id, ''), nullif(@fork_id::text, ''), nullif(@via::text, '')
			FROM f JOIN i ON i.id = f.id ORDER BY i.n),
		t AS (INSERT INTO search_texts (blob_key, subject, kind, body)
			SELECT f.blob_key, f.subject, i.search_kind, CASE WHEN i.search_kind IN (0, 3) THEN i.search_body END
			FROM f JOIN i ON i.id = f.id WHERE i.search_kind >= 0
			ON CONFLICT (blob_key) DO NOTHING)
		SELECT ` + fileColumns + ` FROM f`
}

// insertFilesSQL makes new files at version 1, a row per element of the
// arrays, in their order; a path a live file holds fails it (the unique
// files_live_path, RaceLost). insertFreeFilesSQL makes only those whose
// path no live file holds and skips the others: no version, event or
// search row for them, and no row in its answer.
var (
	insertFilesSQL     = insertFilesInto("")
	insertFreeFilesSQL = insertFilesInto("ON CONFLICT (subject, path) WHERE deleted_at IS NULL DO NOTHING")
)

func insertFilesInto(onConflict string) string {
	return writeFiles(`SELECT * FROM unnest(@ids::text[], @paths::text[], @sizes::bigint[],
		@content_types::text[], @sha256s::text[], @blob_keys::text[], @agent_ids::text[], @run_ids::text[],
		@expires_in::float8[], @idempotency_keys::text[], @request_ids::text[], @batch_ids::text[],
		@search_kinds::smallint[], @search_bodies::text[], @modes::int[], @mtimes::timestamptz[], @kinds::text[],
		@forked_from_ids::text[], @forked_from_versions::int[])
		WITH ORDINALITY AS i(id, path, size, content_type, sha256, blob_key, agent_id, run_id, expires_in,
			idempotency_key, request_id, batch_id, search_kind, search_body, mode, mtime, kind,
			forked_from_id, forked_from_version, n)`,
		`INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
			agent_id, run_id, last_agent_id, last_run_id, expires_at, mode, mtime, kind,
			forked_from_id, forked_from_version)
		SELECT id, @subject, path, size, content_type, sha256, blob_key, nullif(agent_id, ''), nullif(run_id, ''),
			nullif(agent_id, ''), nullif(run_id, ''),
			CASE WHEN expires_in > 0 THEN now() + make_interval(secs => expires_in) END, mode, mtime, kind,
			forked_from_id, forked_from_version
		FROM i ORDER BY n
		`+onConflict+`
		RETURNING *`,
		`'`+agentfs.EventCreated+`'`, false)
}

// newFiles are the files a statement creates, a column each.
type newFiles struct {
	ids, paths, contentTypes, sha256s, blobKeys, agentIDs, runIDs []string
	keys, requestIDs, batchIDs, searchBodies                      []string
	sizes                                                         []int64
	expiresIn                                                     []float64
	searchKinds                                                   []int16
	modes                                                         []int32
	mtimes                                                        []*time.Time
	kinds                                                         []string
	forkID, via                                                   string // of every file: Origin.ForkID, Origin.Via
	// forkedFromIDs and forkedFromVersions name, for a fork's files, the
	// file and version each was copied from (nil for other writes).
	forkedFromIDs      []string
	forkedFromVersions []int32
}

// add adds the file id that put makes with blob b, from origin o.
func (n *newFiles) add(id string, put agentfs.Put, b *writtenBlob, o agentfs.Origin) {
	n.ids, n.paths, n.contentTypes = append(n.ids, id), append(n.paths, put.Path), append(n.contentTypes, put.ContentType)
	n.sha256s, n.blobKeys, n.sizes = append(n.sha256s, b.sha256), append(n.blobKeys, b.key), append(n.sizes, b.size)
	n.agentIDs, n.runIDs = append(n.agentIDs, put.By.AgentID), append(n.runIDs, put.By.RunID)
	n.expiresIn = append(n.expiresIn, put.ExpiresIn.Seconds())
	n.keys, n.requestIDs, n.batchIDs = append(n.keys, o.Key), append(n.requestIDs, o.RequestID), append(n.batchIDs, o.BatchID)
	kind, body := b.searchRow()
	n.searchKinds, n.searchBodies = append(n.searchKinds, kind), append(n.searchBodies, body)
	mode, fk := int32(agentfs.DefaultMode), agentfs.KindFile
	if put.Meta.Mode != nil {
		mode = int32(*put.Meta.Mode)
	}
	if put.Meta.Kind != "" {
		fk = put.Meta.Kind
	}
	n.modes, n.mtimes, n.kinds = append(n.modes, mode), append(n.mtimes, put.Meta.MTime), append(n.kinds, fk)
}

// insertFiles makes the subject's new files in one statement: their rows,
// versions and file.created events.
func (s *Store) insertFiles(ctx context.Context, q querier, subject string, n *newFiles) ([]*agentfs.File, error) {
	return s.insertFilesWith(ctx, q, insertFilesSQL, subject, n)
}

// insertFreeFiles is insertFiles of the files whose path is free
// (insertFreeFilesSQL): it answers only the files it made.
func (s *Store) insertFreeFiles(ctx context.Context, q querier, subject string, n *newFiles) ([]*agentfs.File, error) {
	return s.insertFilesWith(ctx, q, insertFreeFilesSQL, subject, n)
}

func (s *Store) insertFilesWith(ctx context.Context, q querier, sql, subject string, n *newFiles) ([]*agentfs.File, error) {
	if slices.Contains(n.searchKinds, searchPending) {
		s.wakeMover()
	}
	return s.scanFiles(q.Query(ctx, sql, pgx.NamedArgs{"subject": subject,
		"ids": n.ids, "paths": n.paths, "sizes": n.sizes, "content_types": n.contentTypes, "sha256s": n.sha256s,
		"blob_keys": n.blobKeys, "agent_ids": n.agentIDs, "run_ids": n.runIDs, "expires_in": n.expiresIn,
		"idempotency_keys": n.keys, "request_ids": n.requestIDs, "batch_ids": n.batchIDs,
		"search_kinds": n.searchKinds, "search_bodies": n.searchBodies, "fork_id": n.forkID, "via": n.via,
		"modes": n.modes, "mtimes": n.mtimes, "kinds": n.kinds,
		"forked_from_ids": n.forkedFromIDs, "forked_from_versions": n.forkedFromVersions}))
}

// insertFile makes one new file at version 1 (insertFiles of one).
func (s *Store) insertFile(ctx context.Context, q querier, put agentfs.Put, id string, b *writtenBlob, o agentfs.Origin) (*agentfs.File, error) {
	n := newFiles{forkID: o.ForkID, via: o.Via}
	n.add(id, put, b, o)
	files, err := s.insertFiles(ctx, q, put.Subject, &n)
	switch {
	case err != nil:
		return nil, err
	case len(files) != 1:
		return nil, fmt.Errorf("insert file: %d rows", len(files))
	}
	return files[0], nil
}

// fileUpdate is a new content for a file: a replace or a revert.
type fileUpdate struct {
	id     string
	put    agentfs.Put // size, content type, attribution and expiry of the write
	blob   *writtenBlob
	event  string // file.replaced or file.reverted
	origin agentfs.Origin
	// onlyVersion, when set, updates the file only while it is live and
	// unblocked at that version (else agentfs.ErrNotFound).
	onlyVersion int
}

// updateFileSQL points a file at a new content: the file row at the next
// version, the version it supersedes, the new version and the event. A
// replace without an expiry keeps the file's.
var updateFileSQL = writeFiles(`SELECT @id::text AS id, @idempotency_key::text AS idempotency_key,
		@request_id::text AS request_id, @batch_id::text AS batch_id, @search_kind::smallint AS search_kind,
		@search_body::text AS search_body, 1 AS n`,
	`UPDATE files SET size_bytes = @size, content_type = @content_type, sha256 = @sha256, blob_key = @blob_key,
			version = version + 1, last_agent_id = nullif(@agent_id, ''), last_run_id = nullif(@run_id, ''),
			updated_at = now(), mode = coalesce(@mode::int, mode), mtime = @mtime::timestamptz,
			kind = coalesce(nullif(@kind::text, ''), kind),
			expires_at = CASE WHEN @expires_in::float8 > 0 THEN now() + make_interval(secs => @expires_in) ELSE expires_at END
		WHERE id = @id AND (@only_version = 0 OR version = @only_version AND `+liveFile+` AND NOT blocked)
		RETURNING *`,
	`@event::text`, true)

// updateFile points a file at a new content in one statement.
func (s *Store) updateFile(ctx context.Context, q querier, u fileUpdate) (*agentfs.File, error) {
	b, put, o := u.blob, u.put, u.origin
	kind, body := b.searchRow()
	if kind == searchPending {
		s.wakeMover()
	}
	return s.scanFile(q.QueryRow(ctx, updateFileSQL, pgx.NamedArgs{"id": u.id, "size": b.size, "search_kind": kind, "search_body": body,
		"content_type": put.ContentType, "sha256": b.sha256, "blob_key": b.key, "agent_id": put.By.AgentID,
		"run_id": put.By.RunID, "expires_in": put.ExpiresIn.Seconds(), "event": u.event, "only_version": u.onlyVersion,
		"idempotency_key": o.Key, "request_id": o.RequestID, "batch_id": o.BatchID, "fork_id": o.ForkID, "via": o.Via,
		"mode": put.Meta.Mode, "mtime": put.Meta.MTime, "kind": put.Meta.Kind}))
}

// insertEventFrom records the event of each file a statement's CTE f just
// wrote: typ and previous are SQL expressions; the attribution and origin
// are the named arguments of originArgs.
func insertEventFrom(typ, previous string) string {
	return `INSERT INTO events (subject, type, file_id, path, previous_path, version, size_bytes, sha256,
			agent_id, run_id, idempotency_key, request_id, batch_id, fork_id, origin)
		SELECT subject, ` + typ + `, id, path, ` + previous + `, version, size_bytes, sha256,
			nullif(@agent_id, ''), nullif(@run_id, ''), nullif(@idempotency_key, ''),
			nullif(@request_id, ''), nullif(@batch_id, ''), nullif(@fork_id::text, ''), nullif(@via::text, '') FROM f`
}

// originArgs are the named arguments of an event's attribution and origin
// (insertEventFrom), with more of a statement's own.
func originArgs(o agentfs.Origin, more pgx.NamedArgs) pgx.NamedArgs {
	args := pgx.NamedArgs{"agent_id": o.By.AgentID, "run_id": o.By.RunID, "idempotency_key": o.Key,
		"request_id": o.RequestID, "batch_id": o.BatchID, "fork_id": o.ForkID, "via": o.Via}
	for k, v := range more {
		args[k] = v
	}
	return args
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
		WHERE subject = @subject AND path = @path AND deleted_at IS NULL `+strings.Join(lock, " "),
		pgx.NamedArgs{"subject": subject, "path": path}))
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
			UPDATE files SET deleted_at = expires_at, purge_after = expires_at + make_interval(secs => @retention)
			WHERE id = @id AND `+expiredFile+` RETURNING *)
		`+insertEventFrom("'"+agentfs.EventExpired+"'", "NULL"),
		originArgs(agentfs.Origin{}, pgx.NamedArgs{"id": f.ID, "retention": s.cfg.DeletedRetention.Seconds()}))
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
	args := pgx.NamedArgs{"id": id, "subject": subject}
	return scanOne("get file", s.scanFile, s.pool.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = @id AND subject = @subject
		AND `+visiblePath(ctx, "path", args), args))
}

// ListFiles returns up to filter.Limit files, newest first, after the
// filter's cursor.
func (s *Store) ListFiles(ctx context.Context, subject string, filter agentfs.FileFilter) ([]*agentfs.File, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visiblePath(ctx, "path", w.args))
	w.when(!filter.IncludeDeleted, liveFile, nil)
	w.when(filter.RunID != "", "run_id = @run_id", pgx.NamedArgs{"run_id": filter.RunID})
	w.when(filter.LastRunID != "", "last_run_id = @last_run_id", pgx.NamedArgs{"last_run_id": filter.LastRunID})
	w.when(filter.WrittenByRun != "", "(run_id = @by_run OR last_run_id = @by_run)", pgx.NamedArgs{"by_run": filter.WrittenByRun})
	w.when(filter.AgentID != "", "agent_id = @agent_id", pgx.NamedArgs{"agent_id": filter.AgentID})
	w.when(filter.Path != "", "path = @path", pgx.NamedArgs{"path": filter.Path})
	w.when(filter.Prefix != "", `path LIKE @prefix ESCAPE '\'`, pgx.NamedArgs{"prefix": likePrefix(filter.Prefix)})
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	out, err := s.scanFiles(s.pool.Query(ctx, `SELECT `+fileColumnsFor(filter.Fields)+` FROM files WHERE `+w.where()+
		` ORDER BY created_at DESC, id DESC LIMIT @limit`, w.args))
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
			UPDATE files SET deleted_at = now(), updated_at = now(), purge_after = now() + make_interval(secs => @retention)
			WHERE id = @id RETURNING *),
		e AS (`+insertEventFrom("'"+agentfs.EventDeleted+"'", "NULL")+`)
		SELECT `+fileColumns+` FROM f`,
		originArgs(o, pgx.NamedArgs{"id": id, "retention": s.cfg.DeletedRetention.Seconds()})))
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
			WHERE id = @id RETURNING *),
		e AS (`+insertEventFrom("'"+agentfs.EventRestored+"'", "NULL")+`)
		SELECT `+fileColumns+` FROM f`,
		originArgs(o, pgx.NamedArgs{"id": id})))
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
// ends. A file outside the reach of ctx is agentfs.ErrNotFound: every
// write that names a file by id finds it here, so a scoped token cannot
// touch what it cannot see.
func (s *Store) LockFile(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.File, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	return s.scanFile(tx.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE id = @id AND subject = @subject
		AND `+visiblePath(ctx, "path", args)+` FOR UPDATE`, args))
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
