package storage

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// Diff lists the subject's files that differ between req.From and req.To
// under req.Prefix, by path. Its cost follows the events between the
// points: the candidates are the files whose intervals start or end
// between them (or whose expiry falls between their times), each compared
// at both points; a file with the same path and bytes at both is not
// listed, a move is, even with the same bytes.
func (s *Store) Diff(ctx context.Context, subject string, req agentfs.DiffRequest) ([]agentfs.Change, error) {
	lo, hi := req.From, req.To
	if lo.Position > hi.Position {
		lo, hi = hi, lo
	}
	loAt, hiAt := lo.At, hi.At
	if loAt.After(hiAt) {
		loAt, hiAt = hiAt, loAt
	}
	w := newFilter("(a.file_id IS NOT NULL OR b.file_id IS NOT NULL)", pgx.NamedArgs{"subject": subject,
		"lo": lo.Position, "hi": hi.Position, "lo_at": loAt, "hi_at": hiAt,
		"fpos": req.From.Position, "fat": req.From.At, "tpos": req.To.Position, "tat": req.To.At, "limit": req.Limit})
	w.when(true, `NOT (a.path IS NOT DISTINCT FROM b.path AND a.sha256 IS NOT DISTINCT FROM b.sha256
		AND a.content_type IS NOT DISTINCT FROM b.content_type)`, nil)
	w.when(req.Prefix != "", `(starts_with(a.path, @prefix) IS TRUE OR starts_with(b.path, @prefix) IS TRUE)`,
		pgx.NamedArgs{"prefix": req.Prefix})
	// A grant's reach: a change is the caller's only when both of its
	// sides lie inside (a move across the boundary would name a path
	// outside), as a run revert by a scoped token plans only such files.
	w.cond("(a.path IS NULL OR " + visiblePath(ctx, "a.path", w.args) + ") AND (b.path IS NULL OR " + visiblePath(ctx, "b.path", w.args) + ")")
	w.when(req.AfterPath != "", "(coalesce(b.path, a.path), c.file_id) > (@after_path, @after_id)",
		pgx.NamedArgs{"after_path": req.AfterPath, "after_id": req.AfterID})
	rows, err := s.pool.Query(ctx, `WITH c AS (
			SELECT DISTINCT file_id FROM file_states
			WHERE subject = @subject AND ((from_pos > @lo AND from_pos <= @hi) OR (to_pos > @lo AND to_pos <= @hi)
				OR (expires_at > @lo_at AND expires_at <= @hi_at)))
		SELECT c.file_id, a.path, a.version, a.sha256, a.size_bytes, a.content_type, a.blob_key,
			b.path, b.version, b.sha256, b.size_bytes, b.content_type, b.blob_key, coalesce(f.blocked, false)
		FROM c
		LEFT JOIN files f ON f.subject = @subject AND f.id = c.file_id
		LEFT JOIN LATERAL (SELECT * FROM file_states s WHERE s.file_id = c.file_id AND `+at("fpos", "fat")+`) a ON true
		LEFT JOIN LATERAL (SELECT * FROM file_states s WHERE s.file_id = c.file_id AND `+at("tpos", "tat")+`) b ON true
		WHERE `+w.where()+`
		ORDER BY coalesce(b.path, a.path), c.file_id LIMIT @limit`, w.args)
	return collect(rows, err, "diff", scanChange)
}

// at is liveAt with the point's arguments named pos and t.
func at(pos, t string) string {
	return `s.from_pos <= @` + pos + ` AND (s.to_pos IS NULL OR s.to_pos > @` + pos + `)
		AND (s.expires_at IS NULL OR s.expires_at > @` + t + `)`
}

func scanChange(r pgx.CollectableRow) (agentfs.Change, error) {
	var (
		ch   agentfs.Change
		a, b nullableState
	)
	if err := r.Scan(&ch.FileID, &a.path, &a.version, &a.sha256, &a.size, &a.contentType, &a.blobKey,
		&b.path, &b.version, &b.sha256, &b.size, &b.contentType, &b.blobKey, &ch.Blocked); err != nil {
		return ch, err
	}
	ch.From, ch.To = a.state(), b.state()
	switch {
	case ch.From == nil:
		ch.Kind, ch.Path = agentfs.ChangeAdded, ch.To.Path
	case ch.To == nil:
		ch.Kind, ch.Path = agentfs.ChangeDeleted, ch.From.Path
	case ch.From.Path != ch.To.Path:
		ch.Kind, ch.Path, ch.PreviousPath = agentfs.ChangeMoved, ch.To.Path, ch.From.Path
	default:
		ch.Kind, ch.Path = agentfs.ChangeModified, ch.To.Path
	}
	return ch, nil
}

// nullableState is one side of a diff's row (all NULL when the file was
// not live at that point).
type nullableState struct {
	path, sha256, contentType, blobKey *string
	version                            *int
	size                               *int64
}

func (n nullableState) state() *agentfs.FileState {
	if n.path == nil {
		return nil
	}
	return &agentfs.FileState{Path: *n.path, Version: *n.version, SHA256: *n.sha256, SizeBytes: *n.size,
		ContentType: *n.contentType, BlobKey: *n.blobKey}
}
