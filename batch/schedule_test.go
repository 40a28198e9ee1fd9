package batch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/agentfs/agentfs"
)

// TestOrder checks which earlier items each item of a batch waits for: the
// ones that share its path, its file (by id or by the file's path), its
// key, or an undo's path, and everything around an operation the runner
// does not know.
func TestOrder(t *testing.T) {
	put := func(path string) agentfs.BatchItem { return agentfs.BatchItem{Op: agentfs.OpPut, Path: path} }
	byID := func(op, id string) agentfs.BatchItem { return agentfs.BatchItem{Op: op, FileID: id} }
	paths := map[string]string{"file_a": "a.txt", "file_b": "b.txt", "file_u": "u.txt"}
	for _, tc := range []struct {
		name  string
		items []agentfs.BatchItem
		want  []string // per item, the indexes it waits for
	}{
		{"DistinctPathsWaitForNothing", []agentfs.BatchItem{put("x"), put("y"), put("z")}, []string{"[]", "[]", "[]"}},
		{"OnePathInOrder", []agentfs.BatchItem{put("x"), put("y"), put("x"), put("x")}, []string{"[]", "[]", "[0]", "[2]"}},
		{"ACopyWaitsForWritesToItsSourceAndTarget", []agentfs.BatchItem{
			put("a.txt"), put("c.txt"), {Op: agentfs.OpCopy, FileID: "file_a", Path: "c.txt"}, put("a.txt"),
		}, []string{"[]", "[]", "[0 1]", "[2]"}},
		{"DeleteAndRestoreOfOneFileInOrder", []agentfs.BatchItem{
			byID(agentfs.OpDelete, "file_b"), put("b.txt"), byID(agentfs.OpRestore, "file_b"), byID(agentfs.OpDelete, "file_b"),
		}, []string{"[]", "[0]", "[0 1]", "[2]"}},
		{"AnUnknownFileIsOrderedByItsID", []agentfs.BatchItem{
			byID(agentfs.OpDelete, "file_gone"), put("x"), byID(agentfs.OpRestore, "file_gone"),
		}, []string{"[]", "[]", "[0]"}},
		{"AnUndoWaitsForItsFilesPathAndTheOneItMovesBackTo", []agentfs.BatchItem{
			put("old.txt"), put("u.txt"), put("z"),
			{Op: agentfs.OpUndo, FileID: "file_u", Undo: &agentfs.Undo{Existed: true, Live: true, Path: "old.txt"}},
		}, []string{"[]", "[]", "[]", "[0 1]"}},
		{"OneKeyInOrder", []agentfs.BatchItem{
			{Op: agentfs.OpPut, Path: "x", Key: "k"}, put("y"), {Op: agentfs.OpPut, Path: "z", Key: "k"},
		}, []string{"[]", "[]", "[0]"}},
		{"AnUnknownOperationIsABarrier", []agentfs.BatchItem{
			put("x"), put("y"), {Op: "rename"}, put("z"), put("x"),
		}, []string{"[]", "[]", "[0 1]", "[2]", "[0 2]"}},
		{"ItemsNotPendingAreLeftOut", []agentfs.BatchItem{
			{Op: agentfs.OpPut, Path: "x", Status: agentfs.ItemSucceeded}, put("x"), put("x"),
		}, []string{"[]", "[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.items {
				tc.items[i].Index = i
				if tc.items[i].Status == "" {
					tc.items[i].Status = agentfs.ItemPending
				}
			}
			nodes := order(tc.items, paths)
			waitsFor := map[*node][]int{}
			for _, n := range nodes {
				for _, m := range n.next {
					waitsFor[m] = append(waitsFor[m], n.it.Index)
				}
			}
			var got []string
			for _, n := range nodes {
				w := waitsFor[n]
				slices.Sort(w)
				if len(w) != n.waits {
					t.Fatalf("item %d counts %d items to wait for, is named by %v", n.it.Index, n.waits, w)
				}
				got = append(got, fmt.Sprint(append([]int{}, w...)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("waits %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNothingCommitsAfterAnItemLeftPending: when an item of a committed
// group stays pending (its commit failed in a way the retry may pass), the
// items after it that were prepared meanwhile are not committed in this run,
// so a batch's pending items are always its last ones.
func TestNothingCommitsAfterAnItemLeftPending(t *testing.T) {
	put := func(path string) agentfs.BatchItem { return agentfs.BatchItem{Op: agentfs.OpPut, Path: path} }
	items := []agentfs.BatchItem{put("a"), put("b"), put("c")}
	for i := range items {
		items[i].Index, items[i].Status = i, agentfs.ItemPending
	}
	s := &scheduler{
		r:       &Runner{cfg: Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}},
		b:       &agentfs.Batch{ID: "batch_x"},
		nodes:   order(items, nil),
		commits: make(chan []*node, 1),
	}
	s.nodes[0].state, s.nodes[1].state = prepared, prepared
	s.inflight = 3
	s.commitNext()
	group := <-s.commits
	if len(group) != 2 || s.head != 2 {
		t.Fatalf("first group %d nodes, head %d; want 2 and 2", len(group), s.head)
	}
	s.nodes[2].state = prepared // prepared while the group commits
	s.handle(context.Background(), event{group: group, errs: []error{nil, agentfs.ErrUnavailable}})
	if s.nodes[1].state != left {
		t.Fatalf("item 1 is %v, want left pending", s.nodes[1].state)
	}
	s.commitNext()
	select {
	case g := <-s.commits:
		t.Fatalf("item %d was handed to the committer after item 1 stayed pending", g[0].it.Index)
	default:
	}
}
