package agentfs_test

import (
	"errors"
	"testing"

	"github.com/agentfs/agentfs"
)

func TestPlanParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, preferred, wantSize int64
		wantCount                 int
	}{
		{1, 8 << 20, 8 << 20, 1},
		{8 << 20, 8 << 20, 8 << 20, 1},
		{8<<20 + 1, 8 << 20, 8 << 20, 2},
		{21 << 20, 5 << 20, 5 << 20, 5},
		{10 << 20, 1 << 20, 5 << 20, 2}, // never below 5 MiB
		{10000 * (8 << 20), 8 << 20, 8 << 20, 10000},
		{10000*(8<<20) + 1, 8 << 20, 9 << 20, 8889}, // grows in whole MiB
		{5 << 40, 8 << 20, 525 << 20, 9987},         // 5 TiB
	} {
		size, count := agentfs.PlanParts(tc.size, tc.preferred)
		if size != tc.wantSize || count != tc.wantCount {
			t.Errorf("PlanParts(%d, %d) = %d, %d; want %d, %d", tc.size, tc.preferred, size, count, tc.wantSize, tc.wantCount)
		}
	}
}

func TestPartSizeOf(t *testing.T) {
	t.Parallel()
	u := &agentfs.Upload{SizeBytes: 21 << 20, PartSize: 5 << 20, PartCount: 5}
	for n, want := range map[int]int64{1: 5 << 20, 4: 5 << 20, 5: 1 << 20} {
		if got, err := u.PartSizeOf(n); err != nil || got != want {
			t.Errorf("part %d: %d %v, want %d", n, got, err, want)
		}
	}
	for _, n := range []int{0, -1, 6} {
		if _, err := u.PartSizeOf(n); !errors.Is(err, agentfs.ErrPartOutOfRange) {
			t.Errorf("part %d: %v, want ErrPartOutOfRange", n, err)
		}
	}
	u.Parts = []agentfs.Part{{Number: 2}, {Number: 5}}
	if got := u.MissingParts(); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 4 {
		t.Errorf("MissingParts %v", got)
	}
}

// FuzzPartPlan checks that every plan respects S3's limits and that the
// exact part sizes add up to the file, whatever the size and part number.
func FuzzPartPlan(f *testing.F) {
	f.Add(int64(1), int64(8<<20), 1)
	f.Add(int64(21<<20), int64(5<<20), 5)
	f.Add(int64(5<<40), int64(8<<20), 10000)
	f.Add(int64(10000*(8<<20)+1), int64(0), 0)
	f.Fuzz(func(t *testing.T, size, preferred int64, n int) {
		if size < 1 || size > 5<<40 || preferred < 0 || preferred > 5<<30 {
			return
		}
		partSize, count := agentfs.PlanParts(size, preferred)
		if partSize < agentfs.MinPartSize || count < 1 || count > agentfs.MaxParts {
			t.Fatalf("PlanParts(%d, %d) = %d, %d breaks the limits", size, preferred, partSize, count)
		}
		if int64(count-1)*partSize >= size || int64(count)*partSize < size {
			t.Fatalf("PlanParts(%d, %d) = %d x %d does not fit the size", size, preferred, partSize, count)
		}
		u := &agentfs.Upload{SizeBytes: size, PartSize: partSize, PartCount: count}
		got, err := u.PartSizeOf(n)
		if n < 1 || n > count {
			if !errors.Is(err, agentfs.ErrPartOutOfRange) {
				t.Fatalf("part %d of %d accepted", n, count)
			}
			return
		}
		last, _ := u.PartSizeOf(count)
		if err != nil || got < 1 || got > partSize || int64(count-1)*partSize+last != size {
			t.Fatalf("part %d of %d: %d %v (last %d)", n, count, got, err, last)
		}
	})
}
