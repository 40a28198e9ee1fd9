// Package tokencache remembers bearer tokens an instance looked up, for a
// short while, and forgets one as soon as it changes on any instance. Every
// request authenticates, and on a small upload the token lookup is one of
// three Postgres round trips; the store asks the cache first.
//
//   - A trigger on tokens notifies a channel with the token's hex SHA-256
//     whenever a row is inserted, updated or deleted (create, revoke, or an
//     operator's own SQL), and with an empty payload on TRUNCATE; the
//     notification is sent when that transaction commits. The cache
//     follows that channel (it is a pgnotify.Follower): Notified forgets.
//   - It keeps entries only while the connection listens: when the
//     connection is lost, notifications may go by unheard, so it forgets
//     everything and keeps nothing until it listens again.
//   - A lookup that was under way when an invalidation arrived is not kept
//     (a generation number, from Begin, says so): it may have read the row
//     before the change committed.
//   - Entries live at most a TTL, a backstop for a connection that died
//     without a word (the listener's heartbeat finds those within seconds),
//     and never past the token's expiry; there are at most a bounded
//     number of them.
//
// Tokens that do not authenticate (unknown or revoked) are remembered too,
// by the same rules and for the same TTL, in a map of their own with its
// own bound: a client that keeps sending a wrong token costs Postgres one
// lookup per TTL instead of one per request. A token created (or revoked
// and restored by hand) after it was refused is forgotten by the insert's
// or the update's notification, like any change, so it is taken as soon as
// that commits. Tokens guessed at random each cost one lookup still; the
// HTTP door limits the failures per client address for those.
package tokencache

import (
	"encoding/hex"
	"sync"
	"time"

	"github.com/agentfs/agentfs"
)

type tokenEntry struct {
	p     agentfs.Principal
	until time.Time
}

// Cache remembers principals by their token's SHA-256. It is safe for
// concurrent use.
type Cache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu        sync.Mutex
	entries   map[[32]byte]tokenEntry
	refused   map[[32]byte]time.Time // tokens that did not authenticate, until when
	gen       uint64                 // bumped by every invalidation
	listening bool                   // the notifications of the tokens' channel reach this cache
}

// New is a cache that trusts an entry for ttl at most and holds at most
// max tokens of each kind (taken and refused), on the clock now. It keeps
// nothing until it is told it listens (Listening(true)).
func New(ttl time.Duration, max int, now func() time.Time) *Cache {
	return &Cache{ttl: ttl, max: max, now: now, entries: map[[32]byte]tokenEntry{}, refused: map[[32]byte]time.Time{}}
}

// Get returns the principal of a token remembered and still fresh.
func (c *Cache) Get(sum [32]byte) (agentfs.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sum]
	if !ok || !c.listening {
		return agentfs.Principal{}, false
	}
	if !c.now().Before(e.until) {
		delete(c.entries, sum)
		return agentfs.Principal{}, false
	}
	return e.p, true
}

// Refused reports whether the token was refused lately and nothing
// about it changed since.
func (c *Cache) Refused(sum [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.refused[sum]
	if !ok || !c.listening {
		return false
	}
	if !c.now().Before(until) {
		delete(c.refused, sum)
		return false
	}
	return true
}

// Begin is called before a lookup: gen is to be handed to Put or Refuse,
// and ok says whether the answer may be kept at all.
func (c *Cache) Begin() (gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.listening
}

// Put keeps a principal looked up since Begin returned gen, unless an
// invalidation or a lost connection came in between.
func (c *Cache) Put(sum [32]byte, p agentfs.Principal, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.listening {
		return
	}
	if len(c.entries) >= c.max {
		c.evictLocked()
	}
	p.Grant = p.Grant.Clone()
	until := c.now().Add(c.ttl)
	if at := p.Grant.ExpiresAt; at != nil && at.Before(until) {
		until = *at // never trusted past its expiry
	}
	c.entries[sum] = tokenEntry{p: p, until: until}
}

// Refuse remembers a token that did not authenticate in a lookup made
// since Begin returned gen, unless an invalidation or a lost connection came
// in between.
func (c *Cache) Refuse(sum [32]byte, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.listening {
		return
	}
	if len(c.refused) >= c.max {
		now := c.now()
		for k, until := range c.refused {
			if !now.Before(until) || len(c.refused) >= c.max-c.max/10 {
				delete(c.refused, k)
			}
		}
	}
	c.refused[sum] = c.now().Add(c.ttl)
}

// evictLocked makes room: the stale entries go, and if that is not enough,
// any (the map's order is random) until a tenth of the room is free.
func (c *Cache) evictLocked() {
	now := c.now()
	for k, e := range c.entries {
		if !now.Before(e.until) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < c.max-c.max/10 {
			break
		}
		delete(c.entries, k)
	}
}

// Notified forgets the token whose hex SHA-256 is payload, or every token
// when payload is not one: a notification of the tokens' channel.
func (c *Cache) Notified(payload string) {
	var sum [32]byte
	// Only a payload of a hash's length is decoded: hex.Decode writes past
	// sum for a longer one.
	if len(payload) == hex.EncodedLen(len(sum)) {
		if _, err := hex.Decode(sum[:], []byte(payload)); err == nil {
			c.forget(sum)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
	clear(c.refused)
}

// forget forgets one token.
func (c *Cache) forget(sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.entries, sum)
	delete(c.refused, sum)
}

// Listening records whether notifications reach the cache; every change
// forgets everything, since some may have gone by unheard.
func (c *Cache) Listening(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.listening = on
	clear(c.entries)
	clear(c.refused)
}

// size is how many tokens are remembered, taken and refused.
func (c *Cache) size() (taken, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), len(c.refused)
}
