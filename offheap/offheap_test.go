package offheap_test

import (
	"testing"

	"github.com/agentfs/agentfs/offheap"
)

func TestAllocGivesAZeroedWritableBuffer(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 4096, 3<<20 + 7} {
		b, ok := offheap.Alloc(n)
		if !ok || len(b) != n {
			t.Fatalf("Alloc(%d): %d bytes, %v", n, len(b), ok)
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Alloc(%d): byte %d is %d", n, i, b[i])
			}
			b[i] = byte(i)
		}
		for i := range b {
			if b[i] != byte(i) {
				t.Fatalf("Alloc(%d): byte %d did not keep its value", n, i)
			}
		}
		offheap.Free(b)
	}
}
