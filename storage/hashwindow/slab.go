package hashwindow

import "github.com/agentfs/agentfs/offheap"

// newSlab makes a slab of the window outside the Go heap (package
// offheap): the window's memory then counts once in the process's size,
// and does not raise the garbage collector's target for everything else.
// nil when the kernel refuses.
func newSlab() []byte {
	b, _ := offheap.Alloc(windowSlab)
	return b
}

// freeSlab unmaps a slab; nothing may touch it afterwards.
func freeSlab(b []byte) { offheap.Free(b) }
