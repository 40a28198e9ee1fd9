// Package oauthtest gives the tests authorization servers: Ory Hydra, the
// real one the test scripts start (hydra.go), and Issuer, a small issuer
// of the tests' own that publishes its metadata and keys over HTTP and
// signs whatever claims a test asks for: the tokens no real server would
// issue (another issuer's, expired, unsigned, HMAC-signed, with a key id
// it never published) that a resource server must refuse.
package oauthtest

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Issuer is an authorization server of the test's own: metadata at RFC
// 8414's well-known URI (or, with OIDCOnly, only at OpenID Connect's, as
// Hydra serves it), a JWKS, and keys it signs tokens with.
type Issuer struct {
	URL string // the issuer identifier (no trailing slash)
	// JWKSFetches counts the GETs of the JWKS.
	JWKSFetches atomic.Int64

	srv  *httptest.Server
	mu   sync.Mutex
	keys []*jose.JSONWebKey // private; the first signs by default
	down atomic.Bool
}

// IssuerOptions shape an Issuer.
type IssuerOptions struct {
	// OIDCOnly serves the metadata only at /.well-known/openid-configuration.
	OIDCOnly bool
	// TrailingSlash makes the issuer identifier end in "/", as Hydra's does.
	TrailingSlash bool
	// Alg is the algorithm of its first key: ES256 (the default, quick to
	// make), RS256 or PS256.
	Alg string
}

// NewIssuer starts an issuer with one key, closed when the test ends.
func NewIssuer(t testing.TB, opts IssuerOptions) *Issuer {
	t.Helper()
	iss := &Issuer{}
	iss.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.serve(w, r, opts)
	}))
	t.Cleanup(iss.srv.Close)
	iss.URL = iss.srv.URL
	if opts.TrailingSlash {
		iss.URL += "/"
	}
	iss.AddKey(t, cmp.Or(opts.Alg, "ES256"))
	return iss
}

func (iss *Issuer) serve(w http.ResponseWriter, r *http.Request, opts IssuerOptions) {
	if iss.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	meta := map[string]any{"issuer": iss.URL, "jwks_uri": iss.srv.URL + "/jwks.json",
		"token_endpoint": iss.srv.URL + "/token", "response_types_supported": []string{"code"}}
	switch {
	case r.URL.Path == "/.well-known/oauth-authorization-server" && !opts.OIDCOnly,
		r.URL.Path == "/.well-known/openid-configuration":
		writeJSON(w, meta)
	case r.URL.Path == "/jwks.json":
		iss.JWKSFetches.Add(1)
		writeJSON(w, iss.PublicKeys())
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// SetDown makes every request to the issuer answer 503 (down) or work
// again.
func (iss *Issuer) SetDown(down bool) { iss.down.Store(down) }

// AddKey makes a new key for alg (RS256, PS256, ES256), published from now
// on and, being first, the one Sign uses; it returns its kid.
func (iss *Issuer) AddKey(t testing.TB, alg string) string {
	t.Helper()
	var priv any
	var err error
	switch alg {
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	var id [6]byte
	_, _ = rand.Read(id[:])
	kid := fmt.Sprintf("%s-%x", alg, id)
	iss.keys = append([]*jose.JSONWebKey{{Key: priv, KeyID: kid, Algorithm: alg, Use: "sig"}}, iss.keys...)
	return kid
}

// PublicKeys is the JWKS the issuer publishes.
func (iss *Issuer) PublicKeys() jose.JSONWebKeySet {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range iss.keys {
		set.Keys = append(set.Keys, k.Public())
	}
	return set
}

// Claims are a token's claims, as JSON has them.
type Claims map[string]any

// Standard returns the claims of a token the resource audience would take:
// this issuer, that audience, the subject, the scopes (space-separated),
// valid for an hour from now.
func (iss *Issuer) Standard(audience, subject, scope string, now time.Time) Claims {
	return Claims{"iss": iss.URL, "aud": []string{audience}, "sub": subject, "scope": scope,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprint(now.UnixNano())}
}

// Sign signs claims with the issuer's newest key, naming its kid.
func (iss *Issuer) Sign(t testing.TB, claims Claims) string {
	t.Helper()
	iss.mu.Lock()
	key := iss.keys[0]
	iss.mu.Unlock()
	return SignWith(t, key, jose.SignatureAlgorithm(key.Algorithm), key.KeyID, claims)
}

// PrivateKey is the key Sign signs with.
func (iss *Issuer) PrivateKey(t testing.TB) any {
	t.Helper()
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.keys[0].Key
}

// SignWith signs claims with key and alg, naming kid ("" names none), as
// a JWT; key may be any key go-jose signs with (an HMAC secret too).
func SignWith(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, claims Claims) string {
	t.Helper()
	return SignTyped(t, key, alg, kid, "JWT", claims)
}

// SignTyped is SignWith with the header's typ.
func SignTyped(t testing.TB, key any, alg jose.SignatureAlgorithm, kid, typ string, claims Claims) string {
	t.Helper()
	if k, ok := key.(*jose.JSONWebKey); ok {
		key = k.Key
	}
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(typ))
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Unsigned returns claims as a JWT with alg "none" and no signature
// (RFC 7519 §6), which go-jose will not make.
func Unsigned(t testing.TB, claims Claims) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return Base64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + Base64(payload) + "."
}

// Base64 is b in base64url without padding, as JWTs spell their parts.
func Base64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
