package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/oauth/oauthtest"
)

const resource = "https://files.example.test"

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type bundle struct {
	iss   *oauthtest.Issuer
	clock *clock
	v     *oauth.Verifier
}

func setup(t testing.TB, opts oauthtest.IssuerOptions, cfg oauth.Config) *bundle {
	t.Helper()
	b := &bundle{iss: oauthtest.NewIssuer(t, opts), clock: &clock{t: time.Now().Truncate(time.Second)}}
	if cfg.Issuer == "" {
		cfg.Issuer = b.iss.URL
	}
	v, err := oauth.NewVerifier(cfg, oauth.Options{Now: b.clock.Now, RefetchAfter: 10 * time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b.v = v
	return b
}

func (b *bundle) token(t *testing.T, edit func(oauthtest.Claims)) string {
	t.Helper()
	c := b.iss.Standard(resource, "agent-7", "read write", b.clock.Now())
	if edit != nil {
		edit(c)
	}
	return b.iss.Sign(t, c)
}

// verifies fails unless a fresh token of the issuer verifies for the
// resource.
func (b *bundle) verifies(t *testing.T) {
	t.Helper()
	if _, err := b.v.Verify(context.Background(), b.token(t, nil), []string{resource}); err != nil {
		t.Fatal(err)
	}
}

// fetched fails unless the issuer's keys were fetched n times.
func (b *bundle) fetched(t *testing.T, n int64) {
	t.Helper()
	if got := b.iss.JWKSFetches.Load(); got != n {
		t.Fatalf("%d JWKS fetches, want %d", got, n)
	}
}

// refused fails unless err is a refusal of the token whose reason holds
// want.
func refused(t *testing.T, err error, want string) {
	t.Helper()
	var bad *oauth.InvalidTokenError
	if !errors.As(err, &bad) {
		t.Fatalf("err = %v (%T), want a refusal mentioning %q", err, err, want)
	}
	if !strings.Contains(bad.Reason, want) {
		t.Fatalf("reason %q does not mention %q", bad.Reason, want)
	}
}

func TestVerifyTakes(t *testing.T) {
	t.Run("AValidToken", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		tok := b.token(t, nil)
		c, err := b.v.Verify(context.Background(), tok, []string{resource})
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject != "agent-7" || strings.Join(c.Scopes, ",") != "read,write" || c.Prefixes != nil {
			t.Fatalf("claims %+v", c)
		}
		p, err := b.v.Authenticate(context.Background(), tok, []string{resource})
		if err != nil {
			t.Fatal(err)
		}
		if p.Subject != "agent-7" || !p.Can(agentfs.ScopeWrite) || !strings.HasPrefix(p.TokenID, "jwt_") {
			t.Fatalf("principal %+v", p)
		}
		other, _ := b.v.Authenticate(context.Background(), b.token(t, func(c oauthtest.Claims) { c["jti"] = "2" }), []string{resource})
		if other.TokenID == p.TokenID {
			t.Fatal("two tokens share a TokenID")
		}
	})
	t.Run("RS256", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{Alg: "RS256"}, oauth.Config{})
		if _, err := b.v.Verify(context.Background(), b.token(t, nil), []string{resource}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OpenIDConnectDiscoveryOnlyWithTrailingSlash", func(t *testing.T) {
		// Hydra: metadata only at openid-configuration, iss with a slash.
		b := setup(t, oauthtest.IssuerOptions{OIDCOnly: true, TrailingSlash: true}, oauth.Config{})
		if _, err := b.v.Verify(context.Background(), b.token(t, nil), []string{resource}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AnIssuerConfiguredWithoutItsTrailingSlash", func(t *testing.T) {
		iss := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{TrailingSlash: true})
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{Issuer: strings.TrimSuffix(iss.URL, "/")})
		b.iss = iss
		if _, err := b.v.Verify(context.Background(), b.token(t, nil), []string{resource}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ScpListAndAudienceString", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		c, err := b.v.Verify(context.Background(), b.token(t, func(c oauthtest.Claims) {
			delete(c, "scope")
			c["scp"] = []string{"read"}
			c["aud"] = resource + "/"
		}), []string{resource})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(c.Scopes, ",") != "read" {
			t.Fatalf("scopes %q", c.Scopes)
		}
	})
	t.Run("TheConfiguredSubjectClaim", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{SubjectClaim: "client_id"})
		c, err := b.v.Verify(context.Background(), b.token(t, func(c oauthtest.Claims) { c["client_id"] = "bot" }), []string{resource})
		if err != nil || c.Subject != "bot" {
			t.Fatalf("claims %+v, err %v", c, err)
		}
		_, err = b.v.Verify(context.Background(), b.token(t, nil), []string{resource})
		refused(t, err, "no client_id claim")
	})
	t.Run("AnyOfTheAudiences", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		tok := b.token(t, func(c oauthtest.Claims) { c["aud"] = []string{"other", resource + "/mcp"} })
		if _, err := b.v.Verify(context.Background(), tok, []string{resource, resource + "/mcp"}); err != nil {
			t.Fatal(err)
		}
		_, err := b.v.Verify(context.Background(), tok, []string{resource})
		refused(t, err, "audience")
	})
	t.Run("ClockSkewWithinTheLeeway", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		tok := b.token(t, nil)
		b.clock.Advance(time.Hour + 20*time.Second) // expired 20 s ago by this clock
		if _, err := b.v.Verify(context.Background(), tok, []string{resource}); err != nil {
			t.Fatal(err)
		}
		early := b.token(t, func(c oauthtest.Claims) {
			c["nbf"] = b.clock.Now().Add(20 * time.Second).Unix()
			c["iat"] = c["nbf"]
		})
		if _, err := b.v.Verify(context.Background(), early, []string{resource}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestVerifyRefuses(t *testing.T) {
	b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
	now := b.clock.Now()
	other := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{})
	trusted := b.iss.PublicKeys().Keys[0]
	pubJSON, err := json.Marshal(trusted)
	if err != nil {
		t.Fatal(err)
	}
	huge := b.token(t, func(c oauthtest.Claims) { c["pad"] = strings.Repeat("x", oauth.MaxTokenBytes) })
	cases := []struct {
		name  string
		token string
		want  string
	}{
		{"Expired", b.token(t, func(c oauthtest.Claims) { c["exp"] = now.Add(-time.Minute).Unix() }), "expired"},
		{"NotYetValid", b.token(t, func(c oauthtest.Claims) { c["nbf"] = now.Add(time.Hour).Unix() }), "not valid before"},
		{"IssuedInTheFuture", b.token(t, func(c oauthtest.Claims) { c["iat"] = now.Add(time.Hour).Unix() }), "issued in the future"},
		{"WithoutExp", b.token(t, func(c oauthtest.Claims) { delete(c, "exp") }), "no exp"},
		{"ClaimingAnotherIssuer", b.token(t, func(c oauthtest.Claims) { c["iss"] = other.URL }), "not by the issuer this server trusts"},
		{"OfAnotherIssuer", other.Sign(t, other.Standard(resource, "agent-7", "read", now)), "is not among the issuer's keys"},
		{"ForAnotherAudience", b.token(t, func(c oauthtest.Claims) { c["aud"] = []string{"https://elsewhere.test"} }), "audience"},
		{"WithoutAudience", b.token(t, func(c oauthtest.Claims) { delete(c, "aud") }), "audience"},
		{"Unsigned", oauthtest.Unsigned(t, b.iss.Standard(resource, "agent-7", "read", now)), "signature algorithm is not accepted"},
		// The public key as an HMAC secret: the key-confusion forgery.
		{"HMACWithThePublicKey", oauthtest.SignWith(t, pubJSON, jose.HS256, trusted.KeyID, b.iss.Standard(resource, "agent-7", "read", now)), "signature algorithm is not accepted"},
		{"UnknownKeyID", oauthtest.SignWith(t, other.PrivateKey(t), jose.ES256, "no-such-kid", b.iss.Standard(resource, "a", "read", now)), `"no-such-kid" is not among`},
		{"ForgedWithTheTrustedKid", oauthtest.SignWith(t, other.PrivateKey(t), jose.ES256, trusted.KeyID, b.iss.Standard(resource, "a", "read", now)), "does not verify"},
		{"Huge", huge, "longer than"},
		{"Tampered", tamper(t, b.token(t, nil)), "does not verify"},
		{"NotAJWT", "eyJ.not.ajwt", "not a signed JWT"},
		{"OfAnotherType", oauthtest.SignTyped(t, b.iss.PrivateKey(t), jose.ES256, trusted.KeyID, "dpop+jwt", b.iss.Standard(resource, "a", "read", now)), "not an access token's"},
		{"WithoutSubject", b.token(t, func(c oauthtest.Claims) { delete(c, "sub") }), "no sub claim"},
		{"SubjectWithAControlCharacter", b.token(t, func(c oauthtest.Claims) { c["sub"] = "a\x00b" }), "printable"},
		{"ScopeAsAList", b.token(t, func(c oauthtest.Claims) { c["scope"] = []string{"read"} }), "space-separated"},
		{"PrefixOutsideTheTree", b.token(t, func(c oauthtest.Claims) { c["agentfs_prefixes"] = []string{"../etc/"} }), "not a folder"},
		{"PrefixesEmpty", b.token(t, func(c oauthtest.Claims) { c["agentfs_prefixes"] = []string{} }), "must list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.v.Verify(context.Background(), tc.token, []string{resource})
			refused(t, err, tc.want)
		})
	}
}

// tamper changes the token's payload, keeping its signature.
func tamper(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	c := oauthtest.Claims{}
	payload, err := jose.ParseSignedCompact(tok, oauth.Algorithms)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload.UnsafePayloadWithoutVerification(), &c); err != nil {
		t.Fatal(err)
	}
	c["sub"] = "admin"
	b, _ := json.Marshal(c)
	return parts[0] + "." + oauthtest.Base64(b) + "." + parts[2]
}

func TestKeys(t *testing.T) {
	aud := []string{resource}
	ctx := context.Background()
	t.Run("FetchedOnceThenCached", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		for range 3 {
			b.verifies(t)
		}
		b.fetched(t, 1)
	})
	t.Run("RotationIsFollowed", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		b.verifies(t)
		b.clock.Advance(11 * time.Second) // past RefetchAfter since the first fetch
		b.iss.AddKey(t, "ES256")
		b.verifies(t) // a token of the new key
		b.fetched(t, 2)
	})
	t.Run("UnknownKidsRefetchAtMostOncePerInterval", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		b.verifies(t)
		b.clock.Advance(11 * time.Second)
		other := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{})
		for i := range 5 {
			tok := oauthtest.SignWith(t, other.PrivateKey(t), jose.ES256, fmt.Sprint("made-up-", i), b.iss.Standard(resource, "a", "read", b.clock.Now()))
			_, err := b.v.Verify(ctx, tok, aud)
			refused(t, err, "is not among the issuer's keys")
		}
		if n := b.iss.JWKSFetches.Load(); n != 2 {
			t.Fatalf("%d JWKS fetches after 5 unknown kids, want 2 (the first, one refetch)", n)
		}
		// Within the interval a rotated key waits; after it, it is fetched.
		b.iss.AddKey(t, "ES256")
		_, err := b.v.Verify(ctx, b.token(t, nil), aud)
		refused(t, err, "is not among the issuer's keys")
		b.clock.Advance(11 * time.Second)
		b.verifies(t)
	})
	t.Run("ConcurrentUnknownKidsFetchOnce", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		tok := b.token(t, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				_, err := b.v.Verify(ctx, tok, aud)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		b.fetched(t, 1)
	})
	t.Run("StaleKeysStillVerifyWhileTheIssuerIsDown", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		b.verifies(t)
		b.iss.SetDown(true)
		b.clock.Advance(2 * time.Hour) // the keys are stale; a refetch fails
		b.verifies(t)
	})
	t.Run("AnIssuerDownFromTheStartIsUnavailable", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		b.iss.SetDown(true)
		_, err := b.v.Verify(ctx, b.token(t, nil), aud)
		if !errors.Is(err, oauth.ErrUnavailable) || !errors.Is(err, agentfs.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		_, err = b.v.Verify(ctx, b.token(t, nil), aud) // too soon to try again: still unavailable
		if !errors.Is(err, oauth.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		b.iss.SetDown(false)
		b.clock.Advance(11 * time.Second)
		b.verifies(t)
	})
	t.Run("MetadataNamingAnotherIssuerIsRefused", func(t *testing.T) {
		iss := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{})
		v, err := oauth.NewVerifier(oauth.Config{Issuer: iss.URL + "/tenant"}, oauth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tok := iss.Sign(t, iss.Standard(resource, "a", "read", time.Now()))
		if _, err := v.Verify(ctx, tok, aud); !errors.Is(err, oauth.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable (no metadata of that issuer)", err)
		}
	})
	t.Run("VerifyCachedNeverFetches", func(t *testing.T) {
		b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
		tok := b.token(t, nil)
		_, err := b.v.VerifyCached(tok, aud)
		refused(t, err, "is not among the issuer's keys")
		if _, ok := b.v.Trusted(tok, aud); ok {
			t.Fatal("Trusted took a token before any key was fetched")
		}
		b.fetched(t, 0)
		if _, err := b.v.Verify(ctx, tok, aud); err != nil {
			t.Fatal(err)
		}
		if p, ok := b.v.Trusted(tok, aud); !ok || p.Subject != "agent-7" {
			t.Fatalf("Trusted = %+v, %v after the keys were fetched", p, ok)
		}
	})
}

func TestPrefixes(t *testing.T) {
	b := setup(t, oauthtest.IssuerOptions{}, oauth.Config{})
	tok := b.token(t, func(c oauthtest.Claims) { c["agentfs_prefixes"] = []string{"reports", "runs/r1/"} })
	c, err := b.v.Verify(context.Background(), tok, []string{resource})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Prefixes, ",") != "reports/,runs/r1/" {
		t.Fatalf("prefixes %q", c.Prefixes)
	}
	// The principal's grant is confined to exactly those folders.
	p, err := b.v.Authenticate(context.Background(), tok, []string{resource})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Grant.Prefixes, ","); got != "reports/,runs/r1/" {
		t.Fatalf("the principal's grant has prefixes %q, want reports/,runs/r1/", got)
	}
	if !p.Grant.Covers("reports/q1.md") || p.Grant.Covers("reports-old/x") || p.Grant.Covers("secret/plan.md") {
		t.Fatalf("the grant %+v covers the wrong paths", p.Grant)
	}
}

func TestMetadataURLs(t *testing.T) {
	for issuer, want := range map[string]string{
		"https://as.example":         "https://as.example/.well-known/oauth-authorization-server https://as.example/.well-known/openid-configuration",
		"http://127.0.0.1:4444/":     "http://127.0.0.1:4444/.well-known/oauth-authorization-server http://127.0.0.1:4444/.well-known/openid-configuration",
		"https://as.example/tenant1": "https://as.example/.well-known/oauth-authorization-server/tenant1 https://as.example/tenant1/.well-known/openid-configuration https://as.example/.well-known/openid-configuration/tenant1",
	} {
		if got := strings.Join(oauth.MetadataURLs(issuer), " "); got != want {
			t.Errorf("MetadataURLs(%q) = %s, want %s", issuer, got, want)
		}
	}
}

func TestCheckIssuer(t *testing.T) {
	for issuer, ok := range map[string]bool{
		"https://as.example": true, "http://127.0.0.1:4444/": true, "https://as.example/t": true,
		"": false, "as.example": false, "ftp://as.example": false, "https://as.example?x=1": false,
		"https://as.example#f": false, "https://u:p@as.example": false, "https://": false,
	} {
		if err := oauth.CheckIssuer(issuer); (err == nil) != ok {
			t.Errorf("CheckIssuer(%q) = %v", issuer, err)
		}
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for tok, ok := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln": true,
		"afs_abcdef":                    false,
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIi": false,
		"eyJa.b.c.d":                    false,
		"eyJa.b+c.d":                    false,
		"":                              false,
	} {
		if oauth.LooksLikeJWT(tok) != ok {
			t.Errorf("LooksLikeJWT(%q) = %v", tok, !ok)
		}
	}
}
