// Package oauth makes AgentFS an OAuth 2.1 resource server: it turns a JWT
// access token of the authorization server named by AGENTFS_OAUTH_ISSUER
// into the subject, scopes and path prefixes of a principal. The signature
// is checked with the server's published keys (JWKS, found through its RFC
// 8414 metadata or, where only that is served, OpenID Connect discovery;
// cached, chosen by kid, refetched when an unknown kid shows the keys were
// rotated), then the claims: iss, aud (the resource, RFC 8707), exp and
// nbf. The cryptography is go-jose's; this package only decides which
// tokens to take.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentfs/agentfs"
)

// Config is the resource server's configuration, read from the
// environment (package envconfig). An empty Issuer turns OAuth off: only
// AgentFS's own tokens are taken.
type Config struct {
	// Issuer is the authorization server's issuer identifier, exactly as
	// it writes it into the tokens' iss (Ory Hydra: with a trailing
	// slash); its metadata is found under it.
	Issuer string `env:"AGENTFS_OAUTH_ISSUER"`
	// SubjectClaim names the claim whose string value is the AgentFS
	// subject of a token's requests.
	SubjectClaim string `env:"AGENTFS_OAUTH_SUBJECT_CLAIM" envDefault:"sub"`
}

// Options are what the caller wires in beside Config.
type Options struct {
	// Client fetches the metadata and the keys (nil: a client with a 10 s
	// timeout).
	Client *http.Client
	// Now is the clock the claims are checked against (nil: time.Now).
	Now func() time.Time
	// RefetchAfter is the least time between two fetches of the keys that
	// an unknown kid (or stale keys) asks for, so that tokens made up with
	// random key ids cannot make the server hammer the issuer (0: 10 s).
	RefetchAfter time.Duration
	// MaxAge is how long fetched keys are used before they are fetched
	// again (0: 1 h); stale keys still verify while a refetch fails.
	MaxAge time.Duration
	Log    *slog.Logger
}

// Limits on what a token may hold: past them it is refused unread.
const (
	// MaxTokenBytes bounds a token's length (access tokens of common
	// authorization servers are 1-4 KiB; Hydra's about 1.4 KiB).
	MaxTokenBytes = 16 << 10
	maxScopes     = 64
	maxScopeBytes = 128
	maxPrefixes   = 64
	maxSubject    = 255
	// leeway is the clock skew tolerated on exp, nbf and iat.
	leeway = 30 * time.Second
)

// Algorithms are the signature algorithms a token may use: asymmetric
// ones only. "none" is no signature at all, and an HMAC algorithm would
// make a public key (anything in the JWKS) the secret that signs tokens.
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// InvalidTokenError says why a token is refused; its text is meant for
// the client (the 401 problem's detail): it names what is wrong with the
// token, never a key or a secret.
type InvalidTokenError struct {
	Reason string
}

func (e *InvalidTokenError) Error() string { return e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidTokenError{Reason: fmt.Sprintf(format, args...)}
}

// ErrUnavailable says the issuer's keys could not be fetched, so no token
// can be verified now: the request may succeed when retried (503).
var ErrUnavailable = fmt.Errorf("authorization server unavailable: %w", agentfs.ErrUnavailable)

// Verifier checks the access tokens of one issuer.
type Verifier struct {
	cfg  Config
	now  func() time.Time
	log  *slog.Logger
	keys *keyCache
}

// NewVerifier returns a verifier of cfg.Issuer's tokens. It fetches
// nothing yet: the metadata and keys are fetched when the first token
// comes, so the server starts while the issuer is down.
func NewVerifier(cfg Config, opts Options) (*Verifier, error) {
	if err := CheckIssuer(cfg.Issuer); err != nil {
		return nil, err
	}
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RefetchAfter <= 0 {
		opts.RefetchAfter = 10 * time.Second
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = time.Hour
	}
	return &Verifier{cfg: cfg, now: opts.Now, log: opts.Log, keys: newKeyCache(cfg.Issuer, opts)}, nil
}

// CheckIssuer says whether issuer can name an authorization server: an
// absolute http or https URL without query or fragment (RFC 8414 §2).
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("oauth issuer %q must be an absolute https (or http) URL without query, fragment or user", issuer)
	}
	return nil
}

// Issuer is the issuer identifier, as configured: what the protected
// resource metadata lists in authorization_servers.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// LooksLikeJWT reports whether token has the shape of a JWS in compact
// serialization (three base64url parts, the first a JSON object), so it is
// asked of the verifier rather than of AgentFS's token store.
func LooksLikeJWT(token string) bool {
	if !strings.HasPrefix(token, "eyJ") || strings.Count(token, ".") != 2 {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Verify checks token and returns its claims: a signature by one of the
// issuer's keys, with an allowed algorithm; the issuer; an audience among
// audiences (the resources this request may be meant for); exp in the
// future and nbf, iat not in it (within a small leeway). A refused token
// is an *InvalidTokenError; keys that cannot be fetched are ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, token string, audiences []string) (*Claims, error) {
	return v.verify(ctx, token, audiences, true)
}

// VerifyCached is Verify with the keys already fetched only: it never
// fetches (an unknown key id is refused), for a client that has already
// failed to authenticate too often.
func (v *Verifier) VerifyCached(token string, audiences []string) (*Claims, error) {
	return v.verify(context.Background(), token, audiences, false)
}

func (v *Verifier) verify(ctx context.Context, token string, audiences []string, fetch bool) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, invalid("the access token is longer than %d bytes", MaxTokenBytes)
	}
	jws, err := jose.ParseSignedCompact(token, Algorithms)
	if err != nil {
		return nil, refusedSyntax(err)
	}
	if len(jws.Signatures) != 1 {
		return nil, invalid("the access token must carry exactly one signature")
	}
	h := jws.Signatures[0].Header
	if err := checkType(h); err != nil {
		return nil, err
	}
	payload, err := v.verifySignature(ctx, jws, h, fetch)
	if err != nil {
		return nil, err
	}
	c, err := ParseClaims(payload, v.cfg.SubjectClaim)
	if err != nil {
		return nil, err
	}
	if err := c.check(v.cfg.Issuer, audiences, v.now()); err != nil {
		return nil, err
	}
	return c, nil
}

// refusedSyntax is the answer to a token go-jose cannot parse, or whose
// algorithm is not allowed.
func refusedSyntax(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "unexpected signature algorithm") {
		return invalid("the access token's signature algorithm is not accepted (only asymmetric ones: RS256, PS256, ES256, EdDSA and their larger sizes; never none or HMAC)")
	}
	return invalid("the access token is not a signed JWT in compact form")
}

// checkType refuses a JWS whose typ says it is something other than an
// access token (RFC 9068 at+jwt, or the plain JWT most servers write).
func checkType(h jose.Header) error {
	typ, _ := h.ExtraHeaders[jose.HeaderType].(string)
	switch strings.ToLower(typ) {
	case "", "jwt", "at+jwt", "application/at+jwt":
		return nil
	}
	return invalid("the token's typ %q is not an access token's", typ)
}

// verifySignature finds the key the header names and verifies the
// signature with it, refetching the issuer's keys when the kid is unknown
// (they may have been rotated).
func (v *Verifier) verifySignature(ctx context.Context, jws *jose.JSONWebSignature, h jose.Header, fetch bool) ([]byte, error) {
	keys, err := v.keys.candidates(ctx, h.KeyID, h.Algorithm, fetch)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		if h.KeyID == "" {
			return nil, invalid("the access token names no key (kid) and the issuer publishes no single key for %s", h.Algorithm)
		}
		return nil, invalid("the access token's signing key %q is not among the issuer's keys", h.KeyID)
	}
	for _, k := range keys {
		if payload, err := jws.Verify(k); err == nil {
			return payload, nil
		}
	}
	return nil, invalid("the access token's signature does not verify")
}

// Authenticate verifies token and returns the principal it stands for
// (Claims.Principal).
func (v *Verifier) Authenticate(ctx context.Context, token string, audiences []string) (agentfs.Principal, error) {
	c, err := v.Verify(ctx, token, audiences)
	if err != nil {
		return agentfs.Principal{}, err
	}
	return c.Principal(token)
}

// Trusted is Authenticate with the keys already fetched only
// (VerifyCached); ok is false for any token it cannot take that way.
func (v *Verifier) Trusted(token string, audiences []string) (agentfs.Principal, bool) {
	c, err := v.VerifyCached(token, audiences)
	if err != nil {
		return agentfs.Principal{}, false
	}
	p, err := c.Principal(token)
	return p, err == nil
}

// tokenID names a JWT as a principal's TokenID: what a secret recorded by
// its request is bound to, so that only the same token sees it again.
func tokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "jwt_" + base64.RawURLEncoding.EncodeToString(sum[:18])
}
