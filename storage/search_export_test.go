package storage

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetSearchHook makes fn run on each search's connection before its first
// statement.
func (s *Store) SetSearchHook(fn func(ctx context.Context, tx pgx.Tx) error) { s.searchHook = fn }
