package storage

import (
	"fmt"
	"testing"

	"github.com/agentfs/agentfs"
)

// TestRestoreOrder: the order of a restore's items frees every path before
// a file comes back to it: files that go first, a chain from its free end,
// a ring carried by its first file's item (which moves the others) with the
// ring's other items after it.
func TestRestoreOrder(t *testing.T) {
	moved := func(id, from, to string) agentfs.Change {
		return agentfs.Change{FileID: id, Kind: "moved", Path: to, PreviousPath: from,
			From: &agentfs.FileState{Path: from, Version: 1}, To: &agentfs.FileState{Path: to, Version: 1}}
	}
	added := func(id, path string) agentfs.Change {
		return agentfs.Change{FileID: id, Kind: "added", Path: path, To: &agentfs.FileState{Path: path, Version: 1}}
	}
	for _, tc := range []struct {
		name    string
		changes []agentfs.Change // in the diff's path order
		want    string           // ids in item order, then each chain
	}{
		{"one move", []agentfs.Change{moved("m", "a", "b")}, "[m] map[]"},
		{"an added file holds the path", []agentfs.Change{moved("m", "a", "b"), added("n", "a")}, "[n m] map[]"},
		// a was at p1 and is at p2 now; b was at p2 and is at p3 now.
		// a came from p1 to p2, b from p2 to p3: a goes back first, freeing p2.
		{"a chain", []agentfs.Change{moved("b", "p2", "p3"), moved("a", "p1", "p2")}, "[a b] map[]"},
		{"two swapped", []agentfs.Change{moved("a", "p1", "p2"), moved("b", "p2", "p1")}, "[a b] map[0:[{b p2}]]"},
		{"a ring of three", []agentfs.Change{moved("x", "p1", "p2"), moved("y", "p2", "p3"), moved("z", "p3", "p1")},
			"[x y z] map[0:[{y p2} {z p3}]]"},
		{"all at once", []agentfs.Change{moved("b", "p2", "p3"), moved("a", "p1", "p2"), added("n", "p9"),
			moved("x", "q1", "q2"), moved("y", "q2", "q1")},
			"[n a b x y] map[3:[{y q2}]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, chains := restoreOrder(tc.changes)
			ids := make([]string, len(out))
			for i, ch := range out {
				ids[i] = ch.FileID
			}
			if got := fmt.Sprint(ids, " ", chains); got != tc.want {
				t.Fatalf("restoreOrder = %s, want %s", got, tc.want)
			}
		})
	}
}
