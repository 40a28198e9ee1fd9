package hashwindow

import (
	"crypto/sha256"
	"encoding"
	"fmt"
	"hash"
	"time"
)

// PartSink receives a part's bytes as they stream to S3 and extends the
// running hash with them: at once when the point before the part is known,
// else by keeping them (in the window) until it is. While the part streams
// only its request touches it; once held, only whoever took it from the
// session's held parts. Stored or Dropped ends it.
type PartSink struct {
	sc     *Chain
	n      int
	h      hash.Hash // extends base, once the point before the part is known
	base   []byte
	slabs  [][]byte // bytes kept while the point is not known
	kept   int      // bytes in the last slab
	lost   bool     // the window had no room: this part is not hashed here
	sha    string   // the part's SHA-256, once S3 took it
	heldAt time.Time
}

// Sink is the sink of part n of the session, whose bytes are on their way:
// every byte S3 reads of the part goes through it first.
func (sc *Chain) Sink(n int) *PartSink {
	sc.mu.Lock()
	sc.streaming[n]++
	sc.mu.Unlock()
	return &PartSink{sc: sc, n: n}
}

// Write never fails: a part the window cannot keep is simply not hashed
// here (complete reads it back).
func (s *PartSink) Write(p []byte) (int, error) {
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
func (s *PartSink) ended() {
	s.sc.mu.Lock()
	if s.sc.streaming[s.n]--; s.sc.streaming[s.n] <= 0 {
		delete(s.sc.streaming, s.n)
	}
	s.sc.mu.Unlock()
	s.sc.w.wake()
}

// give gives up hashing the part here.
func (s *PartSink) give() {
	s.release()
	s.lost = true
}

// keep copies p into slabs of the window, or gives up on the part.
func (s *PartSink) keep(p []byte) {
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
func (s *PartSink) extend(pt chainPoint) error {
	h, err := Restore(pt.state)
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
func (s *PartSink) after() chainPoint {
	state, err := s.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return chainPoint{} // no sha: never taken
	}
	return chainPoint{base: s.base, state: state, sha: s.sha}
}

// Stored ends the part once S3 took it, with SHA-256 sha: its point is
// made, or it is held for its turn.
func (s *PartSink) Stored(sha string) { s.seal(true, sha) }

// Dropped ends a part S3 did not take: it makes no point.
func (s *PartSink) Dropped() { s.seal(false, "") }

// seal ends the part once S3 took it (ok) with SHA-256 sha: its point is
// recorded, or it is held for its turn. A part S3 did not take is dropped.
func (s *PartSink) seal(ok bool, sha string) {
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
func (s *PartSink) release() {
	s.sc.w.give(s.slabs)
	s.slabs, s.kept = nil, 0
}

// Restore is a SHA-256 in the given state (a new one when empty): the
// running hash as the store recorded it, to be extended by the bytes it
// does not cover.
func Restore(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if len(state) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("restore running hash: %w", err)
		}
	}
	return h, nil
}
