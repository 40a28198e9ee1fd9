//go:build !linux

package storage

// newSlab makes a slab of the hash window on the Go heap (Linux maps them
// outside it).
func newSlab() []byte { return make([]byte, windowSlab) }

// freeSlab leaves the slab to the garbage collector.
func freeSlab([]byte) {}
