package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// SeedPaths inserts bare live file rows of subject at each path (no blob,
// no version, no event): enough rows for a plan to be the one a large
// subject gets.
func (s *Store) SeedPaths(ctx context.Context, subject string, paths []string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key)
		SELECT 'file_seed' || md5(p), @subject, p, 0, 'text/plain', '', 'seed/' || md5(p) FROM unnest(@paths::text[]) AS p`,
		pgx.NamedArgs{"subject": subject, "paths": paths})
	if err != nil {
		return fmt.Errorf("seed paths: %w", err)
	}
	_, err = s.pool.Exec(ctx, `ANALYZE files`)
	return err
}

// ExplainChildren runs ListChildren's walk under EXPLAIN ANALYZE and
// answers the plan as text.
func (s *Store) ExplainChildren(ctx context.Context, subject string, filter agentfs.ChildFilter) (string, error) {
	args := pgx.NamedArgs{"subject": subject, "prefix": filter.Prefix, "limit": filter.Limit,
		"upper": filter.Prefix + "\U0010FFFF", "from": childBound(filter.After)}
	rows, err := s.pool.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF) `+childrenSQL(ctx, args), args)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
