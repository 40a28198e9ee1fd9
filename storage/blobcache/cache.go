// Package blobcache keeps the bytes of small blobs in memory, so that a
// read of a small file answers without a round trip to S3. A blob never
// changes once written (its key is new for every write, and is never
// derived from a path), so an entry is correct for as long as it is kept:
// there is nothing to invalidate, only memory to bound.
//
// The cache is keyed by blob key alone. It knows no subject, path or
// grant: it sits below the read gate, which decides who may learn a key
// (a file row the caller may see, a share link's secret), exactly as it
// does before a read reaches S3.
//
// It holds at most Max bytes of blob content, in entries of at most
// MaxObject bytes each, and evicts the least recently used entry first.
// The bound counts the content only; each entry's bookkeeping adds about
// a hundred bytes more.
package blobcache

import (
	"container/list"
	"sync"
)

// Cache is a bounded LRU of blob bytes by key. It is safe for concurrent
// use. The zero Cache and a nil *Cache keep nothing.
type Cache struct {
	max, maxObject int64

	mu    sync.Mutex
	order *list.List // of *entry, most recently used first
	byKey map[string]*list.Element
	size  int64

	hits, misses, evictions, fills int64
}

type entry struct {
	key string
	b   []byte
}

// New is a cache of at most max bytes of content, in entries of at most
// maxObject bytes (larger blobs are never kept). max <= 0 is nil: no cache.
func New(max, maxObject int64) *Cache {
	if max <= 0 || maxObject <= 0 {
		return nil
	}
	return &Cache{max: max, maxObject: min(maxObject, max), order: list.New(), byKey: map[string]*list.Element{}}
}

// Fits reports whether a blob of size bytes may be kept.
func (c *Cache) Fits(size int64) bool {
	return c != nil && size >= 0 && size <= c.maxObject
}

// Get returns the bytes of key when kept (counted as a hit), else nil,
// false (a miss). The bytes are shared: the caller must not change them.
func (c *Cache) Get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(el)
	return el.Value.(*entry).b, true
}

// Put keeps b as the bytes of key, evicting the least recently used
// entries until the bound holds. b must not change afterwards. A blob
// larger than the object bound is not kept; a key kept already keeps its
// bytes (they are the same bytes).
func (c *Cache) Put(key string, b []byte) {
	if c == nil || !c.Fits(int64(len(b))) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	for c.size+int64(len(b)) > c.max {
		c.evictOldest()
	}
	c.byKey[key] = c.order.PushFront(&entry{key: key, b: b})
	c.size += int64(len(b))
	c.fills++
}

// Remove forgets key (a blob that was removed).
func (c *Cache) Remove(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.drop(el)
	}
}

func (c *Cache) evictOldest() {
	if el := c.order.Back(); el != nil {
		c.drop(el)
		c.evictions++
	}
}

func (c *Cache) drop(el *list.Element) {
	e := c.order.Remove(el).(*entry)
	delete(c.byKey, e.key)
	c.size -= int64(len(e.b))
}

// Stats are a cache's running totals and current size.
type Stats struct {
	// Hits and Misses count Get's answers; Fills the entries kept;
	// Evictions the entries dropped to make room.
	Hits, Misses, Fills, Evictions int64
	// Bytes is the content kept now, in Entries entries; Max and MaxObject
	// are the bounds (0 for no cache).
	Bytes, Entries, Max, MaxObject int64
}

// Stats returns the totals so far (all zero for no cache).
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits, Misses: c.misses, Fills: c.fills, Evictions: c.evictions,
		Bytes: c.size, Entries: int64(len(c.byKey)), Max: c.max, MaxObject: c.maxObject}
}
