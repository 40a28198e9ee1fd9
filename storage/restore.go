package storage

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// maxRestoreItems bounds the files one restore puts back (a batch's items).
const maxRestoreItems = 10000

// restorePage is how many changes a restore plan reads at a time.
const restorePage = 1000

// RestorePlan is what putting the subject's files under req.Prefix back to
// their state at req.From does, planned from Diff(req.From, req.To): one
// OpRestoreTo item per file that differs, each conditional on nothing
// having changed the file after req.To. Items that leave their file
// deleted come first, so a file that took another's path since is out of
// the way before that one comes back. More than maxRestoreItems files is
// a *agentfs.PointError. The changes it undoes come in the items' order.
func (s *Store) RestorePlan(ctx context.Context, subject string, req agentfs.DiffRequest, force bool) ([]agentfs.BatchItem, []agentfs.Change, error) {
	req.Limit = restorePage + 1
	var changes []agentfs.Change
	for {
		page, err := s.Diff(ctx, subject, req)
		if err != nil {
			return nil, nil, fmt.Errorf("plan restore: %w", err)
		}
		more := len(page) > restorePage
		if more {
			page = page[:restorePage]
		}
		changes = append(changes, page...)
		if len(changes) > maxRestoreItems {
			return nil, nil, &agentfs.PointError{Field: "prefix",
				Reason: fmt.Sprintf("a restore puts back at most %d files: narrow the prefix", maxRestoreItems)}
		}
		if !more {
			break
		}
		last := page[len(page)-1]
		req.AfterPath, req.AfterID = last.Path, last.FileID
	}
	slices.SortStableFunc(changes, func(a, b agentfs.Change) int {
		return boolOrder(a.From != nil) - boolOrder(b.From != nil)
	})
	items := make([]agentfs.BatchItem, len(changes))
	for i, ch := range changes {
		items[i] = restoreItem(ch, req.To.Position, force)
		items[i].Index = i
	}
	return items, changes, nil
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// restoreItem is the item that brings ch's file back to its From state.
func restoreItem(ch agentfs.Change, planned int64, force bool) agentfs.BatchItem {
	u := agentfs.Undo{After: planned, Force: force, Path: ch.Path}
	if ch.From != nil {
		u.Existed, u.Live, u.Path, u.Version = true, true, ch.From.Path, ch.From.Version
	}
	return agentfs.BatchItem{Op: agentfs.OpRestoreTo, Path: u.Path, FileID: ch.FileID, Undo: &u}
}

// RestoreToTx brings the subject's file back to the state u describes, in
// tx: deleted when it was not live then; else restored, moved back and
// given that version's bytes as a new version (the blob shared). A file
// already in that state is left as it is; one changed after u.After is
// agentfs.ErrPreconditionFailed unless u.Force. It records the events of
// what it does, from o.
func (s *Store) RestoreToTx(ctx context.Context, tx pgx.Tx, subject, fileID string, u agentfs.Undo, o agentfs.Origin) (*agentfs.File, error) {
	f, err := s.LockFile(ctx, tx, subject, fileID)
	if err != nil {
		return nil, fmt.Errorf("restore to a point: %w", err)
	}
	if done, err := s.undone(ctx, tx, subject, f, u); err != nil || done {
		return f, err
	}
	if !u.Force {
		var changed bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE subject = $1 AND file_id = $2 AND pos > $3)`,
			subject, fileID, u.After).Scan(&changed); err != nil {
			return nil, Translate(fmt.Errorf("restore to a point: %w", err))
		}
		if changed {
			return nil, fmt.Errorf("restore to a point: file %s changed after the restore was planned: %w",
				fileID, agentfs.ErrPreconditionFailed)
		}
	}
	u.Force = true // checked above, against any change
	return s.UndoTx(ctx, tx, subject, fileID, u, o)
}
