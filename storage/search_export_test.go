package storage

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetSearchHook makes fn run on each search's connection before its first
// statement.
func (s *Store) SetSearchHook(fn func(ctx context.Context, tx pgx.Tx) error) { s.searchHook = fn }

// SetSearchKeys sets how many blobs a search's index lookup may list
// before it walks the files in scope instead (negative: always walk).
func (s *Store) SetSearchKeys(n int) { s.searchKeys = n }
