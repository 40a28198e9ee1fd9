package storage

import "syscall"

// newSlab maps a slab of the hash window outside the Go heap: the window's
// memory then counts once in the process's size, and does not raise the
// garbage collector's target for everything else (a live heap of N bytes
// lets garbage grow to about N more before a collection). nil when the
// kernel refuses.
func newSlab() []byte {
	b, err := syscall.Mmap(-1, 0, windowSlab, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// freeSlab unmaps a slab; nothing may touch it afterwards.
func freeSlab(b []byte) { _ = syscall.Munmap(b) }
