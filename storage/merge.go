package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// mergeSides are the three sides of a merge by relative path: the base
// both sides last agreed on, the fork now and the target now.
type mergeSides struct {
	base         map[string]*agentfs.FileSide
	fork, target map[string]*agentfs.File
}

// mergeStep is one relative path a merge settles: apply (the fork's side
// written to the target), and the base it leaves.
type mergeStep struct {
	rel      string
	apply    bool
	fork     *agentfs.File // nil: the fork holds no file there
	target   *agentfs.File
	conflict *agentfs.MergeConflict
}

func sideOf(f *agentfs.File) *agentfs.FileSide {
	if f == nil {
		return nil
	}
	return &agentfs.FileSide{FileID: f.ID, Version: f.Version, SHA256: f.SHA256, SizeBytes: f.SizeBytes,
		ContentType: f.ContentType, BlobKey: f.BlobKey}
}

func shaOf(s *agentfs.FileSide) string {
	if s == nil {
		return ""
	}
	return s.SHA256
}

// readSides reads the merge's three sides in q; lock "FOR UPDATE" holds
// the target's files until the transaction ends, so none of them changes
// under the merge.
func (s *Store) readSides(ctx context.Context, q querier, fork *agentfs.Fork, lock string) (*mergeSides, error) {
	sides := &mergeSides{base: map[string]*agentfs.FileSide{}}
	rows, err := q.Query(ctx, `SELECT rel_path, file_id, version, sha256 FROM fork_bases WHERE fork_id = $1`, fork.ID)
	if err != nil {
		return nil, Translate(fmt.Errorf("merge: %w", err))
	}
	var rel string
	var b agentfs.FileSide
	_, err = pgx.ForEachRow(rows, []any{&rel, &b.FileID, &b.Version, &b.SHA256}, func() error {
		side := b
		sides.base[rel] = &side
		return nil
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("merge: %w", err))
	}
	if sides.fork, err = s.filesUnder(ctx, q, fork.Subject, fork.To, ""); err != nil {
		return nil, err
	}
	if sides.target, err = s.filesUnder(ctx, q, fork.Subject, fork.From, lock); err != nil {
		return nil, err
	}
	return sides, nil
}

// filesUnder are the subject's files holding a path under prefix (those
// past their expiry included), by relative path.
func (s *Store) filesUnder(ctx context.Context, q querier, subject, prefix, lock string) (map[string]*agentfs.File, error) {
	files, err := s.scanFiles(q.Query(ctx, `SELECT `+fileColumns+` FROM files
		WHERE subject = $1 AND starts_with(path, $2) AND deleted_at IS NULL ORDER BY path `+lock, subject, prefix))
	if err != nil {
		return nil, fmt.Errorf("merge: files under %q: %w", prefix, err)
	}
	out := make(map[string]*agentfs.File, len(files))
	for _, f := range files {
		out[f.Path[len(prefix):]] = f
	}
	return out, nil
}

// live is f when it is live, else nil (past its expiry counts as gone).
func live(f *agentfs.File) *agentfs.File {
	if f == nil || !f.Live() {
		return nil
	}
	return f
}

// plan decides every relative path three-way: changed only in the fork →
// apply; changed only in the target → kept; changed on both sides to
// different bytes → a conflict, resolved by onConflict (fork applies,
// target keeps; fail leaves it unresolved); to the same bytes → nothing.
func (m *mergeSides) plan(fork *agentfs.Fork, onConflict string) []mergeStep {
	rels := map[string]bool{}
	for r := range m.base {
		rels[r] = true
	}
	for r := range m.fork {
		rels[r] = true
	}
	for r := range m.target {
		rels[r] = true
	}
	var steps []mergeStep
	for _, rel := range slices.Sorted(maps.Keys(rels)) {
		base, f, t := m.base[rel], live(m.fork[rel]), live(m.target[rel])
		fs, ts := sideOf(f), sideOf(t)
		if shaOf(fs) == shaOf(base) {
			continue // unchanged in the fork: the target's side stands
		}
		st := mergeStep{rel: rel, fork: f, target: m.target[rel]}
		switch {
		case shaOf(ts) == shaOf(base):
			st.apply = true
		case shaOf(ts) == shaOf(fs):
			// both sides made the same change: only the base moves
		default:
			c := &agentfs.MergeConflict{Path: fork.From + rel, Base: base, Fork: fs, Target: ts}
			if onConflict == agentfs.OnConflictFork || onConflict == agentfs.OnConflictTarget {
				c.Won = onConflict
			}
			st.conflict, st.apply = c, c.Won == agentfs.OnConflictFork
		}
		steps = append(steps, st)
	}
	return steps
}

// conflictsOf are the conflicts of steps.
func conflictsOf(steps []mergeStep) []agentfs.MergeConflict {
	out := []agentfs.MergeConflict{}
	for _, st := range steps {
		if st.conflict != nil {
			out = append(out, *st.conflict)
		}
	}
	return out
}

// plannedChange is the change applying st makes to the target, as a diff
// lists it.
func plannedChange(fork *agentfs.Fork, st mergeStep) agentfs.Change {
	ch := agentfs.Change{Path: fork.From + st.rel}
	if t := live(st.target); t != nil {
		ch.FileID, ch.From = t.ID, stateOf(t)
	}
	if st.fork != nil {
		ch.To = stateOf(st.fork)
	}
	switch {
	case ch.From == nil:
		ch.Kind = "added"
	case ch.To == nil:
		ch.Kind = "deleted"
	default:
		ch.Kind = "modified"
	}
	return ch
}

func stateOf(f *agentfs.File) *agentfs.FileState {
	return &agentfs.FileState{Path: f.Path, Version: f.Version, SHA256: f.SHA256, SizeBytes: f.SizeBytes,
		ContentType: f.ContentType, BlobKey: f.BlobKey}
}

// PlanMerge is what merging the subject's fork would do now, changing
// nothing (dry_run): the changes it would apply and the conflicts, each
// with the side on_conflict would keep.
func (s *Store) PlanMerge(ctx context.Context, req agentfs.MergeRequest) (*agentfs.Merge, error) {
	fork, err := s.Fork(ctx, req.Subject, req.ForkID)
	if err != nil {
		return nil, err
	}
	sides, err := s.readSides(ctx, s.pool, fork, "")
	if err != nil {
		return nil, err
	}
	steps := sides.plan(fork, req.OnConflict)
	m := &agentfs.Merge{ForkID: fork.ID, Base: agentfs.Point{Position: fork.Base, At: fork.BaseAt}, DryRun: true,
		Applied: []agentfs.Change{}, Conflicts: conflictsOf(steps)}
	for _, st := range steps {
		if st.apply {
			m.Applied = append(m.Applied, plannedChange(fork, st))
		}
	}
	return m, nil
}

// MergeTx merges the subject's fork back into its source in tx, all or
// nothing: the target's files are locked, the plan decided against them,
// every change applied (blobs shared: no S3 request) with events carrying
// the fork and origin merge, and the base moved to what the sides now
// agree on. With on_conflict fail, a conflict is a
// *agentfs.MergeConflictError listing every one, before anything is
// written. A file that takes a target path meanwhile makes the insert lose
// the race (RaceLost), for the core to decide again.
func (s *Store) MergeTx(ctx context.Context, tx pgx.Tx, req agentfs.MergeRequest, o agentfs.Origin) (*agentfs.Merge, error) {
	fork, err := s.fork(ctx, tx, req.Subject, req.ForkID, "FOR UPDATE")
	if err != nil {
		return nil, err
	}
	sides, err := s.readSides(ctx, tx, fork, "FOR UPDATE")
	if err != nil {
		return nil, err
	}
	steps := sides.plan(fork, req.OnConflict)
	conflicts := conflictsOf(steps)
	if len(conflicts) > 0 && req.OnConflict != agentfs.OnConflictFork && req.OnConflict != agentfs.OnConflictTarget {
		return nil, &agentfs.MergeConflictError{Conflicts: conflicts}
	}
	o.ForkID, o.Via = fork.ID, agentfs.ViaMerge
	m := &agentfs.Merge{ForkID: fork.ID, Applied: []agentfs.Change{}, Conflicts: conflicts}
	for _, st := range steps {
		if !st.apply {
			continue
		}
		ch := plannedChange(fork, st)
		f, err := s.applyMergeStep(ctx, tx, fork, st, o)
		if err != nil {
			return nil, fmt.Errorf("merge %s: %w", ch.Path, err)
		}
		if ch.To != nil {
			ch.FileID, ch.To = f.ID, stateOf(f)
		}
		m.Applied = append(m.Applied, ch)
	}
	if m.Base, err = s.moveBase(ctx, tx, fork, steps); err != nil {
		return nil, err
	}
	return m, nil
}

// applyMergeStep writes the fork's side of st to the target path: a new
// file, a new version or a delete, sharing the fork version's blob.
func (s *Store) applyMergeStep(ctx context.Context, tx pgx.Tx, fork *agentfs.Fork, st mergeStep, o agentfs.Origin) (*agentfs.File, error) {
	t := st.target
	if t != nil && !t.Live() {
		if err := s.recordExpiry(ctx, tx, t); err != nil {
			return nil, err
		}
		t = nil
	}
	if st.fork == nil {
		f, _, err := s.DeleteFileTx(ctx, tx, fork.Subject, t.ID, "", o)
		return f, err
	}
	src := st.fork
	b := &writtenBlob{key: src.BlobKey, size: src.SizeBytes, sha256: src.SHA256, from: &versionRef{fileID: src.ID, version: src.Version}}
	if err := shareBlobTx(ctx, tx, b); err != nil {
		return nil, err
	}
	put := agentfs.Put{Subject: fork.Subject, Path: fork.From + st.rel, ContentType: src.ContentType, By: o.By}
	if t == nil {
		return s.insertFile(ctx, tx, put, NewID("file"), b, o)
	}
	f, err := s.updateFile(ctx, tx, fileUpdate{id: t.ID, put: put, blob: b, event: agentfs.EventReplaced, origin: o, onlyVersion: t.Version})
	if errors.Is(err, agentfs.ErrNotFound) && t.Blocked {
		return nil, &agentfs.BlockedError{FileID: t.ID, Reason: t.BlockReason}
	}
	return f, err
}

// moveBase sets the fork's base, in tx, to what the merge leaves the sides
// agreeing on: each path it settled takes the fork's side (gone when the
// fork holds no file there); the base position becomes the last position
// committed before the merge, whose own events follow it.
func (s *Store) moveBase(ctx context.Context, tx pgx.Tx, fork *agentfs.Fork, steps []mergeStep) (agentfs.Point, error) {
	var rels, ids, shas []string
	var versions []int32
	var gone []string
	for _, st := range steps {
		if st.fork == nil {
			gone = append(gone, st.rel)
			continue
		}
		rels, ids, shas = append(rels, st.rel), append(ids, st.fork.ID), append(shas, st.fork.SHA256)
		versions = append(versions, int32(st.fork.Version))
	}
	var p agentfs.Point
	err := tx.QueryRow(ctx, `WITH d AS (DELETE FROM fork_bases WHERE fork_id = @id AND rel_path = ANY(@gone)),
		u AS (INSERT INTO fork_bases (fork_id, rel_path, file_id, version, sha256)
			SELECT @id, * FROM unnest(@rels::text[], @ids::text[], @versions::int[], @shas::text[])
			ON CONFLICT (fork_id, rel_path) DO UPDATE SET file_id = excluded.file_id, version = excluded.version,
				sha256 = excluded.sha256)
		UPDATE forks SET base_pos = coalesce((SELECT n FROM event_counters WHERE subject = forks.subject), 0),
			merged_at = now()
		WHERE id = @id RETURNING base_pos, merged_at`,
		pgx.NamedArgs{"id": fork.ID, "gone": gone, "rels": rels, "ids": ids, "versions": versions, "shas": shas}).Scan(&p.Position, &p.At)
	if err != nil {
		return p, Translate(fmt.Errorf("merge: move the base: %w", err))
	}
	return p, nil
}
