// Package offheap gives byte buffers mapped outside the Go heap, for large
// buffers with a clear owner and end (a batch request's body, the slabs of
// the upload hash window). Such a buffer counts once in the process's
// size: on the heap, a live buffer of N bytes also lets garbage grow to
// about N more before the garbage collector runs, so the process grows by
// twice the buffer.
//
// The owner must Free a buffer once, after everything that points into it
// is gone: a read afterwards crashes the process.
package offheap

// Alloc returns a zeroed buffer of n bytes outside the Go heap, or one on
// the heap where the system has no such mapping (then Free leaves it to the
// garbage collector). ok is false when the system refused the mapping, and
// the buffer is nil.
func Alloc(n int) (b []byte, ok bool) {
	if n <= 0 {
		return []byte{}, true
	}
	return alloc(n)
}

// Free gives back a buffer Alloc returned; nothing may touch it
// afterwards.
func Free(b []byte) {
	if cap(b) > 0 {
		free(b[:cap(b)])
	}
}
