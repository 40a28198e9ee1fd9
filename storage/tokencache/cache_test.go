package tokencache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func sumOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func newListeningCache(ttl time.Duration, max int) (*Cache, *clock) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(ttl, max, clk.now)
	c.Listening(true)
	return c, clk
}

func keep(c *Cache, tok, subject string) {
	gen, ok := c.Begin()
	if ok {
		c.Put(sumOf(tok), agentfs.Principal{Subject: subject, Grant: agentfs.Grant{Scopes: []string{"read"}}}, gen)
	}
}

func TestTokenCacheRules(t *testing.T) {
	t.Run("KeepsALookupForItsTTL", func(t *testing.T) {
		c, clk := newListeningCache(10*time.Second, 10)
		keep(c, "a", "alice")
		clk.t = clk.t.Add(9 * time.Second)
		if p, ok := c.Get(sumOf("a")); !ok || p.Subject != "alice" {
			t.Fatalf("within the TTL: %+v %v", p, ok)
		}
		clk.t = clk.t.Add(time.Second)
		if _, ok := c.Get(sumOf("a")); ok {
			t.Fatal("answered past the TTL")
		}
	})

	t.Run("KeepsNothingWhileNotListening", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		keep(c, "a", "alice")
		c.Listening(false)
		if _, ok := c.Get(sumOf("a")); ok {
			t.Fatal("answered after the connection was lost")
		}
		if _, ok := c.Begin(); ok {
			t.Fatal("a lookup may be kept while not listening")
		}
		keep(c, "b", "bob")
		c.Listening(true)
		if _, ok := c.Get(sumOf("b")); ok {
			t.Fatal("kept a lookup made while not listening")
		}
	})

	// A lookup that read the row before a revocation committed, and came
	// back after its notification, must not be kept.
	t.Run("DropsALookupThatAnInvalidationOvertook", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		gen, ok := c.Begin()
		if !ok {
			t.Fatal("not listening")
		}
		c.Notified(hex.EncodeToString(func() []byte { s := sumOf("other"); return s[:] }()))
		c.Put(sumOf("a"), agentfs.Principal{Subject: "alice"}, gen)
		if _, ok := c.Get(sumOf("a")); ok {
			t.Fatal("kept a lookup an invalidation overtook")
		}
		// A lost connection in between drops it too.
		gen, _ = c.Begin()
		c.Listening(false)
		c.Listening(true)
		c.Put(sumOf("a"), agentfs.Principal{Subject: "alice"}, gen)
		if _, ok := c.Get(sumOf("a")); ok {
			t.Fatal("kept a lookup a reconnection overtook")
		}
	})

	t.Run("InvalidatesOneTokenOrAll", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		keep(c, "a", "alice")
		keep(c, "b", "bob")
		sum := sumOf("a")
		c.Notified(hex.EncodeToString(sum[:]))
		if _, ok := c.Get(sumOf("a")); ok {
			t.Fatal("the invalidated token is still answered")
		}
		if _, ok := c.Get(sumOf("b")); !ok {
			t.Fatal("another token was forgotten")
		}
		for _, payload := range []string{"", "zz", "abcd"} {
			keep(c, "b", "bob")
			c.Notified(payload)
			if taken, _ := c.size(); taken != 0 {
				t.Fatalf("payload %q left %d tokens; a payload that names no token must forget all", payload, taken)
			}
		}
	})

	// A payload longer than a hash (sent by hand: NOTIFY agentfs_token,
	// '...') names no token: it forgets all, and the listener's goroutine,
	// which delivers it, goes on.
	t.Run("APayloadLongerThanAHashForgetsAll", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		keep(c, "a", "alice")
		sum := sumOf("a")
		c.Notified(hex.EncodeToString(sum[:]) + "00")
		if taken, _ := c.size(); taken != 0 {
			t.Fatalf("a payload longer than a hash left %d tokens", taken)
		}
	})

	t.Run("HoldsAtMostItsSize", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 20)
		for i := range 100 {
			keep(c, string(rune('a'+i%26))+string(rune('0'+i/26)), "s")
			if taken, _ := c.size(); taken > 20 {
				t.Fatalf("%d tokens held, at most 20", taken)
			}
		}
		if taken, _ := c.size(); taken == 0 {
			t.Fatal("nothing kept")
		}
	})

	t.Run("AnswersACopyOfTheScopes", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		scopes := []string{"read"}
		gen, _ := c.Begin()
		c.Put(sumOf("a"), agentfs.Principal{Subject: "alice", Grant: agentfs.Grant{Scopes: scopes}}, gen)
		scopes[0] = "write"
		if p, _ := c.Get(sumOf("a")); !p.Can("read") || p.Can("write") {
			t.Fatalf("the cached scopes changed with the caller's slice: %v", p.Grant.Scopes)
		}
	})

	t.Run("RemembersARefusalForItsTTL", func(t *testing.T) {
		c, clk := newListeningCache(10*time.Second, 10)
		refuse(c, "bogus")
		clk.t = clk.t.Add(9 * time.Second)
		if !c.Refused(sumOf("bogus")) {
			t.Fatal("a refusal within the TTL was forgotten")
		}
		if _, ok := c.Get(sumOf("bogus")); ok {
			t.Fatal("a refused token is taken")
		}
		clk.t = clk.t.Add(time.Second)
		if c.Refused(sumOf("bogus")) {
			t.Fatal("a refusal is remembered past the TTL")
		}
	})

	// A token inserted after it was refused: its insert's notification
	// forgets the refusal, and a lookup that read no row before the insert
	// committed, and came back after its notification, is not kept.
	t.Run("ACreatedTokenIsNoLongerRefused", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		refuse(c, "new")
		refuse(c, "other")
		sum := sumOf("new")
		c.Notified(hex.EncodeToString(sum[:]))
		if c.Refused(sum) || !c.Refused(sumOf("other")) {
			t.Fatal("the insert's notification did not forget exactly its token")
		}
		gen, _ := c.Begin()
		c.Notified(hex.EncodeToString(sum[:]))
		c.Refuse(sum, gen)
		if c.Refused(sum) {
			t.Fatal("kept a refusal that an insert overtook")
		}
		c.Notified("")
		if c.Refused(sumOf("other")) {
			t.Fatal("a payload that names no token left a refusal")
		}
	})

	t.Run("RemembersNoRefusalWhileNotListening", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 10)
		refuse(c, "a")
		c.Listening(false)
		if c.Refused(sumOf("a")) {
			t.Fatal("answered a refusal after the connection was lost")
		}
		gen, _ := c.Begin()
		c.Refuse(sumOf("b"), gen)
		c.Listening(true)
		if c.Refused(sumOf("b")) {
			t.Fatal("kept a refusal made while not listening")
		}
	})

	t.Run("HoldsAtMostItsSizeOfRefusals", func(t *testing.T) {
		c, _ := newListeningCache(time.Minute, 20)
		keep(c, "good", "alice")
		for i := range 1000 {
			refuse(c, fmt.Sprintf("bogus-%d", i))
			if _, refused := c.size(); refused > 20 {
				t.Fatalf("%d refusals held, at most 20", refused)
			}
		}
		if taken, refused := c.size(); refused == 0 || taken != 1 {
			t.Fatalf("%d taken and %d refused after a flood of refusals", taken, refused)
		}
		if _, ok := c.Get(sumOf("good")); !ok {
			t.Fatal("a flood of refused tokens pushed out a good one")
		}
	})
}

func refuse(c *Cache, tok string) {
	gen, ok := c.Begin()
	if ok {
		c.Refuse(sumOf(tok), gen)
	}
}
