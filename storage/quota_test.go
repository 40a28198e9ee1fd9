package storage_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestReserveQuota(t *testing.T) {
	store, _ := setup(t)
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0).UTC()
	reserve := func(subject string, want int64, partial bool) (got, used int64) {
		t.Helper()
		got, used, err := store.ReserveQuota(ctx, subject, start, want, 100, partial)
		if err != nil {
			t.Fatal(err)
		}
		return got, used
	}

	t.Run("TakesWhatFits", func(t *testing.T) {
		if got, used := reserve("a", 60, false); got != 60 || used != 60 {
			t.Fatalf("got %d used %d, want 60 60", got, used)
		}
		if got, used := reserve("a", 50, false); got != 0 || used != 60 {
			t.Fatalf("a reservation that does not fit: got %d used %d, want 0 60", got, used)
		}
		if got, used := reserve("a", 50, true); got != 40 || used != 100 {
			t.Fatalf("a partial reservation: got %d used %d, want what is left (40) and 100", got, used)
		}
		if got, _ := reserve("a", 1, true); got != 0 {
			t.Fatalf("a full window gave %d more", got)
		}
		if got, _ := reserve("b", 100, false); got != 100 {
			t.Fatalf("another subject's window is its own: got %d", got)
		}
	})

	t.Run("ReleaseGivesBack", func(t *testing.T) {
		reserve("c", 100, false)
		if err := store.ReleaseQuota(ctx, "c", start, 30); err != nil {
			t.Fatal(err)
		}
		if got, used := reserve("c", 30, false); got != 30 || used != 100 {
			t.Fatalf("after a release of 30: got %d used %d", got, used)
		}
		if err := store.ReleaseQuota(ctx, "c", start, 1000); err != nil {
			t.Fatal(err)
		}
		if got, used := reserve("c", 100, false); got != 100 || used != 100 {
			t.Fatalf("a release of more than was held leaves the window empty, not negative: got %d used %d", got, used)
		}
	})

	// ConcurrentReservationsNeverExceedTheQuota races many reservations,
	// whole and partial, at one window: together they take exactly the
	// quota, never more.
	t.Run("ConcurrentReservationsNeverExceedTheQuota", func(t *testing.T) {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int64
		)
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, _, err := store.ReserveQuota(ctx, "d", start, 7, 100, i%2 == 0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += got
				mu.Unlock()
			}()
		}
		wg.Wait()
		// The partial ones alone ask for 140, so the window ends full.
		if total != 100 {
			t.Fatalf("concurrent reservations took %d bytes of a quota of 100, want exactly 100", total)
		}
		if _, used := reserve("d", 0, false); used != total {
			t.Fatalf("the window holds %d, the reservations took %d", used, total)
		}
	})
}
