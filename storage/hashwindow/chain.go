package hashwindow

import (
	"bytes"
	"sync"
	"time"
)

// chainPoint is the running hash's state after part k: state extends base
// (the state after k-1) by bytes whose SHA-256 is sha. A point learned from
// Postgres has no base and no sha: it is the recorded state itself.
type chainPoint struct {
	base, state []byte
	sha         string
}

// Chain is what an instance knows of one upload session's running hash:
// the points its parts made, and the parts held for their turn. It is safe
// for concurrent use.
type Chain struct {
	w *Window

	mu       sync.Mutex
	points   map[int]chainPoint
	held     map[int]*PartSink // parts that ended before the point before them appeared
	lastUsed time.Time
	// streaming counts the sinks of each part number whose bytes are on
	// their way.
	streaming map[int]int
	// broken is the first part S3 took that was not hashed here (0: none):
	// no part after it can be, until it is sent again.
	broken int
}

// streamingBefore reports whether a part before n is on its way: when it
// ends, the part after it can hash as it streams, and so on up to n.
func (sc *Chain) streamingBefore(n int) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for k := range sc.streaming {
		if k < n {
			return true
		}
	}
	return false
}

// hopeless reports whether part n cannot be hashed here: a part before it
// was not.
func (sc *Chain) hopeless(n int) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.broken != 0 && n > sc.broken
}

// breakAt records that S3 took part n without its being hashed here, and
// lets go of the parts after it held for their turn.
func (sc *Chain) breakAt(n int) {
	sc.mu.Lock()
	if sc.broken == 0 || n < sc.broken {
		sc.broken = n
	}
	var gone []*PartSink
	for k, s := range sc.held {
		if k > n {
			delete(sc.held, k)
			gone = append(gone, s)
		}
	}
	sc.mu.Unlock()
	for _, s := range gone {
		s.release()
	}
}

func (sc *Chain) touch(now time.Time) {
	sc.mu.Lock()
	sc.lastUsed = now
	sc.mu.Unlock()
}

func (sc *Chain) touched() time.Time {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.lastUsed
}

// point returns the point after part k, if known.
func (sc *Chain) point(k int) (chainPoint, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	pt, ok := sc.points[k]
	return pt, ok
}

// Learn records the state the store holds after the first k parts (older
// points go: they are needed only if the hash is reset, and complete reads
// back then), and hashes a part held for it.
func (sc *Chain) Learn(k int, state []byte) {
	sc.mu.Lock()
	for n := range sc.points {
		if n < k {
			delete(sc.points, n)
		}
	}
	if pt, ok := sc.points[k]; ok && bytes.Equal(pt.state, state) {
		sc.mu.Unlock()
		return
	}
	sc.mu.Unlock()
	sc.set(k, chainPoint{state: state})
}

// set records the point after part k, then hashes the part held for it,
// and so on down the line.
func (sc *Chain) set(k int, pt chainPoint) {
	for {
		if k > 0 && len(pt.state) == 0 {
			return // no state to go on from (a hash that would not marshal)
		}
		sc.mu.Lock()
		sc.points[k] = pt
		if k == sc.broken {
			sc.broken = 0 // sent again, and hashed
		}
		next := sc.held[k+1]
		delete(sc.held, k+1)
		sc.mu.Unlock()
		if next == nil {
			return
		}
		if err := next.extend(pt); err != nil {
			next.release()
			return
		}
		k, pt = k+1, next.after()
		next.release()
	}
}

// hold keeps a part that ended before the point before it appeared, or
// hashes it now if that point came meanwhile.
func (sc *Chain) hold(s *PartSink) {
	sc.mu.Lock()
	pt, ok := sc.points[s.n-1]
	if !ok {
		if old := sc.held[s.n]; old != nil {
			defer old.release() // an earlier copy of the part
		}
		s.heldAt = time.Now()
		sc.held[s.n] = s
		sc.mu.Unlock()
		return
	}
	sc.mu.Unlock()
	if err := s.extend(pt); err != nil {
		s.release()
		return
	}
	after := s.after()
	s.release()
	sc.set(s.n, after)
}

// evictHeld lets go of parts held since before cutoff.
func (sc *Chain) evictHeld(cutoff time.Time) {
	sc.mu.Lock()
	var gone []*PartSink
	for n, s := range sc.held {
		if s.heldAt.Before(cutoff) {
			delete(sc.held, n)
			gone = append(gone, s)
		}
	}
	sc.mu.Unlock()
	for _, s := range gone {
		s.release()
	}
}

// drop lets go of everything held.
func (sc *Chain) drop() {
	sc.mu.Lock()
	held := sc.held
	sc.held = map[int]*PartSink{}
	sc.mu.Unlock()
	for _, s := range held {
		s.release()
	}
}

// step is a point that moves the running hash from part k-1 to part k.
type step struct {
	k   int
	sha string
	pt  chainPoint
}

// steps returns the points that extend the state after part k, one after
// the other, as far as they go.
func (sc *Chain) steps(k int, state []byte) []step {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []step
	for {
		pt, ok := sc.points[k+1]
		if !ok || pt.sha == "" || !bytes.Equal(pt.base, state) {
			return out
		}
		k, state = k+1, pt.state
		out = append(out, step{k: k, sha: pt.sha, pt: pt})
	}
}

// Advance moves the running hash (after the first k parts, state) forward
// over this instance's points whose parts are recorded with the same
// SHA-256 (recorded gives the recorded SHA-256 of parts from..to), and
// returns where it ends. It is how a point, a candidate, becomes the
// recorded state: only a point that extends the recorded state, over the
// bytes of the part recorded as its number, is taken.
func (sc *Chain) Advance(k int, state []byte, recorded func(from, to int) (map[int]string, error)) (int, []byte, error) {
	sc.Learn(k, state)
	steps := sc.steps(k, state)
	if len(steps) == 0 {
		return k, state, nil
	}
	shas, err := recorded(steps[0].k, steps[len(steps)-1].k)
	if err != nil {
		return 0, nil, err
	}
	for _, st := range steps {
		if shas[st.k] != st.sha {
			break
		}
		k, state = st.k, st.pt.state
	}
	return k, state, nil
}
