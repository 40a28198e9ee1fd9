package storage

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// forkColumns are a fork row as scanFork reads it.
const forkColumns = `id, subject, from_prefix, to_prefix, base_pos, files, coalesce(agent_id, ''), coalesce(run_id, ''),
	created_at, merged_at, coalesce((SELECT committed_at FROM events e WHERE e.subject = forks.subject AND e.pos = forks.base_pos), created_at)`

func scanFork(row pgx.Row) (*agentfs.Fork, error) {
	var f agentfs.Fork
	err := row.Scan(&f.ID, &f.Subject, &f.From, &f.To, &f.Base, &f.Files, &f.By.AgentID, &f.By.RunID,
		&f.CreatedAt, &f.MergedAt, &f.BaseAt)
	if err != nil {
		return nil, Translate(err)
	}
	return &f, nil
}

// visibleFork is the SQL test that both prefixes of a fork lie in the
// reach of ctx: a scoped token sees only the forks it could have made.
func visibleFork(ctx context.Context, args pgx.NamedArgs) string {
	return visiblePath(ctx, "from_prefix", args) + " AND " + visiblePath(ctx, "to_prefix", args)
}

// forkSource is a file a fork copies: its state at the point.
type forkSource struct {
	fileID, path, contentType, sha256, blobKey string
	version                                    int
	size                                       int64
	meta                                       agentfs.FileMeta // the file's mode, mtime and kind (kept per file, not per version)
}

// CreateForkTx copies, in tx, every file of the subject live under
// req.From at the point p to the same relative path under req.To: new
// files at version 1 sharing the versions' blobs (no S3 request), each
// with its file.created event carrying the fork. The point is one
// consistent state whatever commits meanwhile: file_states at a committed
// position never change. A live file under req.To is a
// *agentfs.PathExistsError; one that takes a path meanwhile makes the
// insert lose the race (RaceLost), for the core to decide again.
func (s *Store) CreateForkTx(ctx context.Context, tx pgx.Tx, req agentfs.NewFork, p agentfs.Point, o agentfs.Origin) (*agentfs.Fork, error) {
	if err := s.clearFolder(ctx, tx, req.Subject, req.To); err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	src, err := s.forkSources(ctx, tx, req.Subject, req.From, p)
	if err != nil {
		return nil, err
	}
	id := NewID("fork")
	o.ForkID, o.Via = id, agentfs.ViaFork
	n := newFiles{forkID: id, via: agentfs.ViaFork}
	for _, f := range src {
		path := req.To + f.path[len(req.From):]
		if len(path) > agentfs.MaxPathBytes {
			return nil, &agentfs.PointError{Field: "to", Reason: fmt.Sprintf("%q would be longer than 1024 bytes", path)}
		}
		put := agentfs.Put{Subject: req.Subject, Path: path, ContentType: f.contentType, By: req.By, Meta: f.meta}
		n.add(NewID("file"), put, &writtenBlob{key: f.blobKey, size: f.size, sha256: f.sha256}, o)
		n.forkedFromIDs, n.forkedFromVersions = append(n.forkedFromIDs, f.fileID), append(n.forkedFromVersions, int32(f.version))
	}
	fork, err := scanFork(tx.QueryRow(ctx, `WITH fk AS (
			INSERT INTO forks (id, subject, from_prefix, to_prefix, base_pos, files, agent_id, run_id)
			VALUES (@id, @subject, @from, @to, @pos, @files, nullif(@by_agent, ''), nullif(@by_run, '')) RETURNING *),
		b AS (INSERT INTO fork_bases (fork_id, rel_path, file_id, version, sha256)
			SELECT @id, substr(path, length(@to) + 1), src_id, src_version, sha256
			FROM unnest(@paths::text[], @src_ids::text[], @src_versions::int[], @sha256s::text[]) AS i(path, src_id, src_version, sha256))
		SELECT `+forkColumns+` FROM fk AS forks`,
		pgx.NamedArgs{"id": id, "subject": req.Subject, "from": req.From, "to": req.To, "pos": p.Position,
			"files": len(src), "by_agent": req.By.AgentID, "by_run": req.By.RunID,
			"paths": n.paths, "src_ids": n.forkedFromIDs, "src_versions": n.forkedFromVersions, "sha256s": n.sha256s}))
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	if len(src) == 0 {
		return fork, nil
	}
	if _, err := s.insertFiles(ctx, tx, req.Subject, &n); err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	return fork, nil
}

// clearFolder makes sure no live file lies under prefix in tx: one is a
// *agentfs.PathExistsError; files past their expiry are recorded expired.
// It seeks to the prefix through files_live_children (byte order), so an
// empty destination costs one index probe whatever the subject holds.
func (s *Store) clearFolder(ctx context.Context, tx pgx.Tx, subject, prefix string) error {
	held, err := s.scanFiles(tx.Query(ctx, `SELECT `+fileColumns+` FROM files
		WHERE subject = $1 AND path COLLATE "C" >= $2 AND starts_with(path, $2) AND deleted_at IS NULL
		ORDER BY path COLLATE "C" LIMIT 100 FOR UPDATE`, subject, prefix))
	if err != nil {
		return fmt.Errorf("find files under %q: %w", prefix, err)
	}
	for _, f := range held {
		if f.Live() {
			return &agentfs.PathExistsError{Path: f.Path, ExistingFileID: f.ID}
		}
		if err := s.recordExpiry(ctx, tx, f); err != nil {
			return err
		}
	}
	if len(held) == 100 {
		return s.clearFolder(ctx, tx, subject, prefix)
	}
	return nil
}

// forkSources are the files live under prefix at p, their versions locked
// against a sweep until tx ends (a version swept already is left out).
func (s *Store) forkSources(ctx context.Context, tx pgx.Tx, subject, prefix string, p agentfs.Point) ([]forkSource, error) {
	args := pgx.NamedArgs{"subject": subject, "prefix": prefix, "pos": p.Position, "at": p.At, "max": s.cfg.ForkMaxFiles + 1}
	rows, err := tx.Query(ctx, `SELECT s.file_id, s.path, s.content_type, s.sha256, s.blob_key, s.version, s.size_bytes, f.mode, f.mtime, f.kind
		FROM file_states s JOIN file_versions v ON v.file_id = s.file_id AND v.version = s.version
			JOIN files f ON f.id = s.file_id
		WHERE s.subject = @subject AND starts_with(s.path, @prefix) AND `+liveAt+` AND `+visiblePath(ctx, "s.path", args)+`
		ORDER BY s.path LIMIT @max FOR KEY SHARE OF v`, args)
	if err != nil {
		return nil, Translate(fmt.Errorf("fork: %w", err))
	}
	src, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (forkSource, error) {
		var f forkSource
		var mode int
		err := r.Scan(&f.fileID, &f.path, &f.contentType, &f.sha256, &f.blobKey, &f.version, &f.size, &mode, &f.meta.MTime, &f.meta.Kind)
		f.meta.Mode = &mode
		return f, err
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("fork: %w", err))
	}
	if len(src) > s.cfg.ForkMaxFiles {
		return nil, &agentfs.PointError{Field: "from", Reason: fmt.Sprintf(
			"a fork copies at most %d files (AGENTFS_FORK_MAX_FILES): narrow the prefix", s.cfg.ForkMaxFiles)}
	}
	return src, nil
}

// Fork is the subject's fork by id, within the reach of ctx.
func (s *Store) Fork(ctx context.Context, subject, id string) (*agentfs.Fork, error) {
	return s.fork(ctx, s.pool, subject, id, "")
}

func (s *Store) fork(ctx context.Context, q querier, subject, id, lock string) (*agentfs.Fork, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"subject": subject, "id": id}
	return scanOne("fork", scanFork, q.QueryRow(ctx, `SELECT `+forkColumns+` FROM forks WHERE subject = @subject AND id = @id AND `+
		visibleFork(ctx, args)+` `+lock, args))
}

// ListForks lists the subject's forks within the reach of ctx, newest
// first.
func (s *Store) ListForks(ctx context.Context, subject string, filter agentfs.ForkFilter) ([]*agentfs.Fork, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visibleFork(ctx, w.args))
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := s.pool.Query(ctx, `SELECT `+forkColumns+` FROM forks WHERE `+w.where()+
		` ORDER BY created_at DESC, id DESC LIMIT @limit`, w.args)
	return collect(rows, err, "list forks", rowOf(scanFork))
}

// DeleteForkTx forgets the subject's fork in tx (its files stay); an
// unknown one is agentfs.ErrNotFound.
func (s *Store) DeleteForkTx(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.Fork, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"subject": subject, "id": id}
	return scanOne("delete fork", scanFork, tx.QueryRow(ctx, `DELETE FROM forks WHERE subject = @subject AND id = @id AND `+
		visibleFork(ctx, args)+` RETURNING `+forkColumns, args))
}
