package main

import (
	"bytes"
	"io"
	"math/rand/v2"
)

// payload is the bytes every measurement sends: one buffer of
// deterministic pseudo-random bytes, filled once before anything is timed.
// Both sides of a comparison send slices of this very buffer, so neither
// pays for making its bytes (a generator on the client would take CPU from
// the two shared cores, and more of it from the faster side) and both send
// the same bytes.
type payload struct{ buf []byte }

// newPayload fills size bytes (at least 1 MiB).
func newPayload(size int64) *payload {
	b := make([]byte, max(size, 1<<20))
	r := rand.NewChaCha8([32]byte{'a', 'g', 'e', 'n', 't', 'f', 's'})
	_, _ = r.Read(b)
	return &payload{buf: b}
}

// bytes returns n bytes of the buffer, a slice of it (not a copy), starting
// near off: at off modulo the buffer's length, moved back when the rest of
// the buffer is shorter than n. n must not exceed the buffer.
func (p *payload) bytes(off, n int64) []byte {
	l := int64(len(p.buf))
	start := off % l
	if start+n > l {
		start = l - n
	}
	return p.buf[start : start+n : start+n]
}

// reader yields n bytes: one bytes.Reader over the buffer when n fits in
// it, else the buffer again and again (no copies either way).
func (p *payload) reader(off, n int64) io.Reader {
	l := int64(len(p.buf))
	if n <= l {
		return bytes.NewReader(p.bytes(off, n))
	}
	var rs []io.Reader
	for left := n; left > 0; left -= l {
		rs = append(rs, bytes.NewReader(p.buf[:min(left, l)]))
	}
	return io.MultiReader(rs...)
}

// text returns n bytes of lowercase ASCII derived from the buffer at off,
// as a new slice, for utf8 batch items and MCP writes (made before the
// clock starts).
func (p *payload) text(off, n int64) []byte {
	b := bytes.Clone(p.bytes(off, n))
	for i, c := range b {
		b[i] = 'a' + c%26
	}
	return b
}

// readBufferSize is the buffer both sides of a download read into: large
// enough that the reads are not the bottleneck, and the same on both sides.
const readBufferSize = 1 << 20

// drain reads r to the end, as io.Copy to io.Discard would, into buf.
func drain(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
