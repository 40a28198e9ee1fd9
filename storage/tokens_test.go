package storage_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// authenticates reports whether store takes tok, failing the test on any
// error but "unknown or revoked".
func authenticates(t *testing.T, store *storage.Store, tok string) bool {
	t.Helper()
	_, err := store.Authenticate(context.Background(), tok)
	if err != nil && !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("authenticate: %v", err)
	}
	return err == nil
}

// cached waits until store answers tok from its cache: its listener
// listens, and a lookup made since then was kept.
// hourLongCache is a store configuration whose token cache keeps a token
// for an hour: within a test, only a notification makes it forget one.
func hourLongCache(t *testing.T) storage.Config {
	t.Helper()
	cfg := storagetest.Config(t)
	cfg.TokenCacheTTL = time.Hour
	return cfg
}

// newToken creates a token of subject with scopes on store and returns it
// and its id.
func newToken(t *testing.T, store *storage.Store, subject string, scopes ...string) (tok, id string) {
	t.Helper()
	tok, id, err := store.CreateToken(context.Background(), subject, scopes)
	if err != nil {
		t.Fatal(err)
	}
	return tok, id
}

// refusedSoon waits up to a second for store to refuse tok; what names
// the wait when it times out.
func refusedSoon(t *testing.T, store *storage.Store, tok, what string) {
	t.Helper()
	storagetest.Eventually(t, time.Second, what, func() bool { return !authenticates(t, store, tok) })
}

func cached(t *testing.T, store *storage.Store, tok string) {
	t.Helper()
	storagetest.Eventually(t, 10*time.Second, "the token to be answered from the cache", func() bool {
		before := store.Counters().TokenCacheHits
		if !authenticates(t, store, tok) {
			t.Fatal("the token is refused")
		}
		return store.Counters().TokenCacheHits > before
	})
}

func TestTokenCache(t *testing.T) {
	ctx := context.Background()

	// Two instances on one schema: a token revoked through one is refused
	// by the other's cache as soon as the revocation's notification
	// arrives (a second at most, though it takes milliseconds).
	t.Run("ARevocationOnOneInstanceReachesAnothersCache", func(t *testing.T) {
		t.Parallel()
		cfg := hourLongCache(t) // only the notification can make it forget
		a, b := storagetest.OpenConfig(t, cfg), storagetest.OpenConfig(t, cfg)
		tok, id := newToken(t, a, "alice", "read", "write")
		cached(t, a, tok)
		cached(t, b, tok)
		lookups := b.Counters().TokenLookups
		for range 5 {
			if !authenticates(t, b, tok) {
				t.Fatal("a cached token is refused")
			}
		}
		if got := b.Counters().TokenLookups; got != lookups {
			t.Fatalf("a cached token was looked up %d more times", got-lookups)
		}
		if err := a.RevokeToken(ctx, id); err != nil {
			t.Fatal(err)
		}
		if authenticates(t, a, tok) {
			t.Fatal("the revoking instance still takes the token")
		}
		refusedSoon(t, b, tok, "the other instance to refuse the revoked token")
	})

	// A revocation by hand, in SQL, is heard too: the trigger notifies
	// whoever changes the row.
	t.Run("ARevocationInSQLIsHeard", func(t *testing.T) {
		t.Parallel()
		cfg := hourLongCache(t)
		store := storagetest.OpenConfig(t, cfg)
		tok, id := newToken(t, store, "bob", "read")
		cached(t, store, tok)
		storagetest.Exec(t, cfg, `UPDATE tokens SET revoked_at = now() WHERE id = $1`, id)
		refusedSoon(t, store, tok, "the cache to forget a token revoked in SQL")
		other, _ := newToken(t, store, "bob", "read")
		cached(t, store, other)
		storagetest.Exec(t, cfg, `DELETE FROM tokens`)
		refusedSoon(t, store, other, "the cache to forget a deleted token")
	})

	// While the listening connection is down, revocations go by unheard:
	// the cache forgets everything when it loses the connection and keeps
	// nothing until it listens again.
	t.Run("ALostListenerForgetsEverything", func(t *testing.T) {
		t.Parallel()
		cfg := hourLongCache(t)
		a := storagetest.OpenConfig(t, cfg)
		proxy := storagetest.NewProxy(t, storagetest.PostgresAddr(t))
		viaProxy := storagetest.WithPostgresAt(t, cfg, proxy.Addr())
		b := storagetest.OpenConfig(t, viaProxy)
		tok, id := newToken(t, a, "carol", "read")
		cached(t, b, tok)
		proxy.Cut() // b's listener and pool lose Postgres
		if err := a.RevokeToken(ctx, id); err != nil {
			t.Fatal(err)
		}
		proxy.Restore()
		storagetest.Eventually(t, 5*time.Second, "the instance that lost its listener to refuse the token", func() bool {
			_, err := b.Authenticate(ctx, tok)
			return errors.Is(err, agentfs.ErrNotFound)
		})
	})

	t.Run("ANegativeTTLTurnsTheCacheOff", func(t *testing.T) {
		t.Parallel()
		cfg := storagetest.Config(t)
		cfg.TokenCacheTTL = -1
		store := storagetest.OpenConfig(t, cfg)
		tok, _ := newToken(t, store, "dave", "read")
		for range 3 {
			if !authenticates(t, store, tok) {
				t.Fatal("the token is refused")
			}
		}
		if c := store.Counters(); c.TokenLookups != 3 || c.TokenCacheHits != 0 {
			t.Fatalf("counters %+v, want 3 lookups and no hit", c)
		}
	})

	// A wrong token sent again and again is looked up once per TTL, not
	// once per request; a token revoked lately too.
	t.Run("ARefusedTokenIsLookedUpOnce", func(t *testing.T) {
		t.Parallel()
		cfg := hourLongCache(t)
		store := storagetest.OpenConfig(t, cfg)
		good, id := newToken(t, store, "erin", "read")
		cached(t, store, good) // the listener listens
		for _, bogus := range []string{"afs_" + strings.Repeat("x", 43), good} {
			if bogus == good {
				if err := store.RevokeToken(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			// Once the revocation's own notification is in, the refusal
			// is kept.
			storagetest.Eventually(t, 10*time.Second, "the refusal to be answered from the cache", func() bool {
				before := store.Counters().TokenCacheHits
				if authenticates(t, store, bogus) {
					t.Fatal("a bogus or revoked token is taken")
				}
				return store.Counters().TokenCacheHits > before
			})
			lookups := store.Counters().TokenLookups
			for range 20 {
				if authenticates(t, store, bogus) {
					t.Fatal("a refused token is taken")
				}
			}
			if got := store.Counters().TokenLookups - lookups; got != 0 {
				t.Fatalf("a refused token was looked up %d more times", got)
			}
		}
	})

	// A token refused on two instances, then created by hand (an insert,
	// as a restore from a backup makes) or revoked and restored in SQL, is
	// taken by both as soon as that commits.
	t.Run("ATokenCreatedAfterItWasRefusedIsTaken", func(t *testing.T) {
		t.Parallel()
		cfg := hourLongCache(t)
		a, b := storagetest.OpenConfig(t, cfg), storagetest.OpenConfig(t, cfg)
		seed, _ := newToken(t, a, "frank", "read")
		cached(t, a, seed)
		cached(t, b, seed)
		tok := "afs_" + strings.Repeat("n", 43)
		for _, s := range []*storage.Store{a, b} {
			for range 2 {
				if authenticates(t, s, tok) {
					t.Fatal("an unknown token is taken")
				}
			}
		}
		sum := sha256.Sum256([]byte(tok))
		storagetest.Exec(t, cfg, `INSERT INTO tokens (id, subject, token_hash, scopes) VALUES ('tok_by_hand', 'frank', $1, '{read}')`, sum[:])
		for name, s := range map[string]*storage.Store{"a": a, "b": b} {
			storagetest.Eventually(t, time.Second, "instance "+name+" to take a token inserted after it was refused", func() bool {
				return authenticates(t, s, tok)
			})
		}
		storagetest.Exec(t, cfg, `UPDATE tokens SET revoked_at = now() WHERE id = 'tok_by_hand'`)
		refusedSoon(t, b, tok, "the revoked token to be refused")
		authenticates(t, b, tok) // refused, and remembered so
		storagetest.Exec(t, cfg, `UPDATE tokens SET revoked_at = NULL WHERE id = 'tok_by_hand'`)
		storagetest.Eventually(t, time.Second, "the token restored in SQL to be taken", func() bool { return authenticates(t, b, tok) })
	})
}
