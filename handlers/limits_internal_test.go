package handlers

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
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

// TestFailureCountsAreBoundedAndRefill: failures are counted without
// taking from a bucket that is empty; a bucket refills with time; and past
// max addresses the rest share one bucket, so however many addresses fail,
// the map stays bounded and they are still limited.
func TestFailureCountsAreBoundedAndRefill(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	r := newRateLimits(1, 2, func() time.Time { return now })
	r.max = 10
	if d := r.waitFor("a"); d != 0 {
		t.Fatalf("an address that never failed waits %v", d)
	}
	r.spend("a")
	r.spend("a")
	if d := r.waitFor("a"); d <= 0 || d > time.Second {
		t.Fatalf("after its burst, an address waits %v, want up to 1s", d)
	}
	r.spend("a") // spending from an empty bucket takes nothing more
	now = now.Add(time.Second)
	if d := r.waitFor("a"); d != 0 {
		t.Fatalf("a second later, it still waits %v", d)
	}
	for i := range 100 {
		r.spend(fmt.Sprintf("x%d", i))
		r.spend(fmt.Sprintf("x%d", i))
		if n := r.size(); n > r.max+1 {
			t.Fatalf("%d buckets, at most %d and the shared one", n, r.max)
		}
	}
	if d := r.waitFor("fresh"); d <= 0 {
		t.Fatal("an address past the bound is not limited by the shared bucket")
	}
	off := newRateLimits(0, 0, time.Now)
	off.spend("a")
	if d := off.waitFor("a"); d != 0 || off.size() != 0 {
		t.Fatalf("limits that are off wait %v and hold %d buckets", d, off.size())
	}
}

// TestClientAddress counts an IPv4 peer by its address and an IPv6 one by
// its /64, never by anything the client sends.
func TestClientAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7:5123":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:1":   "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"192.0.2.7":                  "192.0.2.7",
		"pipe":                       "pipe",
		"":                           "",
	} {
		if got := clientAddress(in); got != want {
			t.Errorf("clientAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzClientAddress: any peer address gives a key without a panic, the
// same with or without its port, and an IP address's key is an address or
// an IPv6 /64.
func FuzzClientAddress(f *testing.F) {
	for _, s := range []string{"192.0.2.7", "2001:db8::1", "::ffff:10.0.0.1", "fe80::1%eth0", "", "pipe", "[::1]"} {
		f.Add(s, uint16(443))
	}
	f.Fuzz(func(t *testing.T, host string, port uint16) {
		withPort := clientAddress(net.JoinHostPort(host, strconv.Itoa(int(port))))
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return // not an IP address: any key will do, without a panic
		}
		if alone := clientAddress(host); withPort != alone {
			t.Fatalf("%q gives %q with a port and %q without", host, withPort, alone)
		}
		if _, err := netip.ParsePrefix(withPort); err != nil && !ip.Unmap().Is4() {
			t.Fatalf("IPv6 %q gives %q, not its /64", host, withPort)
		}
		if strings.Contains(withPort, strconv.Itoa(int(port))+"]") {
			t.Fatalf("%q keeps its port: %q", host, withPort)
		}
	})
}
