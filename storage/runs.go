package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// RunUndoPlan is what undoing the subject's run does, file by file, in tx:
// one undo item per file the run changed, the file whose last change by the
// run is newest first. Only the files in the reach of ctx are planned: a
// scoped token's revert undoes what it can see (the file where it is now,
// and where the undo puts it, both inside its folders), and leaves the
// others alone. No such file, or no event carrying the run id, is
// agentfs.ErrNotFound.
func (s *Store) RunUndoPlan(ctx context.Context, tx querier, subject, runID string, force bool) ([]agentfs.BatchItem, error) {
	rows, err := tx.Query(ctx, `WITH r AS (SELECT * FROM events WHERE subject = $1 AND run_id = $2 AND type LIKE 'file.%'),
		firsts AS (SELECT DISTINCT ON (file_id) file_id, type, path, coalesce(previous_path, '') AS previous_path
			FROM r ORDER BY file_id, pos),
		lasts AS (SELECT DISTINCT ON (file_id) file_id, pos FROM r ORDER BY file_id, pos DESC),
		content AS (SELECT DISTINCT ON (file_id) file_id, version FROM r
			WHERE type IN ('file.replaced', 'file.reverted') ORDER BY file_id, pos)
		SELECT f.file_id, f.type, f.path, f.previous_path, coalesce(c.version, 0), l.pos, coalesce(now.path, '')
		FROM firsts f JOIN lasts l USING (file_id) LEFT JOIN content c USING (file_id)
			LEFT JOIN files now ON now.id = f.file_id
		ORDER BY l.pos DESC`, subject, runID)
	if err != nil {
		return nil, Translate(fmt.Errorf("plan run revert: %w", err))
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentfs.BatchItem, error) {
		var (
			it                         agentfs.BatchItem
			first, path, previous, now string
			version                    int
			u                          = agentfs.Undo{RunID: runID, Force: force}
		)
		if err := r.Scan(&it.FileID, &first, &path, &previous, &version, &u.After, &now); err != nil {
			return it, err
		}
		it.Path = now // until the plan is held to the reach
		u.Existed = first != agentfs.EventCreated
		u.Live = first != agentfs.EventRestored
		u.Path = path
		if first == agentfs.EventMoved {
			u.Path = previous
		}
		if version > 1 {
			u.Version = version - 1 // the run's first content change made version; the one before
		}
		it.Op, it.Undo = agentfs.OpUndo, &u
		return it, nil
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("plan run revert: %w", err))
	}
	items = slices.DeleteFunc(items, func(it agentfs.BatchItem) bool {
		return !covers(ctx, it.Path) || !covers(ctx, it.Undo.Path)
	})
	for i := range items {
		items[i].Path = items[i].Undo.Path
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("plan run revert: no event carries run id %q: %w", runID, agentfs.ErrNotFound)
	}
	for i := range items {
		items[i].Index = i
	}
	return items, nil
}

// UndoTx brings the subject's file back to its state before a run, in tx:
// a file the run created is deleted, one it deleted is restored, one it
// moved goes back, one whose content it changed gets back the version it
// had before. A change by anyone else after the run's last one is a
// *agentfs.ChangedSinceRunError unless u.Force. It records the events of
// what it does, from o.
func (s *Store) UndoTx(ctx context.Context, tx pgx.Tx, subject, fileID string, u agentfs.Undo, o agentfs.Origin) (*agentfs.File, error) {
	f, err := s.LockFile(ctx, tx, subject, fileID)
	if err != nil {
		return nil, fmt.Errorf("undo: %w", err)
	}
	if done, err := s.undone(ctx, tx, subject, f, u); err != nil || done {
		return f, err // already as it was before the run: nothing to undo, nothing changed
	}
	if !u.Force {
		var changed bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE subject = $1 AND file_id = $2
			AND pos > $3 AND run_id IS DISTINCT FROM $4)`,
			subject, fileID, u.After, u.RunID).Scan(&changed)
		if err != nil {
			return nil, Translate(fmt.Errorf("undo: %w", err))
		}
		if changed {
			return nil, &agentfs.ChangedSinceRunError{FileID: fileID, RunID: u.RunID}
		}
	}
	if !u.Existed || !u.Live {
		if f.Live() {
			f, _, err = s.DeleteFileTx(ctx, tx, subject, fileID, "", o)
		}
		return f, err
	}
	if !f.Live() {
		if f, _, err = s.RestoreFileTx(ctx, tx, subject, fileID, o); err != nil {
			return nil, err
		}
	}
	if f.Path != u.Path {
		if f, _, err = s.MoveFileTx(ctx, tx, agentfs.Move{Subject: subject, FileID: fileID, Path: u.Path}, o); err != nil {
			return nil, err
		}
	}
	if u.Version != 0 && u.Version != f.Version {
		f, _, err = s.RevertFileTx(ctx, tx, agentfs.Revert{Subject: subject, FileID: fileID, Version: u.Version, By: o.By}, o)
	}
	return f, err
}

// undone says f is already as it was before the run (an earlier revert of
// the run, or someone else, put it back).
func (s *Store) undone(ctx context.Context, tx pgx.Tx, subject string, f *agentfs.File, u agentfs.Undo) (bool, error) {
	if !u.Existed || !u.Live {
		return !f.Live(), nil
	}
	if !f.Live() || f.Path != u.Path {
		return false, nil
	}
	if u.Version == 0 || u.Version == f.Version {
		return true, nil
	}
	v, err := s.version(ctx, tx, subject, f.ID, u.Version)
	if errors.Is(err, agentfs.ErrNotFound) {
		return false, nil // swept: the revert will say so
	}
	if err != nil {
		return false, err
	}
	return v.SHA256 == f.SHA256 && v.ContentType == f.ContentType, nil
}

func undoParams(u *agentfs.Undo) ([]byte, error) {
	if u == nil {
		return nil, nil
	}
	return json.Marshal(u)
}
