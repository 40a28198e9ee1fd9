package hashwindow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"testing"
)

// These tests drive the window's sinks by hand, byte by byte where it
// matters, without S3 or Postgres: which parts are hashed when, and what
// memory they hold.

func testParts(count, size int, seed int64) [][]byte {
	r := rand.New(rand.NewSource(seed))
	parts := make([][]byte, count)
	for i := range parts {
		parts[i] = make([]byte, size)
		r.Read(parts[i])
	}
	return parts
}

// chainOf is count parts of size random bytes (from seed), a window of
// budget bytes, and the chain of one session in it.
func chainOf(count, size int, seed, budget int64) ([][]byte, *Window, *Chain) {
	w := New(budget)
	return testParts(count, size, seed), w, w.Chain("upl")
}

func shaHex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// stateOf is the marshalled SHA-256 state after the given bytes.
func stateOf(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	h, _ := Restore(nil)
	for _, p := range parts {
		h.Write(p)
	}
	pt := (&PartSink{h: h}).after()
	return pt.state
}

// write sends b to s in writes of at most chunk bytes.
func write(s *PartSink, b []byte, chunk int) {
	for len(b) > 0 {
		n := min(chunk, len(b))
		s.Write(b[:n])
		b = b[n:]
	}
}

func TestHashWindow(t *testing.T) {
	const size = 3*windowSlab + 123

	t.Run("PartsInAnyOrderEndInOneChain", func(t *testing.T) {
		parts := testParts(4, size, 1)
		for _, order := range [][]int{{1, 2, 3, 4}, {4, 3, 2, 1}, {2, 4, 1, 3}, {3, 1, 4, 2}} {
			w := New(64 * windowSlab)
			sc := w.Chain("upl")
			for _, n := range order {
				s := sc.Sink(n)
				write(s, parts[n-1], 64<<10)
				s.Stored(shaHex(parts[n-1]))
			}
			pt, ok := sc.point(4)
			if !ok || !bytes.Equal(pt.state, stateOf(t, parts...)) {
				t.Fatalf("order %v: no point after part 4, or not the state of the whole content", order)
			}
			if w.inUse != 0 {
				t.Fatalf("order %v: %d slabs still in use", order, w.inUse)
			}
			w.trim()
			if w.allocated != 0 || len(w.free) != 0 {
				t.Fatalf("order %v: %d bytes still allocated after the trim", order, w.allocated)
			}
		}
	})

	// Slabs given back are kept for the next part ahead instead of being
	// mapped again, and unmapped once the window stays idle.
	t.Run("FreeSlabsAreReusedThenUnmapped", func(t *testing.T) {
		w := New(64 * windowSlab)
		for round := range 3 {
			parts := testParts(2, size, int64(10+round))
			sc := w.Chain(fmt.Sprintf("upl-%d", round))
			ahead := sc.Sink(2) // kept: part 1 has not come yet
			write(ahead, parts[1], 64<<10)
			ahead.Stored(shaHex(parts[1]))
			first := sc.Sink(1)
			write(first, parts[0], 64<<10)
			first.Stored(shaHex(parts[0]))
			if pt, ok := sc.point(2); !ok || !bytes.Equal(pt.state, stateOf(t, parts...)) {
				t.Fatalf("round %d: no point after part 2, or not the state of the whole content", round)
			}
			w.mu.Lock()
			inUse, allocated, free := w.inUse, w.allocated, len(w.free)
			w.mu.Unlock()
			if inUse != 0 || allocated != 4*windowSlab || free != 4 {
				t.Fatalf("round %d: %d slabs in use, %d bytes allocated, %d free; want 0, %d (the slabs of one part, reused), 4",
					round, inUse, allocated, free, 4*windowSlab)
			}
		}
		w.trim()
		if w.allocated != 0 || len(w.free) != 0 {
			t.Fatalf("%d bytes still allocated after the trim", w.allocated)
		}
	})

	// A part streaming while the point before it appears stops keeping its
	// bytes: it hashes what it kept and the rest as it comes.
	t.Run("APartStopsKeepingBytesWhenItsTurnComes", func(t *testing.T) {
		parts, w, sc := chainOf(2, size, 2, 64*windowSlab)
		first, second := sc.Sink(1), sc.Sink(2)
		write(first, parts[0][:10], 10)         // part 1 knows point 0: it hashes at once
		write(second, parts[1][:size/2], 1<<16) // part 2 keeps its first half
		if w.inUse == 0 {
			t.Fatal("part 2 kept nothing while part 1 streamed")
		}
		write(first, parts[0][10:], 1<<16)
		first.Stored(shaHex(parts[0]))
		write(second, parts[1][size/2:], 1<<16)
		if w.inUse != 0 {
			t.Fatalf("part 2 still keeps %d slabs after point 1 appeared", w.inUse)
		}
		second.Stored(shaHex(parts[1]))
		if pt, ok := sc.point(2); !ok || !bytes.Equal(pt.state, stateOf(t, parts...)) || pt.sha != shaHex(parts[1]) {
			t.Fatal("the point after part 2 is not the state of both parts")
		}
	})

	t.Run("NeverHoldsMoreThanItsBudget", func(t *testing.T) {
		parts := testParts(5, size, 3)
		budget := int64(6 * windowSlab) // one part and a half
		w := New(budget)
		sc := w.Chain("upl")
		var sinks []*PartSink
		for n := 5; n >= 2; n-- {
			s := sc.Sink(n)
			for off := 0; off < size; off += 1 << 16 {
				s.Write(parts[n-1][off:min(off+1<<16, size)])
				if w.allocated > budget {
					t.Fatalf("%d bytes allocated, budget %d", w.allocated, budget)
				}
			}
			sinks = append(sinks, s)
		}
		lost := 0
		for _, s := range sinks {
			if s.lost {
				lost++
			}
			s.Stored(shaHex(parts[s.n-1]))
		}
		if lost == 0 {
			t.Fatal("four parts ahead fit in a budget of one and a half")
		}
		first := sc.Sink(1)
		write(first, parts[0], 1<<16)
		first.Stored(shaHex(parts[0]))
		if _, ok := sc.point(5); ok {
			t.Fatal("a point after part 5 though parts were lost")
		}
		sc.drop()
		if w.inUse != 0 {
			t.Fatalf("%d slabs in use after the session was dropped", w.inUse)
		}
	})

	// A part ahead that finds the window full waits while a part before it
	// streams: that part's end lets the one after it hash as it streams,
	// which frees the room.
	t.Run("APartAheadWaitsForRoomWhileAPartBeforeItStreams", func(t *testing.T) {
		parts, w, sc := chainOf(3, size, 6, 4*windowSlab) // one part
		first, second, third := sc.Sink(1), sc.Sink(2), sc.Sink(3)
		write(first, parts[0][:size/2], 1<<16)
		write(second, parts[1][:size-1], 1<<16) // fills the window
		done := make(chan struct{})
		go func() {
			defer close(done)
			write(third, parts[2], 1<<16) // waits for room
		}()
		write(first, parts[0][size/2:], 1<<16)
		first.Stored(shaHex(parts[0]))
		write(second, parts[1][size-1:], 1<<16) // hashes what it kept: room for part 3
		second.Stored(shaHex(parts[1]))
		<-done
		if third.lost {
			t.Fatal("part 3 gave up though a part before it was streaming")
		}
		third.Stored(shaHex(parts[2]))
		if pt, ok := sc.point(3); !ok || !bytes.Equal(pt.state, stateOf(t, parts...)) {
			t.Fatal("no point after part 3 of the whole content")
		}
		if w.inUse != 0 {
			t.Fatalf("%d slabs in use", w.inUse)
		}
	})

	// A part S3 took but the window could not keep breaks the chain there:
	// parts after it held for their turn are let go, and later ones keep
	// nothing, until the part is sent again and hashed.
	t.Run("ALostPartLetsGoOfThePartsAfterIt", func(t *testing.T) {
		parts, w, sc := chainOf(4, size, 7, 4*windowSlab) // one part
		fourth := sc.Sink(4)
		write(fourth, parts[3], 1<<16)
		fourth.Stored(shaHex(parts[3])) // held
		third := sc.Sink(3)
		write(third, parts[2], 1<<16) // no room, and nothing before it streams
		if !third.lost {
			t.Fatal("part 3 found room in a full window")
		}
		third.Stored(shaHex(parts[2]))
		if w.inUse != 0 {
			t.Fatalf("part 4, which can no longer be hashed, still holds %d slabs", w.inUse)
		}
		later := sc.Sink(4)
		write(later, parts[3][:10], 10)
		if !later.lost || w.inUse != 0 {
			t.Fatal("a part after the broken one kept bytes")
		}
		later.Stored(shaHex(parts[3]))
		for n := 1; n <= 3; n++ {
			s := sc.Sink(n)
			write(s, parts[n-1], 1<<16)
			s.Stored(shaHex(parts[n-1]))
		}
		if _, ok := sc.point(3); !ok {
			t.Fatal("part 3 sent again in turn was not hashed")
		}
		again := sc.Sink(4)
		write(again, parts[3], 1<<16)
		again.Stored(shaHex(parts[3]))
		if pt, ok := sc.point(4); !ok || !bytes.Equal(pt.state, stateOf(t, parts...)) {
			t.Fatal("the chain did not go on once the broken part was sent again")
		}
	})

	t.Run("APartS3DidNotTakeMakesNoPoint", func(t *testing.T) {
		parts, w, sc := chainOf(2, size, 4, 64*windowSlab)
		second := sc.Sink(2)
		write(second, parts[1], 1<<16)
		second.Dropped()
		first := sc.Sink(1)
		write(first, parts[0], 1<<16)
		first.Stored(shaHex(parts[0]))
		if _, ok := sc.point(2); ok {
			t.Fatal("a point after a part S3 did not take")
		}
		if w.inUse != 0 {
			t.Fatalf("%d slabs in use", w.inUse)
		}
	})

	// Only points that extend the recorded state, over parts recorded with
	// their SHA-256, move the running hash.
	t.Run("AdvanceTakesOnlyPointsThatMatchTheRecord", func(t *testing.T) {
		parts, _, sc := chainOf(3, size, 5, 64*windowSlab)
		for n := 1; n <= 3; n++ {
			s := sc.Sink(n)
			write(s, parts[n-1], 1<<16)
			s.Stored(shaHex(parts[n-1]))
		}
		recorded := map[int]string{1: shaHex(parts[0]), 2: "another part 2", 3: shaHex(parts[2])}
		lookup := func(from, to int) (map[int]string, error) { return recorded, nil }
		k, state, err := sc.Advance(0, nil, lookup)
		if err != nil || k != 1 || !bytes.Equal(state, stateOf(t, parts[0])) {
			t.Fatalf("advance over a part 2 recorded with other bytes: k %d err %v, want 1", k, err)
		}
		// A recorded state the points do not extend moves nothing.
		k, _, err = sc.Advance(1, stateOf(t, parts[1]), lookup)
		if err != nil || k != 1 {
			t.Fatalf("advance from a state no point extends: k %d err %v, want 1", k, err)
		}
	})
}
