// Package hashwindow learns an upload's whole-content SHA-256 from its parts
// as they stream to S3, so complete need not read the assembled object
// back. SHA-256 cannot combine the hashes of parts: the content must pass
// through one hash in order. The store keeps that running hash between
// parts in Postgres (uploads.hashed_parts, hash_state: the state after the
// first hashed_parts parts). Parts sent in parallel arrive out of order, so
// each instance also keeps, per session (a Chain), a little in memory:
//
//   - points: the hash state after part k, with the state it extends (base)
//     and part k's SHA-256. A point is computed from the bytes of a part
//     that S3 took, by extending the point before it; it is a candidate,
//     never trusted by itself.
//   - parts that arrive ahead of the hash (no point yet for the part before
//     them) keep their bytes in memory while they stream to S3 (the Window,
//     bounded in bytes for the whole process). As soon as the point before
//     one appears, its bytes so far are hashed and the rest of it is hashed
//     as it streams; a part that ended before that is held until then and
//     hashed by whoever makes the point.
//   - when the window is full, a part ahead waits (a moment at most) while a
//     part before it in its session still streams: as the parts before it
//     end, each lets the next one hash as it streams, which frees its
//     memory. A part that still finds no room is not hashed here, and
//     neither is any part after it (their turn cannot come): the chain is
//     broken there until that part is sent again.
//
// The transaction that records a part locks the session's row and moves
// the running hash forward over the points that extend it exactly
// (Chain.Advance): a point for part k is taken only when its base is the
// state recorded for k-1 and its SHA-256 is that of the part recorded as k.
// So a candidate built over bytes that were replaced, or over a chain
// another instance changed, is never saved, and any instance can continue
// the running hash. A part replaced by other bytes after it was hashed
// resets it (the store's recordPart).
//
// Complete reads back only what the running hash (moved forward once more
// over this instance's points) does not cover: nothing when every part came
// through one instance within the window. A part beyond the window, or one
// whose predecessor went to another instance and whose own bytes are gone,
// is read back with everything after it.
//
// The package knows neither Postgres nor S3: the store hands it the
// recorded state and asks it to move that state forward.
package hashwindow

import (
	"sync"
	"time"
)

const (
	// windowSlab is the unit the window buffers in, so a part takes only
	// the memory its bytes so far need, and slabs are reused.
	windowSlab = 1 << 20
	// heldGrace is how long a part held for its turn is kept when memory
	// is short: one held longer is likely waiting for a part that is not
	// coming soon.
	heldGrace = 30 * time.Second
	// sessionIdle is how long an instance remembers a session nothing has
	// touched (another instance completed it, or its client went away).
	sessionIdle = 10 * time.Minute
	// slabWait bounds how long a part ahead waits for room in the window.
	slabWait = 2 * time.Second
	// slabLinger is how long free slabs outlive the last slab in use: the
	// parts of an upload come one after another, and a slab unmapped and
	// mapped again between two of them costs the kernel its pages again
	// (each zeroed on first touch), which was a third of the server's CPU
	// per GiB uploaded in parts.
	slabLinger = 5 * time.Second
)

// Window is the process's memory for parts ahead of the running hash, and
// its per-session chains: one per process, so the memory parts ahead may
// take is bounded for the whole process. It is safe for concurrent use.
type Window struct {
	budget int64 // bytes of slabs at most; 0: parts ahead of the hash are not kept

	mu        sync.Mutex
	allocated int64    // bytes of slabs made (in use or free)
	free      [][]byte // slabs to reuse
	inUse     int
	freed     chan struct{} // closed (and replaced) when slabs come back
	idle      *time.Timer   // unmaps the free slabs once none was in use for slabLinger
	sessions  map[string]*Chain
	swept     time.Time
}

// New is a window that keeps at most budget bytes of parts ahead of their
// running hash (0 or less: none are kept, and such parts are read back at
// complete).
func New(budget int64) *Window {
	return &Window{budget: max(budget, 0), sessions: map[string]*Chain{}, freed: make(chan struct{})}
}

// Chain returns the chain of upload session id, made on first use; each
// use keeps it from being forgotten as idle.
func (w *Window) Chain(id string) *Chain {
	w.mu.Lock()
	now := time.Now()
	var idle []*Chain
	if now.Sub(w.swept) > time.Minute {
		w.swept = now
		for k, sc := range w.sessions {
			if now.Sub(sc.touched()) > sessionIdle {
				delete(w.sessions, k)
				idle = append(idle, sc)
			}
		}
	}
	sc, ok := w.sessions[id]
	if !ok {
		sc = &Chain{w: w, points: map[int]chainPoint{0: {}}, held: map[int]*PartSink{}, streaming: map[int]int{}}
		w.sessions[id] = sc
	}
	sc.touch(now)
	w.mu.Unlock()
	for _, s := range idle {
		s.drop()
	}
	return sc
}

// Known returns the chain of a session this instance knows, or nil: a
// session none of whose parts came through here has nothing to add.
func (w *Window) Known(id string) *Chain {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions[id]
}

// Forget drops a session that ended (completed, failed, aborted, expired)
// and lets go of the bytes it held.
func (w *Window) Forget(id string) {
	w.mu.Lock()
	sc := w.sessions[id]
	delete(w.sessions, id)
	w.mu.Unlock()
	if sc != nil {
		sc.drop()
	}
}

// take returns a slab for part n of sc, or nil when the window is full even
// after parts held too long were let go, and after waiting a moment while a
// part before n streams (its end frees room).
func (w *Window) take(sc *Chain, n int) []byte {
	if b, _ := w.tryTake(); b != nil {
		return b
	}
	w.evictStale()
	deadline := time.NewTimer(slabWait)
	defer deadline.Stop()
	for {
		b, freed := w.tryTake()
		if b != nil || !sc.streamingBefore(n) {
			return b
		}
		select {
		case <-freed:
		case <-deadline.C:
			b, _ = w.tryTake()
			return b
		}
	}
}

// tryTake returns a slab, or nil and a channel closed when slabs come back.
func (w *Window) tryTake() ([]byte, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case len(w.free) > 0:
		b := w.free[len(w.free)-1]
		w.free = w.free[:len(w.free)-1]
		w.inUse++
		return b, nil
	case w.allocated+windowSlab <= w.budget:
		b := newSlab()
		if b == nil {
			return nil, w.freed
		}
		w.allocated += windowSlab
		w.inUse++
		return b, nil
	}
	return nil, w.freed
}

// give returns slabs. When none is in use any more, the free ones are
// unmapped slabLinger later unless one is taken meanwhile, so an idle
// server does not keep the window's memory, and a busy one does not map
// it again for every part.
func (w *Window) give(slabs [][]byte) {
	if len(slabs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inUse -= len(slabs)
	w.free = append(w.free, slabs...)
	if w.inUse == 0 {
		if w.idle == nil {
			w.idle = time.AfterFunc(slabLinger, w.trim)
		} else {
			w.idle.Reset(slabLinger)
		}
	}
	close(w.freed)
	w.freed = make(chan struct{})
}

// trim unmaps the free slabs when none is in use.
func (w *Window) trim() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inUse != 0 {
		return // the give that ends this use arms the timer again
	}
	for _, b := range w.free {
		freeSlab(b)
	}
	w.free, w.allocated = nil, 0
}

// wake tells parts waiting for room to look again.
func (w *Window) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.freed)
	w.freed = make(chan struct{})
}

// evictStale lets go of parts held longer than heldGrace.
func (w *Window) evictStale() {
	w.mu.Lock()
	chains := make([]*Chain, 0, len(w.sessions))
	for _, sc := range w.sessions {
		chains = append(chains, sc)
	}
	w.mu.Unlock()
	for _, sc := range chains {
		sc.evictHeld(time.Now().Add(-heldGrace))
	}
}
