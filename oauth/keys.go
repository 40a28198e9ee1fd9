package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxDocumentBytes bounds a metadata or JWKS document; maxKeys the keys
// taken from one JWKS.
const (
	maxDocumentBytes = 1 << 20
	maxKeys          = 100
)

// keyCache holds the issuer's signing keys: fetched when first needed,
// again when they are older than maxAge or a token names a kid they lack
// (the issuer rotated its keys), never twice within refetchAfter.
type keyCache struct {
	issuer       string // as configured
	client       *http.Client
	now          func() time.Time
	refetchAfter time.Duration
	maxAge       time.Duration
	log          *slog.Logger

	mu      sync.RWMutex
	keys    []jose.JSONWebKey // public signing keys
	fetched time.Time         // when keys was fetched; zero: never

	// fetchMu makes one fetch at a time; it guards the fields below.
	fetchMu sync.Mutex
	tried   time.Time // when a fetch was last attempted
	jwksURI string    // from the metadata; "" until discovered (again)
}

func newKeyCache(issuer string, opts Options) *keyCache {
	return &keyCache{issuer: issuer, client: opts.Client, now: opts.Now, refetchAfter: opts.RefetchAfter,
		maxAge: opts.MaxAge, log: opts.Log}
}

// errTooSoon says a fetch was refused: the last attempt is too recent.
var errTooSoon = errors.New("the issuer's keys were fetched moments ago")

func (k *keyCache) snapshot() ([]jose.JSONWebKey, time.Time) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys, k.fetched
}

// candidates returns the keys a token with this kid and alg may be signed
// with, fetching the keys first when they lack it or are stale (and fetch
// allows). Stale keys still answer while a fetch fails; no keys at all is
// ErrUnavailable.
func (k *keyCache) candidates(ctx context.Context, kid, alg string, fetch bool) ([]jose.JSONWebKey, error) {
	keys, fetched := k.snapshot()
	found := match(keys, kid, alg)
	if !fetch || len(found) > 0 && k.now().Sub(fetched) < k.maxAge {
		return found, nil
	}
	err := k.refresh(ctx, fetched)
	switch {
	case err == nil:
		keys, _ = k.snapshot()
		return match(keys, kid, alg), nil
	case len(found) > 0:
		return found, nil // stale, but the issuer's all the same
	case errors.Is(err, errTooSoon) && !fetched.IsZero():
		return nil, nil // an unknown kid, asked again too soon
	}
	return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// match picks the keys that may verify a signature by kid with alg: the
// key of that id (whose alg, when it names one, is alg), or without a kid
// the one key usable for alg.
func match(keys []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range keys {
		if (kid == "" || key.KeyID == kid) && (key.Algorithm == "" || key.Algorithm == alg) {
			out = append(out, key)
		}
	}
	if kid == "" && len(out) != 1 {
		return nil
	}
	return out
}

// refresh fetches the keys unless another fetch ended after seen (the
// keys a caller found wanting) or the last attempt was within
// refetchAfter.
func (k *keyCache) refresh(ctx context.Context, seen time.Time) error {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	if _, fetched := k.snapshot(); fetched.After(seen) {
		return nil
	}
	now := k.now()
	if !k.tried.IsZero() && now.Sub(k.tried) < k.refetchAfter {
		return errTooSoon
	}
	k.tried = now
	keys, err := k.fetch(ctx)
	if err != nil {
		k.jwksURI = "" // discover again next time: the metadata may have moved
		k.log.WarnContext(ctx, "oauth: could not fetch the issuer's keys", "issuer", k.issuer, "err", err)
		return err
	}
	kids := make([]string, len(keys))
	for i, key := range keys {
		kids[i] = key.KeyID
	}
	k.log.InfoContext(ctx, "oauth: fetched the issuer's keys", "issuer", k.issuer, "kids", kids)
	k.mu.Lock()
	k.keys, k.fetched = keys, now
	k.mu.Unlock()
	return nil
}

func (k *keyCache) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	if k.jwksURI == "" {
		uri, err := k.discover(ctx)
		if err != nil {
			return nil, err
		}
		k.jwksURI = uri
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if _, err := k.getJSON(ctx, k.jwksURI, &set); err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	keys := signingKeys(set.Keys)
	if len(keys) == 0 {
		return nil, fmt.Errorf("fetch jwks: %s holds no public signing key", k.jwksURI)
	}
	return keys, nil
}

// signingKeys are the public signature keys of a JWKS's entries. An
// entry that does not parse (a key type go-jose does not know), an
// encryption key, a symmetric one (never a verifier's: that would be a
// shared secret) and any beyond maxKeys are left out; a private key's
// public half is taken.
func signingKeys(entries []json.RawMessage) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, raw := range entries {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || key.Use == "enc" || !key.Valid() {
			continue
		}
		pub := key.Public()
		if pub.Key == nil || !pub.Valid() {
			continue
		}
		out = append(out, pub)
		if len(out) == maxKeys {
			break
		}
	}
	return out
}

// metadata are the members of the authorization server's metadata this
// package reads.
type metadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// discover finds the issuer's JWKS URI in its metadata: RFC 8414's
// well-known URI first, then OpenID Connect discovery's (Hydra serves only
// that one), as the MCP authorization spec orders them.
func (k *keyCache) discover(ctx context.Context) (string, error) {
	var tried []string
	for _, u := range MetadataURLs(k.issuer) {
		var m metadata
		status, err := k.getJSON(ctx, u, &m)
		if status == http.StatusNotFound {
			tried = append(tried, u)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discover %s: %w", u, err)
		}
		if !sameURL(m.Issuer, k.issuer) {
			return "", fmt.Errorf("discover %s: the metadata names the issuer %q, not %q (RFC 8414 §3.3)", u, m.Issuer, k.issuer)
		}
		if ju, err := url.Parse(m.JWKSURI); err != nil || (ju.Scheme != "https" && ju.Scheme != "http") || ju.Host == "" {
			return "", fmt.Errorf("discover %s: jwks_uri %q is not an absolute http(s) URL", u, m.JWKSURI)
		}
		return m.JWKSURI, nil
	}
	return "", fmt.Errorf("discover: no authorization server metadata at %s", strings.Join(tried, ", "))
}

// MetadataURLs are where the metadata of issuer may be, in the order to
// try them: RFC 8414 (the well-known path inserted before the issuer's
// path), OpenID Connect discovery (appended to it), and for an issuer with
// a path, OpenID Connect's with the path inserted too.
func MetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	at := func(p string) string {
		v := *u
		v.Path, v.RawPath = p, ""
		return v.String()
	}
	urls := []string{at("/.well-known/oauth-authorization-server" + path), at(path + "/.well-known/openid-configuration")}
	if path != "" {
		urls = append(urls, at("/.well-known/openid-configuration"+path))
	}
	return urls
}

// getJSON GETs u and decodes its 200 answer into v, reading at most
// maxDocumentBytes; it returns the status it got.
func (k *keyCache) getJSON(ctx context.Context, u string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDocumentBytes))
		return res.StatusCode, fmt.Errorf("GET %s: %s", u, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxDocumentBytes+1))
	if err != nil {
		return res.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxDocumentBytes {
		return res.StatusCode, fmt.Errorf("GET %s: the document is larger than %d bytes", u, maxDocumentBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return res.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	return res.StatusCode, nil
}
