package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// childSeek is the condition of a row a listing by delimiter may land on:
// a live file of the subject under @prefix::text at or after bound, in byte order
// of the path (the order of files_live_children, migration 020), within
// reach (visiblePath's test).
func childSeek(col, bound, reach string) string {
	p := col + `path COLLATE "C"`
	return col + `subject = @subject AND ` + col + `deleted_at IS NULL AND NOT coalesce(` + col + `expires_at <= now(), false)
		AND ` + p + ` >= ` + bound + ` COLLATE "C" AND ` + p + ` < @upper::text COLLATE "C"
		AND starts_with(` + col + `path, @prefix::text) AND ` + reach + ` ORDER BY ` + p + ` LIMIT 1`
}

// childrenSQL walks the entries directly under @prefix::text, one index seek per
// entry: from a file it seeks past its path, from a file deeper down past
// the whole folder holding it (its prefix and "0", the byte after "/"), so
// a directory listing never walks the subtree beneath it. Each row is a
// path and whether it lies in a folder below the prefix.
func childrenSQL(ctx context.Context, args pgx.NamedArgs) string {
	const rest = `substr(w.path, length(@prefix::text) + 1)`
	next := `CASE WHEN strpos(` + rest + `, '/') > 0 THEN @prefix::text || split_part(` + rest + `, '/', 1) || '0'
		ELSE w.path || chr(1) END`
	return `WITH RECURSIVE walk(path, n) AS (
			SELECT (SELECT path FROM files WHERE ` + childSeek("", "@from::text", visiblePath(ctx, "path", args)) + `), 1
		UNION ALL
			SELECT (SELECT f.path FROM files f WHERE ` + childSeek("f.", next, visiblePath(ctx, "f.path", args)) + `), w.n + 1
			FROM walk w WHERE w.path IS NOT NULL AND w.n < @limit::int)
		SELECT path, strpos(substr(path, length(@prefix::text) + 1), '/') > 0 FROM walk WHERE path IS NOT NULL ORDER BY n`
}

// entry is a row of childrenSQL.
type entry struct {
	path   string
	folder bool
}

// ListChildren answers up to filter.Limit entries directly under
// filter.Prefix after filter.After, in byte order of their names: the live
// files there and the folders holding deeper ones, within the caller's
// reach (a folder shows when a file in it does).
func (s *Store) ListChildren(ctx context.Context, subject string, filter agentfs.ChildFilter) ([]agentfs.Child, error) {
	if filter.PathsOnly {
		return s.childPaths(ctx, subject, filter)
	}
	entries, err := s.walkChildren(ctx, subject, filter.Prefix, childBound(filter.After), filter.Limit)
	if err != nil {
		return nil, err
	}
	return s.fillChildren(ctx, subject, filter.Prefix, entries)
}

// walkChildren runs childrenSQL: up to limit entries under prefix from
// the bound from.
func (s *Store) walkChildren(ctx context.Context, subject, prefix, from string, limit int) ([]entry, error) {
	args := pgx.NamedArgs{"subject": subject, "prefix": prefix, "limit": limit,
		"upper": prefix + "\U0010FFFF", "from": from}
	rows, err := s.pool.Query(ctx, childrenSQL(ctx, args), args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list children: %w", err))
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		return e, r.Scan(&e.path, &e.folder)
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("list children: %w", err))
	}
	return entries, nil
}

// childPaths is a listing of paths only. A folder of files reads fastest
// as one range of the index in path order (one row per file, where the
// walk pays a step of its recursion per entry), so it reads up to
// filter.Limit paths that way and folds those in deeper folders into
// their folder; only when the range ran out inside folders before it made
// filter.Limit entries does the walk go on from there, seeking past each
// folder.
func (s *Store) childPaths(ctx context.Context, subject string, filter agentfs.ChildFilter) ([]agentfs.Child, error) {
	args := pgx.NamedArgs{"subject": subject, "prefix": filter.Prefix, "scan": filter.Limit,
		"upper": filter.Prefix + "\U0010FFFF", "from": childBound(filter.After)}
	seek := childSeek("", "@from::text", visiblePath(ctx, "path", args))
	rows, err := s.pool.Query(ctx, `SELECT path FROM files WHERE `+strings.TrimSuffix(seek, "LIMIT 1")+`LIMIT @scan::int`, args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list children: %w", err))
	}
	paths, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, Translate(fmt.Errorf("list children: %w", err))
	}
	var entries []entry
	last := ""
	for _, p := range paths {
		folder := strings.IndexByte(p[len(filter.Prefix):], '/') >= 0
		if folder && last != "" && strings.HasPrefix(p, last) {
			continue // in the folder just found
		}
		entries = append(entries, entry{path: p, folder: folder})
		last = ""
		if folder {
			last = folderOf(filter.Prefix, p)
		}
	}
	if len(paths) == filter.Limit && len(entries) < filter.Limit {
		// The range ended inside folders: walk on past the last entry.
		after := entries[len(entries)-1].path
		if entries[len(entries)-1].folder {
			after = folderOf(filter.Prefix, after)
		}
		more, err := s.walkChildren(ctx, subject, filter.Prefix, childBound(after), filter.Limit-len(entries))
		if err != nil {
			return nil, err
		}
		entries = append(entries, more...)
	}
	return pathsOnly(filter.Prefix, entries), nil
}

// pathsOnly makes the listing's entries from the walk alone: a folder's
// prefix, or a file holding only its path (the walk found it live).
func pathsOnly(prefix string, entries []entry) []agentfs.Child {
	out := make([]agentfs.Child, 0, len(entries))
	for _, e := range entries {
		if e.folder {
			out = append(out, agentfs.Child{Prefix: folderOf(prefix, e.path)})
		} else {
			out = append(out, agentfs.Child{File: &agentfs.File{Path: e.path}})
		}
	}
	return out
}

// folderOf is the folder directly under prefix that holds path.
func folderOf(prefix, path string) string {
	rest := path[len(prefix):]
	return prefix + rest[:strings.IndexByte(rest, '/')+1]
}

// childBound is where a page after the entry named after starts: past the
// file's path, or past everything in the folder.
func childBound(after string) string {
	switch {
	case after == "":
		return ""
	case strings.HasSuffix(after, "/"):
		return strings.TrimSuffix(after, "/") + "0"
	}
	return after + "\x01"
}

// fillChildren makes the listing's entries: a folder's prefix, or the
// live file at a path (one deleted meanwhile drops out).
func (s *Store) fillChildren(ctx context.Context, subject, prefix string, entries []entry) ([]agentfs.Child, error) {
	var paths []string
	for _, e := range entries {
		if !e.folder {
			paths = append(paths, e.path)
		}
	}
	byPath := map[string]*agentfs.File{}
	if len(paths) > 0 {
		files, err := s.scanFiles(s.pool.Query(ctx, `SELECT `+fileColumns+` FROM files
			WHERE subject = @subject AND deleted_at IS NULL AND path = ANY(@paths)`, pgx.NamedArgs{"subject": subject, "paths": paths}))
		if err != nil {
			return nil, fmt.Errorf("list children: %w", err)
		}
		for _, f := range files {
			byPath[f.Path] = f
		}
	}
	out := make([]agentfs.Child, 0, len(entries))
	for _, e := range entries {
		if e.folder {
			out = append(out, agentfs.Child{Prefix: folderOf(prefix, e.path)})
		} else if f := byPath[e.path]; f != nil && f.Live() {
			out = append(out, agentfs.Child{File: f})
		}
	}
	return out, nil
}
