package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

func pointNow(t *testing.T, store *storage.Store, subject string) agentfs.Point {
	t.Helper()
	p, err := store.ResolvePoint(context.Background(), subject, agentfs.PointSpec{Field: "as_of", Kind: agentfs.PointNow})
	if err != nil {
		t.Fatalf("resolve now: %v", err)
	}
	return p
}

// pathsAsOf is "path@version" of every file live at p, in path order.
func pathsAsOf(t *testing.T, store *storage.Store, p agentfs.Point, prefix string) string {
	t.Helper()
	files, err := store.FilesAsOf(context.Background(), "s", agentfs.AsOfFilter{Point: p, Prefix: prefix, Limit: 100})
	if err != nil {
		t.Fatalf("files as of %d: %v", p.Position, err)
	}
	var out []string
	for _, f := range files {
		out = append(out, fmt.Sprintf("%s@%d", f.Path, f.Version))
	}
	return strings.Join(out, " ")
}

// TestFileStatesFollowEveryEffect: creates, replaces, reverts, moves,
// deletes, restores and a lazy expiry each leave the as-of view of every
// earlier point as it was.
func TestFileStatesFollowEveryEffect(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	a := mustPut(t, store, "dir/a.txt", "a1", false)
	b := mustPut(t, store, "dir/b.txt", "b1", false)
	mustPut(t, store, "other/x.txt", "x", false)
	p1 := pointNow(t, store, "s")

	mustPut(t, store, "dir/a.txt", "a2", true)
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := store.MoveFileTx(ctx, tx, agentfs.Move{Subject: "s", FileID: b.ID, Path: "dir/c.txt"}, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p2 := pointNow(t, store, "s")
	if _, err := deleteFile(ctx, store, "s", a.ID); err != nil {
		t.Fatal(err)
	}
	p3 := pointNow(t, store, "s")
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := store.RestoreFileTx(ctx, tx, "s", a.ID, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p4 := pointNow(t, store, "s")

	for _, tc := range []struct {
		name string
		p    agentfs.Point
		want string
	}{
		{"before anything", agentfs.Point{Position: 0, At: time.Now()}, ""},
		{"p1", p1, "dir/a.txt@1 dir/b.txt@1"},
		{"p2", p2, "dir/a.txt@2 dir/c.txt@1"},
		{"p3", p3, "dir/c.txt@1"},
		{"p4", p4, "dir/a.txt@2 dir/c.txt@1"},
	} {
		if got := pathsAsOf(t, store, tc.p, "dir/"); got != tc.want {
			t.Errorf("as of %s (%d): %q, want %q", tc.name, tc.p.Position, got, tc.want)
		}
	}
	if got := pathsAsOf(t, store, p1, "dir/b"); got != "dir/b.txt@1" {
		t.Errorf("as of p1 under dir/b: %q", got)
	}
	f, err := store.FileAsOf(ctx, "s", a.ID, p1)
	if err != nil || f.Version != 1 || f.SHA256 != a.SHA256 || f.BlobKey != a.BlobKey {
		t.Fatalf("a.txt as of p1: %+v %v, want version 1 with its first blob", f, err)
	}
	if _, err := store.FileAsOf(ctx, "s", a.ID, p3); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("a.txt as of p3 (deleted): %v, want not found", err)
	}
	if _, err := store.FileAsOf(ctx, "other", a.ID, p1); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("a.txt as of p1 for another subject: %v, want not found", err)
	}

	// A diff: by path, each file compared at both points, either way round.
	for _, tc := range []struct {
		from, to agentfs.Point
		want     string
	}{
		{p1, p4, "modified dir/a.txt 1>2, moved dir/c.txt<dir/b.txt 1>1"},
		{p4, p1, "modified dir/a.txt 2>1, moved dir/b.txt<dir/c.txt 1>1"},
		{p2, p3, "deleted dir/a.txt 2>0"},
		{p2, p4, ""}, // deleted and restored: no change
		{p1, p1, ""},
	} {
		changes, err := store.Diff(ctx, "s", agentfs.DiffRequest{From: tc.from, To: tc.to, Prefix: "dir/", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range changes {
			line := c.Kind + " " + c.Path
			if c.PreviousPath != "" {
				line += "<" + c.PreviousPath
			}
			v := func(s *agentfs.FileState) int {
				if s == nil {
					return 0
				}
				return s.Version
			}
			got = append(got, fmt.Sprintf("%s %d>%d", line, v(c.From), v(c.To)))
		}
		if g := strings.Join(got, ", "); g != tc.want {
			t.Errorf("diff %d..%d: %q, want %q", tc.from.Position, tc.to.Position, g, tc.want)
		}
	}

	// Lazy expiry: past its expires_at a file is gone from the points
	// after that time, and still there at the points before it.
	before := pointNow(t, store, "s")
	if _, err := store.Pool().Exec(ctx, `UPDATE files SET expires_at = now() WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if got := pathsAsOf(t, store, pointNow(t, store, "s"), "dir/"); got != "dir/c.txt@1" {
		t.Errorf("as of now, after a.txt expired: %q", got)
	}
	if got := pathsAsOf(t, store, before, "dir/"); got != "dir/a.txt@2 dir/c.txt@1" {
		t.Errorf("as of before the expiry: %q", got)
	}
}

func TestResolvePoint(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	mustPut(t, store, "a.txt", "1", false)
	mid := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	mustPut(t, store, "b.txt", "2", false)
	now := pointNow(t, store, "s")
	if now.Position != 2 {
		t.Fatalf("now at %d, want 2", now.Position)
	}
	p, err := store.ResolvePoint(ctx, "s", agentfs.PointSpec{Field: "to", Kind: agentfs.PointTime, Time: mid})
	if err != nil || p.Position != 1 {
		t.Fatalf("the time between the writes resolves to %d (%v), want 1", p.Position, err)
	}
	var pe *agentfs.PointError
	for name, spec := range map[string]agentfs.PointSpec{
		"a cursor past the end": {Field: "to", Kind: agentfs.PointCursor, Cursor: agentfs.EventCursor{Position: 3, At: time.Now()}},
		"a future time":         {Field: "to", Kind: agentfs.PointTime, Time: time.Now().Add(time.Hour)},
	} {
		if _, err := store.ResolvePoint(ctx, "s", spec); !errors.As(err, &pe) || pe.Field != "to" {
			t.Errorf("%s: %v, want a *PointError of to", name, err)
		}
	}
	old := time.Now().Add(-800 * time.Hour)
	for name, spec := range map[string]agentfs.PointSpec{
		"an old cursor": {Kind: agentfs.PointCursor, Cursor: agentfs.EventCursor{Position: 1, At: old}},
		"an old time":   {Kind: agentfs.PointTime, Time: old},
	} {
		if _, err := store.ResolvePoint(ctx, "s", spec); !errors.Is(err, agentfs.ErrCursorExpired) {
			t.Errorf("%s: %v, want ErrCursorExpired", name, err)
		}
	}
	if _, err := store.ResolvePoint(ctx, "s", agentfs.PointSpec{Kind: agentfs.PointCheckpointName, Raw: "nope"}); !errors.Is(err, agentfs.ErrNotFound) {
		t.Errorf("an unknown checkpoint: %v, want not found", err)
	}
}
