package storage

import (
	"context"
	"fmt"
	"strings"

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
// having changed the file after req.To (restoreOrder gives their order).
// More than maxRestoreItems files is a *agentfs.PointError. The changes it
// undoes come in the items' order.
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
	changes, chains := restoreOrder(changes)
	items := make([]agentfs.BatchItem, len(changes))
	for i, ch := range changes {
		items[i] = restoreItem(ch, req.To.Position, force)
		items[i].Undo.Chain = chains[i]
		items[i].Index = i
	}
	return items, changes, nil
}

// restoreOrder orders a restore's changes so that every path a file comes
// back to is free when its item runs. Files that go (added since) come
// first. A file that comes back to a path another file of the restore
// holds now comes after that file's item, which moves it elsewhere (a
// chain: a → b, b → c is undone as b ← c, then a ← b). Files that traded
// paths in a ring (a and b swapped; a → b → c → a) cannot go one after
// another: the ring's first file in path order carries the ring in its
// item (chains, by the changes' new indexes), which moves it aside, each
// of the others to its path, and it back, in one transaction; the others'
// items follow it and find their files in place (or give them their old
// bytes). Otherwise the diff's path order is kept.
func restoreOrder(changes []agentfs.Change) ([]agentfs.Change, map[int][]agentfs.UndoMove) {
	out := make([]agentfs.Change, 0, len(changes))
	var back []int
	holder := map[string]int{} // a path held now by a file that comes back elsewhere: its change
	for i, ch := range changes {
		if ch.From == nil {
			out = append(out, ch)
			continue
		}
		back = append(back, i)
		if ch.To != nil {
			holder[ch.To.Path] = i
		}
	}
	// dep is the change whose file holds now the path ch's file comes back
	// to (-1: the path is free once the files that go are gone).
	dep := func(i int) int {
		if h, ok := holder[changes[i].From.Path]; ok && h != i {
			return h
		}
		return -1
	}
	chains := map[int][]agentfs.UndoMove{}
	done := make([]bool, len(changes))
	for _, x := range back {
		if done[x] {
			continue
		}
		walk, at := []int{x}, map[int]int{x: 0}
		y := dep(x)
		for y >= 0 && !done[y] {
			if _, seen := at[y]; seen {
				break
			}
			at[y] = len(walk)
			walk = append(walk, y)
			y = dep(y)
		}
		tail := walk
		if k, ring := at[y]; y >= 0 && !done[y] && ring {
			// walk[k:] is a ring: walk[k] moves aside; walk[last] takes
			// the path it frees, walk[last-1] the one walk[last] frees, …
			lead := walk[k]
			out = append(out, changes[lead])
			var chain []agentfs.UndoMove
			members := walk[k+1:]
			for j := len(members) - 1; j >= 0; j-- {
				chain = append(chain, agentfs.UndoMove{FileID: changes[members[j]].FileID, Path: changes[members[j]].From.Path})
			}
			chains[len(out)-1] = chain
			for j := len(members) - 1; j >= 0; j-- {
				out = append(out, changes[members[j]])
			}
			tail = walk[:k]
		}
		for j := len(tail) - 1; j >= 0; j-- {
			out = append(out, changes[tail[j]])
		}
		for _, i := range walk {
			done[i] = true
		}
	}
	return out, chains
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
	if err := s.unchangedSincePlan(ctx, tx, subject, fileID, u, o); err != nil {
		return nil, err
	}
	if len(u.Chain) > 0 {
		if f, err = s.turnRing(ctx, tx, subject, f, u, o); err != nil {
			return nil, err
		}
	}
	u.Force = true // checked above, against any change
	return s.UndoTx(ctx, tx, subject, fileID, u, o)
}

// unchangedSincePlan is agentfs.ErrPreconditionFailed when the file
// changed after u.After (unless u.Force), by anything but the restore's
// own batch (o.BatchID: the first item of a ring moves the ring's files).
func (s *Store) unchangedSincePlan(ctx context.Context, tx pgx.Tx, subject, fileID string, u agentfs.Undo, o agentfs.Origin) error {
	if u.Force {
		return nil
	}
	var changed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE subject = $1 AND file_id = $2 AND pos > $3
		AND ($4 = '' OR batch_id IS DISTINCT FROM $4))`,
		subject, fileID, u.After, o.BatchID).Scan(&changed); err != nil {
		return Translate(fmt.Errorf("restore to a point: %w", err))
	}
	if changed {
		return fmt.Errorf("restore to a point: file %s changed after the restore was planned: %w",
			fileID, agentfs.ErrPreconditionFailed)
	}
	return nil
}

// turnRing moves, in tx, the files of a ring that traded paths back to
// theirs (u.Chain, restoreOrder): f steps aside to a path of its own, each
// file of the chain takes the path the one before it freed, and f is left
// for UndoTx to bring to u.Path, now free. Every file of the ring is held
// to u.After as f is. It answers f where it stepped.
func (s *Store) turnRing(ctx context.Context, tx pgx.Tx, subject string, f *agentfs.File, u agentfs.Undo, o agentfs.Origin) (*agentfs.File, error) {
	for _, m := range u.Chain {
		if _, err := s.LockFile(ctx, tx, subject, m.FileID); err != nil {
			return nil, fmt.Errorf("restore to a point: %w", err)
		}
		if err := s.unchangedSincePlan(ctx, tx, subject, m.FileID, u, o); err != nil {
			return nil, err
		}
	}
	aside := u.Path + ".restoring-" + f.ID
	if len(aside) > agentfs.MaxPathBytes {
		aside = u.Path[:strings.LastIndexByte(u.Path, '/')+1] + ".restoring-" + f.ID
	}
	f, _, err := s.MoveFileTx(ctx, tx, agentfs.Move{Subject: subject, FileID: f.ID, Path: aside}, o)
	if err != nil {
		return nil, fmt.Errorf("restore to a point: step aside: %w", err)
	}
	for _, m := range u.Chain {
		if _, _, err := s.MoveFileTx(ctx, tx, agentfs.Move{Subject: subject, FileID: m.FileID, Path: m.Path}, o); err != nil {
			return nil, fmt.Errorf("restore to a point: move %s back to %q: %w", m.FileID, m.Path, err)
		}
	}
	return f, nil
}
