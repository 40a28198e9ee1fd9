package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// setupWindow opens a store whose window for parts ahead of the running
// hash holds window bytes (negative: none).
func setupWindow(t *testing.T, window int64) (*storage.Store, storage.Config) {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.UploadHashWindow = window
	return storagetest.OpenConfig(t, cfg), cfg
}

// content is a session's content of count parts (the last one short) and
// its parts.
func content(count int, seed int64) (whole []byte, parts [][]byte) {
	whole = randomBytes((count-1)*minPart+4096, seed)
	for off := 0; off < len(whole); off += minPart {
		parts = append(parts, whole[off:min(off+minPart, len(whole))])
	}
	return whole, parts
}

// sendInOrder sends the parts in the order of numbers, through the stores
// in turn (one store: all through it).
func sendInOrder(t *testing.T, stores []*storage.Store, id string, parts [][]byte, numbers []int) {
	t.Helper()
	for i, n := range numbers {
		putPart(t, stores[i%len(stores)], id, n, string(parts[n-1]))
	}
}

// completeAndCheck completes the session on store and checks the file's
// sha256 and bytes against whole; it returns how many bytes complete read
// back.
func completeAndCheck(t *testing.T, store *storage.Store, id string, whole []byte) int64 {
	t.Helper()
	before := store.Counters().ReadBackBytes
	f, _ := mustComplete(t, store, id, agentfs.CompleteRequest{SHA256: hexSHA(whole)})
	if f.SHA256 != hexSHA(whole) {
		t.Fatalf("sha256 %s, want %s", f.SHA256, hexSHA(whole))
	}
	if got := readFile(t, store, f); !bytes.Equal(got, whole) {
		t.Fatalf("the file holds %s, want %s", hexSHA(got), hexSHA(whole))
	}
	return store.Counters().ReadBackBytes - before
}

// completeReadsNothing completes the session and checks it against whole,
// trusting the running hash: complete reads no byte back.
func completeReadsNothing(t *testing.T, store *storage.Store, id string, whole []byte) {
	t.Helper()
	if n := completeAndCheck(t, store, id, whole); n != 0 {
		t.Fatalf("complete read %d bytes back", n)
	}
}

// wantHashed checks how many parts the session's running hash covers.
func wantHashed(t *testing.T, store *storage.Store, id string, n int, why string) {
	t.Helper()
	if got := getUpload(t, store, id).HashedParts; got != n {
		t.Fatalf("hashed_parts %d, want %d (%s)", got, n, why)
	}
}

func TestUploadRunningHash(t *testing.T) {
	ctx := context.Background()
	const count = 5

	orders := map[string][]int{
		"InOrder":      {1, 2, 3, 4, 5},
		"ReverseOrder": {5, 4, 3, 2, 1},
		"RandomOrder":  rand.New(rand.NewSource(11)).Perm(count),
		"Resent":       {2, 1, 2, 3, 5, 3, 4, 5, 1},
	}
	for i := range orders["RandomOrder"] {
		orders["RandomOrder"][i]++
	}

	// Every part through one instance, within the window: the running hash
	// covers every part by the time the last is recorded, and complete
	// reads nothing back.
	for name, order := range orders {
		t.Run(name+"ThroughOneInstanceReadsNothingBack", func(t *testing.T) {
			store, _ := setupWindow(t, 0) // the default window
			whole, parts := content(count, int64(len(name)))
			u, _ := openUpload(t, store, newUpload("h.bin", int64(len(whole)), ""))
			sendInOrder(t, []*storage.Store{store}, u.ID, parts, order)
			if got := getUpload(t, store, u.ID); got.HashedParts != count {
				t.Fatalf("hashed_parts %d after every part, want %d", got.HashedParts, count)
			}
			completeReadsNothing(t, store, u.ID, whole)
		})
	}

	// Without a window only parts in order are hashed as they come: the
	// counter the tests above read does count what is read back.
	t.Run("WithoutAWindowPartsAheadAreReadBack", func(t *testing.T) {
		store, _ := setupWindow(t, -1)
		whole, parts := content(count, 21)
		u, _ := openUpload(t, store, newUpload("h.bin", int64(len(whole)), ""))
		sendInOrder(t, []*storage.Store{store}, u.ID, parts, []int{1, 2, 4, 5, 3})
		wantHashed(t, store, u.ID, 3, "parts 1 and 2 in order, then 3")
		if n, want := completeAndCheck(t, store, u.ID, whole), int64(len(whole)-3*minPart); n != want {
			t.Fatalf("complete read %d bytes back, want %d (parts 4 and 5)", n, want)
		}
	})

	// A window smaller than a part keeps nothing: the sha256 is still
	// exact, from what is read back.
	t.Run("APartBeyondTheWindowIsReadBack", func(t *testing.T) {
		store, _ := setupWindow(t, minPart/2)
		whole, parts := content(count, 22)
		u, _ := openUpload(t, store, newUpload("h.bin", int64(len(whole)), ""))
		sendInOrder(t, []*storage.Store{store}, u.ID, parts, []int{5, 4, 3, 2, 1})
		if n := completeAndCheck(t, store, u.ID, whole); n != int64(len(whole)-minPart) {
			t.Fatalf("complete read %d bytes back, want %d (all but part 1)", n, len(whole)-minPart)
		}
	})

	// Parts sent side by side, as a client sends them, several times over:
	// the sha256 is exact however their streams interleave.
	t.Run("PartsSentInParallel", func(t *testing.T) {
		store, _ := setupWindow(t, 0)
		for round := range 3 {
			whole, parts := content(count, int64(30+round))
			u, _ := openUpload(t, store, newUpload(fmt.Sprintf("p%d.bin", round), int64(len(whole)), ""))
			next := make(chan int, count)
			for n := 1; n <= count; n++ {
				next <- n
			}
			close(next)
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					for n := range next {
						if _, err := sendPart(ctx, store, "s", u.ID, n, string(parts[n-1])); err != nil {
							t.Errorf("part %d: %v", n, err)
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if n := completeAndCheck(t, store, u.ID, whole); n != 0 {
				t.Errorf("round %d: complete read %d bytes back", round, n)
			}
		}
	})

	// Two instances on one schema take turns: each part's predecessor went
	// to the other. The running hash moves on through whichever instance
	// holds the next bytes, and complete reads back only what neither
	// could hash; the sha256 is exact either way.
	t.Run("PartsThroughTwoInstances", func(t *testing.T) {
		store, cfg := setupWindow(t, 0)
		other := storagetest.OpenConfig(t, cfg)
		stores := []*storage.Store{store, other}
		for name, order := range orders {
			whole, parts := content(count, int64(40+len(name)))
			u, _ := openUpload(t, store, newUpload(name+".bin", int64(len(whole)), ""))
			sendInOrder(t, stores, u.ID, parts, order)
			read := completeAndCheck(t, stores[len(name)%2], u.ID, whole)
			if read > int64(len(whole)) {
				t.Fatalf("%s: read back %d bytes of %d", name, read, len(whole))
			}
			if name == "InOrder" && read != 0 {
				t.Fatalf("parts in order through two instances: read back %d bytes", read)
			}
		}
	})

	// A part held for its turn and then sent again with other bytes: the
	// later bytes are the part, and the hash is over them.
	t.Run("AHeldPartSentAgainWithOtherBytes", func(t *testing.T) {
		store, _ := setupWindow(t, 0)
		whole, parts := content(3, 50)
		u, _ := openUpload(t, store, newUpload("again.bin", int64(len(whole)), ""))
		putPart(t, store, u.ID, 2, string(randomBytes(minPart, 51)))
		putPart(t, store, u.ID, 2, string(parts[1]))
		sendInOrder(t, []*storage.Store{store}, u.ID, parts, []int{3, 1})
		completeReadsNothing(t, store, u.ID, whole)
	})

	// A part hashed into the running hash, then replaced by other bytes
	// while later parts are held: the hash is reset and rebuilt over the
	// new bytes; what was hashed over the old ones is read back.
	t.Run("AHashedPartReplacedWithOtherBytes", func(t *testing.T) {
		store, _ := setupWindow(t, 0)
		whole, parts := content(4, 52)
		u, _ := openUpload(t, store, newUpload("replaced.bin", int64(len(whole)), ""))
		sendInOrder(t, []*storage.Store{store}, u.ID, parts, []int{1, 2, 4})
		q2 := randomBytes(minPart, 53)
		putPart(t, store, u.ID, 2, string(q2))
		putPart(t, store, u.ID, 3, string(parts[2]))
		want := append(append(append(append([]byte{}, parts[0]...), q2...), parts[2]...), parts[3]...)
		completeAndCheck(t, store, u.ID, want)
	})

	// A part recorded in a transaction that does not commit leaves the
	// running hash as it was.
	t.Run("APartWhoseRecordRollsBackMovesNothing", func(t *testing.T) {
		store, _ := setupWindow(t, 0)
		whole, parts := content(2, 54)
		u, _ := openUpload(t, store, newUpload("rollback.bin", int64(len(whole)), ""))
		p, err := store.SendPart(ctx, "s", u.ID, 1, bytes.NewReader(parts[0]), int64(len(parts[0])), nil)
		if err != nil {
			t.Fatal(err)
		}
		rollback := fmt.Errorf("roll back")
		err = store.WithTx(ctx, func(tx pgx.Tx) error {
			if err := p.Apply(ctx, tx); err != nil {
				return err
			}
			return rollback
		})
		p.Finish(ctx, err)
		if got := getUpload(t, store, u.ID); got.HashedParts != 0 || len(got.Parts) != 0 {
			t.Fatalf("after a rolled back record: hashed_parts %d, %d parts", got.HashedParts, len(got.Parts))
		}
		sendInOrder(t, []*storage.Store{store}, u.ID, parts, []int{2, 1})
		completeReadsNothing(t, store, u.ID, whole)
	})
}
