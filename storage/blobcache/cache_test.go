package blobcache

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestGetPutAndBounds(t *testing.T) {
	c := New(100, 40)
	if _, ok := c.Get("a"); ok {
		t.Fatal("empty cache answered")
	}
	c.Put("a", bytes.Repeat([]byte("a"), 40))
	c.Put("big", bytes.Repeat([]byte("b"), 41)) // over the object bound: not kept
	if _, ok := c.Get("big"); ok {
		t.Fatal("a blob over the object bound was kept")
	}
	b, ok := c.Get("a")
	if !ok || !bytes.Equal(b, bytes.Repeat([]byte("a"), 40)) {
		t.Fatalf("Get(a) = %q, %v", b, ok)
	}
	c.Put("b", bytes.Repeat([]byte("b"), 40))
	c.Get("a") // a is now the most recently used
	c.Put("c", bytes.Repeat([]byte("c"), 40))
	// 120 > 100: the least recently used (b) goes.
	if _, ok := c.Get("b"); ok {
		t.Fatal("b should have been evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("%s was evicted, b was older", k)
		}
	}
	s := c.Stats()
	want := Stats{Hits: 4, Misses: 3, Fills: 3, Evictions: 1, Bytes: 80, Entries: 2, Max: 100, MaxObject: 40}
	if s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
	c.Remove("a")
	if s := c.Stats(); s.Bytes != 40 || s.Entries != 1 {
		t.Fatalf("after Remove: %+v", s)
	}
}

func TestNoCache(t *testing.T) {
	for _, c := range []*Cache{New(0, 10), New(10, 0), New(-1, 10), nil} {
		c.Put("a", []byte("x"))
		if _, ok := c.Get("a"); ok || c.Fits(1) {
			t.Fatal("a disabled cache kept something")
		}
		if c.Stats() != (Stats{}) {
			t.Fatalf("a disabled cache counts: %+v", c.Stats())
		}
		c.Remove("a")
	}
}

// The bound holds under concurrent fills of many sizes.
func TestBoundUnderConcurrency(t *testing.T) {
	const max = 10_000
	c := New(max, 1000)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				k := fmt.Sprintf("k%d", (g*7919+i)%700)
				if b, ok := c.Get(k); ok && (len(b) == 0 || b[0] != k[1]) {
					t.Errorf("%s holds the wrong bytes", k)
				}
				c.Put(k, bytes.Repeat([]byte{k[1]}, 1+(i*37)%1000))
				if s := c.Stats(); s.Bytes > max {
					t.Errorf("cache holds %d bytes, over %d", s.Bytes, max)
				}
			}
		}(g)
	}
	wg.Wait()
	s := c.Stats()
	if s.Bytes > max || s.Evictions == 0 {
		t.Fatalf("stats %+v: over the bound or never evicted", s)
	}
}
