package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// metaChanges reports whether m sets anything f does not already have.
func metaChanges(f *agentfs.File, m agentfs.FileMeta) bool {
	return m.Mode != nil && *m.Mode != f.Mode ||
		m.MTime != nil && !m.MTime.Truncate(time.Microsecond).Equal(f.MTime.Truncate(time.Microsecond)) ||
		m.Kind != "" && m.Kind != f.Kind
}

// keepMeta sets the members of m on the live file f in tx when they change
// it, without a new version: a write of identical bytes with another mode
// or mtime (a mount's flush after chmod or touch) keeps them.
func (s *Store) keepMeta(ctx context.Context, tx pgx.Tx, f *agentfs.File, m agentfs.FileMeta) (*agentfs.File, error) {
	if !metaChanges(f, m) {
		return f, nil
	}
	out, err := s.scanFile(tx.QueryRow(ctx, `UPDATE files SET mode = coalesce(@mode::int, mode),
			mtime = coalesce(@mtime::timestamptz, mtime), kind = coalesce(nullif(@kind::text, ''), kind)
		WHERE id = @id RETURNING `+fileColumns,
		pgx.NamedArgs{"id": f.ID, "mode": m.Mode, "mtime": m.MTime, "kind": m.Kind}))
	if err != nil {
		return nil, fmt.Errorf("keep file metadata: %w", err)
	}
	return out, nil
}
