package storage

import (
	"context"
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
	m := &agentfs.Merge{ForkID: fork.ID, Conflicts: conflicts}
	if m.Applied, err = s.applyMerge(ctx, tx, fork, steps, o); err != nil {
		return nil, err
	}
	if m.Base, err = s.moveBase(ctx, tx, fork, steps); err != nil {
		return nil, err
	}
	return m, nil
}

// applyMerge writes the fork's side of every step that applies to the
// target, set-based whatever the number of changes: a target past its
// expiry is recorded expired first (one statement each; rare), then one
// statement locks every fork version whose blob the target will share
// against a sweep (no S3 request), one deletes, one makes the new files
// and one writes the new versions (each with its events, carrying the fork
// and origin merge). It answers the changes in path order.
func (s *Store) applyMerge(ctx context.Context, tx pgx.Tx, fork *agentfs.Fork, steps []mergeStep, o agentfs.Origin) ([]agentfs.Change, error) {
	applied := []agentfs.Change{}
	var dels []string
	var shared sharedVersions
	n := newFiles{forkID: o.ForkID, via: o.Via}
	var u mergeUpdates
	for _, st := range steps {
		if !st.apply {
			continue
		}
		ch := plannedChange(fork, st)
		t := st.target
		if t != nil && !t.Live() {
			if err := s.recordExpiry(ctx, tx, t); err != nil {
				return nil, fmt.Errorf("merge %s: %w", ch.Path, err)
			}
			t = nil
		}
		applied = append(applied, ch)
		src := st.fork
		switch {
		case src == nil: // a fork-only delete: the target is live (its bytes are the base's)
			dels = append(dels, t.ID)
			continue
		case t == nil:
			id := NewID("file")
			n.add(id, agentfs.Put{Subject: fork.Subject, Path: ch.Path, ContentType: src.ContentType, By: o.By},
				&writtenBlob{key: src.BlobKey, size: src.SizeBytes, sha256: src.SHA256}, o)
			applied[len(applied)-1].FileID = id
		case t.Blocked:
			return nil, fmt.Errorf("merge %s: %w", ch.Path, &agentfs.BlockedError{FileID: t.ID, Reason: t.BlockReason})
		default:
			u.add(t, src)
		}
		shared.add(src)
	}
	if err := shared.lock(ctx, tx); err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	written := map[string]*agentfs.File{}
	if len(dels) > 0 {
		files, err := s.scanFiles(tx.Query(ctx, `WITH f AS (
				UPDATE files SET deleted_at = now(), updated_at = now(), purge_after = now() + make_interval(secs => @retention)
				WHERE id = ANY (@ids::text[]) AND `+liveFile+` RETURNING *),
			e AS (`+insertEventFrom("'"+agentfs.EventDeleted+"'", "NULL")+`)
			SELECT `+fileColumns+` FROM f`,
			originArgs(o, pgx.NamedArgs{"ids": dels, "retention": s.cfg.DeletedRetention.Seconds()})))
		if err == nil && len(files) != len(dels) {
			err = fmt.Errorf("%w: %d of %d files to delete changed meanwhile", agentfs.ErrNotFound, len(dels)-len(files), len(dels))
		}
		if err != nil {
			return nil, fmt.Errorf("merge: delete: %w", err)
		}
	}
	if len(n.ids) > 0 {
		files, err := s.insertFiles(ctx, tx, fork.Subject, &n)
		if err != nil {
			return nil, fmt.Errorf("merge: create: %w", err)
		}
		for _, f := range files {
			written[f.ID] = f
		}
	}
	if len(u.ids) > 0 {
		files, err := s.scanFiles(tx.Query(ctx, updateFilesSQL, originArgs(o, pgx.NamedArgs{"ids": u.ids, "only_versions": u.versions,
			"sizes": u.sizes, "content_types": u.contentTypes, "sha256s": u.sha256s, "blob_keys": u.blobKeys})))
		if err == nil && len(files) != len(u.ids) {
			err = fmt.Errorf("%w: %d of %d files to replace changed meanwhile", agentfs.ErrNotFound, len(u.ids)-len(files), len(u.ids))
		}
		if err != nil {
			return nil, fmt.Errorf("merge: replace: %w", err)
		}
		for _, f := range files {
			written[f.ID] = f
		}
	}
	for i, ch := range applied {
		if ch.To == nil {
			continue
		}
		f := written[ch.FileID]
		if f == nil {
			return nil, fmt.Errorf("merge %s: the written file %s is missing", ch.Path, ch.FileID)
		}
		applied[i].To = stateOf(f)
	}
	return applied, nil
}

// sharedVersions are the fork versions whose blobs a merge shares.
type sharedVersions struct {
	ids, keys []string
	versions  []int32
}

func (v *sharedVersions) add(f *agentfs.File) {
	v.ids, v.keys, v.versions = append(v.ids, f.ID), append(v.keys, f.BlobKey), append(v.versions, int32(f.Version))
}

// lock holds every version in tx against a sweep (as shareBlobTx does for
// one); one already removed is agentfs.ErrNotFound.
func (v *sharedVersions) lock(ctx context.Context, tx pgx.Tx) error {
	if len(v.ids) == 0 {
		return nil
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM file_versions v
			JOIN unnest(@ids::text[], @versions::int[], @keys::text[]) AS i(file_id, version, blob_key)
				ON v.file_id = i.file_id AND v.version = i.version AND v.blob_key = i.blob_key
			FOR KEY SHARE OF v) x`, pgx.NamedArgs{"ids": v.ids, "versions": v.versions, "keys": v.keys}).Scan(&n)
	switch {
	case err != nil:
		return Translate(fmt.Errorf("share blobs: %w", err))
	case n != len(v.ids):
		return fmt.Errorf("%w: a version whose content this merge shares was removed meanwhile", agentfs.ErrNotFound)
	}
	return nil
}

// mergeUpdates are the target files a merge gives a new version: each at
// the version the merge saw (the files are locked) and the fork's content.
type mergeUpdates struct {
	ids, contentTypes, sha256s, blobKeys []string
	versions                             []int32
	sizes                                []int64
}

func (u *mergeUpdates) add(t, src *agentfs.File) {
	u.ids, u.versions = append(u.ids, t.ID), append(u.versions, int32(t.Version))
	u.contentTypes, u.sha256s = append(u.contentTypes, src.ContentType), append(u.sha256s, src.SHA256)
	u.blobKeys, u.sizes = append(u.blobKeys, src.BlobKey), append(u.sizes, src.SizeBytes)
}

// updateFilesSQL gives many live, unblocked files a new version each in
// one statement, as updateFileSQL does one replace by one origin: the
// shared blob (no search row: it has one), the file's expiry, mode and
// kind kept, mtime cleared.
var updateFilesSQL = writeFiles(`SELECT u.*, @idempotency_key::text AS idempotency_key, @request_id::text AS request_id,
		@batch_id::text AS batch_id, (-1)::smallint AS search_kind, NULL::text AS search_body
		FROM unnest(@ids::text[], @only_versions::int[], @sizes::bigint[], @content_types::text[], @sha256s::text[],
			@blob_keys::text[]) WITH ORDINALITY AS u(id, only_version, size, content_type, sha256, blob_key, n)`,
	`UPDATE files SET size_bytes = i.size, content_type = i.content_type, sha256 = i.sha256, blob_key = i.blob_key,
			version = files.version + 1, last_agent_id = nullif(@agent_id, ''), last_run_id = nullif(@run_id, ''),
			updated_at = now(), mtime = NULL
		FROM i WHERE files.id = i.id AND files.version = i.only_version AND `+liveFile+` AND NOT files.blocked
		RETURNING files.*`,
	`'`+agentfs.EventReplaced+`'`, true)

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
