package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// How an upload's whole-content SHA-256 is learned without reading the
// assembled object back. SHA-256 cannot combine the hashes of parts: the
// content must pass through one hash in order. Postgres keeps that running
// hash between parts (uploads.hashed_parts, hash_state): the state after
// the first hashed_parts parts. Parts sent in parallel arrive out of order,
// so each instance also keeps, per session, a little in memory:
//
//   - points: the hash state after part k, with the state it extends (base)
//     and part k's SHA-256. A point is computed from the bytes of a part
//     that S3 took, by extending the point before it; it is a candidate,
//     never trusted by itself.
//   - parts that arrive ahead of the hash (no point yet for the part before
//     them) keep their bytes in memory while they stream to S3 (the window,
//     bounded in bytes for the whole process, Config.UploadHashWindow). As
//     soon as the point before one appears, its bytes so far are hashed and
//     the rest of it is hashed as it streams; a part that ended before that
//     is held until then and hashed by whoever makes the point.
//   - when the window is full, a part ahead waits (a moment at most) while a
//     part before it in its session still streams: as the parts before it
//     end, each lets the next one hash as it streams, which frees its
//     memory. A
//     part that still finds no room is not hashed here, and neither is any
//     part after it (their turn cannot come): the chain is broken there
//     until that part is sent again.
//
// The transaction that records a part locks the session's row and moves
// the running hash forward over the points that extend it exactly: a point
// for part k is taken only when its base is the state recorded for k-1 and
// its SHA-256 is that of the part recorded as k. So a candidate built over
// bytes that were replaced, or over a chain another instance changed, is
// never saved, and any instance can continue the running hash. A part
// replaced by other bytes after it was hashed resets it (recordPart).
//
// Complete reads back only what the running hash (moved forward once more
// over this instance's points) does not cover: nothing when every part came
// through one instance within the window. A part beyond the window, or one
// whose predecessor went to another instance and whose own bytes are gone,
// is read back with everything after it.

// DefaultUploadHashWindow is Config.UploadHashWindow when zero: parts of a
// few sessions sending 4 at a time, well within the memory budget of 64 MiB.
const DefaultUploadHashWindow = 32 << 20

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
)

// hashWindow is the process's memory for parts ahead of the running hash,
// and its per-session chains.
type hashWindow struct {
	budget int64 // bytes of slabs at most; 0: parts ahead of the hash are not kept

	mu        sync.Mutex
	allocated int64    // bytes of slabs made (in use or free)
	free      [][]byte // slabs to reuse
	inUse     int
	freed     chan struct{} // closed (and replaced) when slabs come back
	sessions  map[string]*sessionChain
	swept     time.Time
}

func newHashWindow(budget int64) *hashWindow {
	return &hashWindow{budget: max(budget, 0), sessions: map[string]*sessionChain{}, freed: make(chan struct{})}
}

// session returns the chain of an upload session, made on first use.
func (w *hashWindow) session(id string) *sessionChain {
	w.mu.Lock()
	now := time.Now()
	var idle []*sessionChain
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
		sc = &sessionChain{w: w, points: map[int]chainPoint{0: {}}, held: map[int]*partSink{}, streaming: map[int]int{}}
		w.sessions[id] = sc
	}
	sc.touch(now)
	w.mu.Unlock()
	for _, s := range idle {
		s.drop()
	}
	return sc
}

// existing returns the chain of a session this instance knows, or nil.
func (w *hashWindow) existing(id string) *sessionChain {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions[id]
}

// forget drops a session that ended (completed, failed, aborted, expired).
func (w *hashWindow) forget(id string) {
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
func (w *hashWindow) take(sc *sessionChain, n int) []byte {
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
func (w *hashWindow) tryTake() ([]byte, <-chan struct{}) {
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
// unmapped, so an idle server does not keep the window's memory.
func (w *hashWindow) give(slabs [][]byte) {
	if len(slabs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inUse -= len(slabs)
	w.free = append(w.free, slabs...)
	if w.inUse == 0 {
		for _, b := range w.free {
			freeSlab(b)
		}
		w.free, w.allocated = nil, 0
	}
	close(w.freed)
	w.freed = make(chan struct{})
}

// wake tells parts waiting for room to look again.
func (w *hashWindow) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.freed)
	w.freed = make(chan struct{})
}

// evictStale lets go of parts held longer than heldGrace.
func (w *hashWindow) evictStale() {
	w.mu.Lock()
	chains := make([]*sessionChain, 0, len(w.sessions))
	for _, sc := range w.sessions {
		chains = append(chains, sc)
	}
	w.mu.Unlock()
	for _, sc := range chains {
		sc.evictHeld(time.Now().Add(-heldGrace))
	}
}

// chainPoint is the running hash's state after part k: state extends base
// (the state after k-1) by bytes whose SHA-256 is sha. A point learned from
// Postgres has no base and no sha: it is the recorded state itself.
type chainPoint struct {
	base, state []byte
	sha         string
}

// sessionChain is what an instance knows of one session's running hash.
type sessionChain struct {
	w *hashWindow

	mu       sync.Mutex
	points   map[int]chainPoint
	held     map[int]*partSink // parts that ended before the point before them appeared
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
func (sc *sessionChain) streamingBefore(n int) bool {
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
func (sc *sessionChain) hopeless(n int) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.broken != 0 && n > sc.broken
}

// breakAt records that S3 took part n without its being hashed here, and
// lets go of the parts after it held for their turn.
func (sc *sessionChain) breakAt(n int) {
	sc.mu.Lock()
	if sc.broken == 0 || n < sc.broken {
		sc.broken = n
	}
	var gone []*partSink
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

func (sc *sessionChain) touch(now time.Time) {
	sc.mu.Lock()
	sc.lastUsed = now
	sc.mu.Unlock()
}

func (sc *sessionChain) touched() time.Time {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.lastUsed
}

// point returns the point after part k, if known.
func (sc *sessionChain) point(k int) (chainPoint, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	pt, ok := sc.points[k]
	return pt, ok
}

// learn records the state Postgres holds after the first k parts (older
// points go: they are needed only if the hash is reset, and complete reads
// back then), and hashes a part held for it.
func (sc *sessionChain) learn(k int, state []byte) {
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
func (sc *sessionChain) set(k int, pt chainPoint) {
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
func (sc *sessionChain) hold(s *partSink) {
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
func (sc *sessionChain) evictHeld(cutoff time.Time) {
	sc.mu.Lock()
	var gone []*partSink
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
func (sc *sessionChain) drop() {
	sc.mu.Lock()
	held := sc.held
	sc.held = map[int]*partSink{}
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
func (sc *sessionChain) steps(k int, state []byte) []step {
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

// advance moves the running hash (after the first k parts, state) forward
// over this instance's points whose parts are recorded with the same
// SHA-256 (recorded gives the recorded SHA-256 of parts from..to), and
// returns where it ends.
func (sc *sessionChain) advance(k int, state []byte, recorded func(from, to int) (map[int]string, error)) (int, []byte, error) {
	sc.learn(k, state)
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

// partSink receives a part's bytes as they stream to S3 and extends the
// running hash with them: at once when the point before the part is known,
// else by keeping them (in the window) until it is. While the part streams
// only its request touches it; once held, only whoever took it from the
// session's held parts.
type partSink struct {
	sc     *sessionChain
	n      int
	h      hash.Hash // extends base, once the point before the part is known
	base   []byte
	slabs  [][]byte // bytes kept while the point is not known
	kept   int      // bytes in the last slab
	lost   bool     // the window had no room: this part is not hashed here
	sha    string   // the part's SHA-256, once S3 took it
	heldAt time.Time
}

// newPartSink is the sink of part n of sc, whose bytes are on their way;
// seal ends it.
func newPartSink(sc *sessionChain, n int) *partSink {
	sc.mu.Lock()
	sc.streaming[n]++
	sc.mu.Unlock()
	return &partSink{sc: sc, n: n}
}

// Write never fails: a part the window cannot keep is simply not hashed
// here (complete reads it back).
func (s *partSink) Write(p []byte) (int, error) {
	if s.lost {
		return len(p), nil
	}
	if s.h == nil {
		if pt, ok := s.sc.point(s.n - 1); ok {
			if err := s.extend(pt); err != nil {
				s.give()
				return len(p), nil
			}
		}
	}
	if s.h != nil {
		s.h.Write(p)
		return len(p), nil
	}
	if s.sc.hopeless(s.n) {
		s.give()
		return len(p), nil
	}
	s.keep(p)
	return len(p), nil
}

// ended takes the part out of those on their way, and tells the parts
// waiting for room to look again.
func (s *partSink) ended() {
	s.sc.mu.Lock()
	if s.sc.streaming[s.n]--; s.sc.streaming[s.n] <= 0 {
		delete(s.sc.streaming, s.n)
	}
	s.sc.mu.Unlock()
	s.sc.w.wake()
}

// give gives up hashing the part here.
func (s *partSink) give() {
	s.release()
	s.lost = true
}

// keep copies p into slabs of the window, or gives up on the part.
func (s *partSink) keep(p []byte) {
	for len(p) > 0 {
		if len(s.slabs) == 0 || s.kept == windowSlab {
			b := s.sc.w.take(s.sc, s.n)
			if b == nil {
				s.give()
				return
			}
			s.slabs, s.kept = append(s.slabs, b), 0
		}
		n := copy(s.slabs[len(s.slabs)-1][s.kept:], p)
		s.kept += n
		p = p[n:]
	}
}

// extend starts the part's hash from pt and hashes what was kept.
func (s *partSink) extend(pt chainPoint) error {
	h, err := restoreHash(pt.state)
	if err != nil {
		return err
	}
	for i, b := range s.slabs {
		if i == len(s.slabs)-1 {
			b = b[:s.kept]
		}
		h.Write(b)
	}
	s.sc.w.give(s.slabs)
	s.slabs, s.kept = nil, 0
	s.h, s.base = h, pt.state
	return nil
}

// after is the point after this part, once it is hashed.
func (s *partSink) after() chainPoint {
	state, err := s.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return chainPoint{} // no sha: never taken
	}
	return chainPoint{base: s.base, state: state, sha: s.sha}
}

// seal ends the part once S3 took it (ok) with SHA-256 sha: its point is
// recorded, or it is held for its turn. A part S3 did not take is dropped.
func (s *partSink) seal(ok bool, sha string) {
	defer s.ended() // after the point is set: a part waiting for room then finds the next one hashing
	if ok && s.lost {
		s.sc.breakAt(s.n)
	}
	if !ok || s.lost {
		s.release()
		return
	}
	s.sha = sha
	if s.h == nil {
		s.sc.hold(s)
		return
	}
	pt := s.after()
	s.release()
	s.sc.set(s.n, pt)
}

// release gives the part's slabs back.
func (s *partSink) release() {
	s.sc.w.give(s.slabs)
	s.slabs, s.kept = nil, 0
}

// restoreHash is a SHA-256 in the given state (a new one when empty).
func restoreHash(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if len(state) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("restore running hash: %w", err)
		}
	}
	return h, nil
}

// recordedSums returns the SHA-256 of the recorded parts from..to.
func recordedSums(ctx context.Context, q querier, id string) func(from, to int) (map[int]string, error) {
	return func(from, to int) (map[int]string, error) {
		rows, err := q.Query(ctx, `SELECT part_number, sha256 FROM upload_parts
			WHERE upload_id = $1 AND part_number BETWEEN $2 AND $3`, id, from, to)
		if err != nil {
			return nil, Translate(err)
		}
		out := map[int]string{}
		var (
			n   int
			sum string
		)
		_, err = pgx.ForEachRow(rows, []any{&n, &sum}, func() error { out[n] = sum; return nil })
		return out, Translate(err)
	}
}
