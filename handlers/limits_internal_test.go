package handlers

import (
	"fmt"
	"testing"
	"time"
)

// TestRateLimitersOfIdleSubjectsAreDropped gives a thousand subjects one
// request each; once their buckets have filled again, the next request
// sweeps them, so the map holds only the subjects active lately.
func TestRateLimitersOfIdleSubjectsAreDropped(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	r := newRateLimits(10, 20, func() time.Time { return now })
	for i := 0; i < 1000; i++ {
		if d := r.reserve(fmt.Sprintf("s%d", i), 1); d != 0 {
			t.Fatalf("the first request of a subject waits %v", d)
		}
	}
	if n := r.size(); n != 1000 {
		t.Fatalf("%d buckets, want 1000 while they are in use", n)
	}
	now = now.Add(r.fillTime() + time.Second)
	r.reserve("active", 1)
	if n := r.size(); n != 1 {
		t.Fatalf("%d buckets after every idle one filled up, want 1 (the active subject)", n)
	}
}

// TestRateLimitStillBites makes sure sweeping does not forget a subject that
// is over its rate.
func TestRateLimitStillBites(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	r := newRateLimits(1, 2, func() time.Time { return now })
	r.reserve("s", 1)
	r.reserve("s", 1)
	now = now.Add(r.fillTime() / 2) // a sweep runs, but the bucket is not full
	r.swept = time.Time{}
	for i := 0; i < 100; i++ {
		r.reserve("s", 1)
	}
	if d := r.reserve("s", 1); d <= 0 {
		t.Fatal("a subject over its rate was let through")
	}
}
