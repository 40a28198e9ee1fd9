package handlers_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/mcpserver/mcptest"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/oauth/oauthtest"
)

// oauthServer is a test server that takes the JWT access tokens of an
// issuer of the test's own.
func oauthServer(t *testing.T, cfg oauth.Config) (*apitest.Server, *oauthtest.Issuer, *oauthClock) {
	t.Helper()
	t.Parallel()
	iss := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{OIDCOnly: true, TrailingSlash: true})
	cfg.Issuer = iss.URL
	clock := &oauthClock{t: time.Now()}
	srv := apitest.NewServer(t, apitest.Options{OAuth: cfg,
		OAuthOptions: oauth.Options{RefetchAfter: 10 * time.Second, Now: clock.Now}})
	return srv, iss, clock
}

// oauthClock is the verifier's clock, moved by the test.
type oauthClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *oauthClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *oauthClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// challenge parses a WWW-Authenticate: Bearer header's parameters.
func challenge(t *testing.T, res *apitest.Response) map[string]string {
	t.Helper()
	h := res.Header.Get("WWW-Authenticate")
	rest, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		t.Fatalf("WWW-Authenticate %q is no Bearer challenge", h)
	}
	out := map[string]string{}
	for _, part := range strings.Split(rest, ", ") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			t.Fatalf("WWW-Authenticate %q: malformed parameter %q", h, part)
		}
		out[k] = v[1 : len(v)-1]
	}
	return out
}

func TestProtectedResourceMetadata(t *testing.T) {
	t.Run("WithoutAnIssuerItNamesNone", func(t *testing.T) {
		t.Parallel()
		srv := apitest.NewServer(t, apitest.Options{})
		var m api.ProtectedResource
		res := apitest.NewClient(t, srv.URL, "").Do("GET", "/.well-known/oauth-protected-resource", nil).Expect(t, http.StatusOK)
		res.JSON(t, &m)
		if m.Resource != srv.URL || len(m.AuthorizationServers) != 0 || !slices.Equal(m.BearerMethodsSupported, []string{"header"}) {
			t.Fatalf("metadata %+v", m)
		}
	})
	t.Run("NamesTheIssuerAndTheResource", func(t *testing.T) {
		srv, iss, _ := oauthServer(t, oauth.Config{})
		anon := apitest.NewClient(t, srv.URL, "")
		for path, resource := range map[string]string{
			"/.well-known/oauth-protected-resource":     srv.URL,
			"/.well-known/oauth-protected-resource/mcp": srv.URL + "/mcp",
		} {
			res := anon.Do("GET", path, nil).Expect(t, http.StatusOK)
			var m api.ProtectedResource
			res.JSON(t, &m)
			if m.Resource != resource || !slices.Equal(m.AuthorizationServers, []string{iss.URL}) ||
				!slices.Equal(m.ScopesSupported, []string{"read", "write"}) {
				t.Fatalf("%s: %+v", path, m)
			}
			if res.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("%s: no CORS header for browser clients", path)
			}
			anon.Do("HEAD", path, nil).Expect(t, http.StatusOK)
		}
		var p api.Protocol
		anon.Do("GET", "/v1/protocol", nil).Expect(t, http.StatusOK).JSON(t, &p)
		if p.OAuth.ResourceMetadata != srv.URL+"/.well-known/oauth-protected-resource" ||
			!slices.Equal(p.OAuth.AuthorizationServers, []string{iss.URL}) {
			t.Fatalf("/v1/protocol oauth %+v", p.OAuth)
		}
	})
}

func TestOAuthChallenges(t *testing.T) {
	srv, _, _ := oauthServer(t, oauth.Config{})
	anon := apitest.NewClient(t, srv.URL, "")
	meta := srv.URL + "/.well-known/oauth-protected-resource"
	cases := []struct {
		name, method, path, token string
		want                      map[string]string
	}{
		{"NoTokenForARead", "GET", "/v1/files", "", map[string]string{"resource_metadata": meta, "scope": "read"}},
		{"NoTokenForAWrite", "POST", "/v1/files?path=a.txt", "", map[string]string{"resource_metadata": meta, "scope": "write"}},
		{"NoTokenAtMCP", "POST", "/mcp", "", map[string]string{"resource_metadata": meta + "/mcp", "scope": "read write"}},
		{"AnUnknownToken", "GET", "/v1/files", "afs_unknown", map[string]string{"resource_metadata": meta, "scope": "read", "error": "invalid_token"}},
		{"AForgedJWT", "GET", "/v1/files", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", map[string]string{"resource_metadata": meta, "scope": "read", "error": "invalid_token"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.token != "" {
				headers = []string{"Authorization", "Bearer " + tc.token}
			}
			res := anon.Do(tc.method, tc.path, "{}", headers...)
			res.ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
			if got := challenge(t, res); !mapsEqual(got, tc.want) {
				t.Fatalf("challenge %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("AMissingScopeIsInsufficientScope", func(t *testing.T) {
		reader := apitest.NewClient(t, srv.URL, srv.Token(t, "alice", "read"))
		res := reader.Do("POST", "/v1/files?path=a.txt", "x")
		if p := res.ExpectProblem(t, http.StatusForbidden, "FORBIDDEN"); p.MissingScope != "write" {
			t.Fatalf("missing_scope %q", p.MissingScope)
		}
		want := map[string]string{"error": "insufficient_scope", "scope": "write", "resource_metadata": meta}
		if got := challenge(t, res); !mapsEqual(got, want) {
			t.Fatalf("challenge %v, want %v", got, want)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOAuthAccessTokens(t *testing.T) {
	srv, iss, clock := oauthServer(t, oauth.Config{})
	now := clock.Now()
	jwt := func(edit func(oauthtest.Claims)) *apitest.Client {
		c := iss.Standard(srv.URL, "agent-7", "read write", now)
		if edit != nil {
			edit(c)
		}
		return apitest.NewClient(t, srv.URL, iss.Sign(t, c))
	}

	t.Run("ActAsTheirSubjectWithTheirScopes", func(t *testing.T) {
		upload(t, jwt(nil), "oauth/a.txt", "from a JWT").Expect(t, http.StatusCreated)
		// The same subject through an AgentFS token sees the file.
		if l := list(t, srv.Client(t, "agent-7"), "prefix=oauth/"); len(l.Data) != 1 {
			t.Fatalf("the subject's files: %+v", l.Data)
		}
		if l := list(t, srv.Client(t, "someone-else"), "prefix=oauth/"); len(l.Data) != 0 {
			t.Fatalf("another subject sees %+v", l.Data)
		}
		reader := jwt(func(c oauthtest.Claims) { c["scope"] = "read" })
		if l := list(t, reader, "prefix=oauth/"); len(l.Data) != 1 {
			t.Fatalf("a read token lists %+v", l.Data)
		}
		res := upload(t, reader, "oauth/b.txt", "x")
		res.ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		if challenge(t, res)["error"] != "insufficient_scope" {
			t.Fatal("403 without insufficient_scope")
		}
		scp := jwt(func(c oauthtest.Claims) { delete(c, "scope"); c["scp"] = []string{"read"} })
		if l := list(t, scp, "prefix=oauth/"); len(l.Data) != 1 {
			t.Fatalf("a token with scp lists %+v", l.Data)
		}
	})

	t.Run("RefusedTokensAre401", func(t *testing.T) {
		for name, edit := range map[string]func(oauthtest.Claims){
			"Expired":       func(c oauthtest.Claims) { c["exp"] = now.Add(-time.Hour).Unix() },
			"NotYetValid":   func(c oauthtest.Claims) { c["nbf"] = now.Add(time.Hour).Unix() },
			"WrongAudience": func(c oauthtest.Claims) { c["aud"] = []string{"https://elsewhere.example"} },
			"WrongIssuer":   func(c oauthtest.Claims) { c["iss"] = "https://other-issuer.example/" },
			"NoSubject":     func(c oauthtest.Claims) { delete(c, "sub") },
		} {
			t.Run(name, func(t *testing.T) {
				res := jwt(edit).Do("GET", "/v1/files", nil)
				res.ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
				if challenge(t, res)["error"] != "invalid_token" {
					t.Fatal("401 of a refused JWT without error=invalid_token")
				}
			})
		}
	})

	t.Run("AtTheMCPDoor", func(t *testing.T) {
		for _, aud := range []string{srv.URL, srv.URL + "/mcp"} {
			tok := iss.Sign(t, iss.Standard(aud, "agent-7", "read write", now))
			cs := apitest.MCPSession(t, srv.URL, tok)
			if res := apitest.CallTool(t, cs, "read_text_file", map[string]any{"path": "oauth/a.txt"}); !strings.Contains(mcptest.Text(res), "from a JWT") {
				t.Fatalf("aud %s: read_text_file: %+v", aud, res)
			}
		}
		// A token for /mcp's resource is not one for the REST API's.
		tok := iss.Sign(t, iss.Standard(srv.URL+"/mcp", "agent-7", "read write", now))
		apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

func TestOAuthSubjectClaim(t *testing.T) {
	srv, iss, clock := oauthServer(t, oauth.Config{SubjectClaim: "client_id"})
	now := clock.Now()
	c := iss.Standard(srv.URL, "ignored", "read write", now)
	c["client_id"] = "robot-1"
	upload(t, apitest.NewClient(t, srv.URL, iss.Sign(t, c)), "x.txt", "x").Expect(t, http.StatusCreated)
	if l := list(t, srv.Client(t, "robot-1"), ""); len(l.Data) != 1 {
		t.Fatalf("robot-1's files: %+v", l.Data)
	}
}

func TestOAuthIssuerDown(t *testing.T) {
	// Before any key was fetched, an issuer that is down makes a JWT
	// unverifiable: 503, retryable, not a 401 that would make the client
	// throw its token away.
	srv2, iss2, clock2 := oauthServer(t, oauth.Config{})
	now := clock2.Now()
	iss2.SetDown(true)
	tok := iss2.Sign(t, iss2.Standard(srv2.URL, "a", "read", now))
	p := apitest.NewClient(t, srv2.URL, tok).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE")
	if !p.Retryable {
		t.Fatal("503 not retryable")
	}
	iss2.SetDown(false)
	apitest.NewClient(t, srv2.URL, tok).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE")
	clock2.Advance(11 * time.Second) // past RefetchAfter: the issuer is asked again
	apitest.NewClient(t, srv2.URL, tok).Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
}
