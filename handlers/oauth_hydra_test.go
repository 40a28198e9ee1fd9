package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mcpserver/mcptest"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/oauth/oauthtest"
)

// hydraServer is a test server that takes the JWT access tokens of the
// test Hydra, with a clock of the test's.
func hydraServer(t *testing.T) (*apitest.Server, *oauthtest.Hydra, *oauthClock) {
	t.Helper()
	h := oauthtest.NewHydra(t)
	clock := &oauthClock{t: time.Now()}
	srv := apitest.NewServer(t, apitest.Options{OAuth: oauth.Config{Issuer: h.Issuer},
		OAuthOptions: oauth.Options{Now: clock.Now, RefetchAfter: 10 * time.Second}})
	return srv, h, clock
}

// jwtHeader is the decoded protected header of a JWT.
func jwtHeader(t *testing.T, tok string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.SplitN(tok, ".", 2)[0])
	var h map[string]any
	if err != nil || json.Unmarshal(b, &h) != nil {
		t.Fatalf("not a JWT: %q", tok)
	}
	return h
}

// TestHydraClientCredentials: a client of a real authorization server gets
// a token for this server's public URL and acts, at the REST API and at
// /mcp, as its client id with the scopes it was granted; the tokens a
// resource server must refuse are 401.
func TestHydraClientCredentials(t *testing.T) {
	t.Parallel()
	srv, h, clock := hydraServer(t)
	c := h.CreateClient(t, oauthtest.ClientSpec{Scope: "read write", Audience: []string{srv.URL, "https://elsewhere.example"},
		AccessTokenLifespan: 5 * time.Minute})

	full := h.ClientCredentials(t, c, "read write", srv.URL)
	if hdr := jwtHeader(t, full); hdr["alg"] == "none" || hdr["kid"] == nil {
		t.Fatalf("Hydra's token header %v", hdr)
	}
	writer := apitest.NewClient(t, srv.URL, full)
	upload(t, writer, "hydra/a.txt", "by client credentials").Expect(t, http.StatusCreated)
	if l := list(t, srv.Client(t, c.ID), "prefix=hydra/"); len(l.Data) != 1 {
		t.Fatalf("the client id's files (the token's sub): %+v", l.Data)
	}

	reader := apitest.NewClient(t, srv.URL, h.ClientCredentials(t, c, "read", srv.URL))
	if l := list(t, reader, "prefix=hydra/"); len(l.Data) != 1 {
		t.Fatalf("a read token lists %+v", l.Data)
	}
	res := upload(t, reader, "hydra/b.txt", "x")
	res.ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	if ch := challenge(t, res); ch["error"] != "insufficient_scope" || ch["scope"] != "write" {
		t.Fatalf("403 challenge %v", ch)
	}

	cs := apitest.MCPSession(t, srv.URL, full)
	apitest.CallTool(t, cs, "write_file", map[string]any{"path": "hydra/mcp.txt", "content": "by a tool"})
	if out := apitest.CallTool(t, cs, "read_text_file", map[string]any{"path": "hydra/a.txt"}); !strings.Contains(mcptest.Text(out), "by client credentials") {
		t.Fatalf("read_text_file: %+v", out)
	}

	t.Run("Refused", func(t *testing.T) {
		for name, tok := range map[string]string{
			"WrongAudience": h.ClientCredentials(t, c, "read", "https://elsewhere.example"),
			"NoAudience":    h.ClientCredentials(t, c, "read", ""),
		} {
			r := apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/files", nil)
			r.ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
			if challenge(t, r)["error"] != "invalid_token" {
				t.Fatalf("%s: 401 without invalid_token", name)
			}
		}
		// The server's clock past the token's five minutes: expired.
		tok := h.ClientCredentials(t, c, "read", srv.URL)
		apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
		clock.Advance(6 * time.Minute)
		apitest.NewClient(t, srv.URL, tok).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
		// A server that trusts another issuer refuses Hydra's tokens.
		other, _, _ := oauthServerNoParallel(t)
		c2 := h.CreateClient(t, oauthtest.ClientSpec{Scope: "read", Audience: []string{other.URL}})
		apitest.NewClient(t, other.URL, h.ClientCredentials(t, c2, "read", other.URL)).Do("GET", "/v1/files", nil).
			ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

// oauthServerNoParallel is oauthServer for a test already parallel.
func oauthServerNoParallel(t *testing.T) (*apitest.Server, *oauthtest.Issuer, *oauthClock) {
	t.Helper()
	iss := oauthtest.NewIssuer(t, oauthtest.IssuerOptions{})
	clock := &oauthClock{t: time.Now()}
	srv := apitest.NewServer(t, apitest.Options{OAuth: oauth.Config{Issuer: iss.URL},
		OAuthOptions: oauth.Options{Now: clock.Now}})
	return srv, iss, clock
}

// TestHydraKeyRotation: once Hydra signs with a new key, its tokens are
// taken: the unknown kid makes the server fetch the keys again, at most
// once per refetch interval (so that tokens with made-up key ids cannot
// make it hammer the issuer). Not parallel: the new key is Hydra's for
// every test of the package, and a server that fetched its keys moments
// ago would wait out its refetch interval before it sees the new one.
func TestHydraKeyRotation(t *testing.T) {
	srv, h, clock := hydraServer(t)
	c := h.CreateClient(t, oauthtest.ClientSpec{Scope: "read", Audience: []string{srv.URL}})
	before := h.ClientCredentials(t, c, "read", srv.URL)
	apitest.NewClient(t, srv.URL, before).Do("GET", "/v1/files", nil).Expect(t, http.StatusOK) // keys fetched
	kid := h.RotateKey(t)
	after := h.ClientCredentials(t, c, "read", srv.URL)
	if got := jwtHeader(t, after)["kid"]; got != kid {
		t.Fatalf("Hydra signs with kid %v after the rotation, want %s", got, kid)
	}
	// Within the refetch interval of the first fetch the new key is not
	// fetched yet; past it, the unknown kid fetches the keys again.
	apitest.NewClient(t, srv.URL, after).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	clock.Advance(11 * time.Second)
	apitest.NewClient(t, srv.URL, after).Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
	apitest.NewClient(t, srv.URL, before).Do("GET", "/v1/files", nil).Expect(t, http.StatusOK) // the old key is still published
}

// TestHydraAuthorizationCode: a public client signs a user in with the
// authorization-code flow and PKCE (the login and consent accepted the way
// a login app does it, through Hydra's admin API); the token acts as that
// user.
func TestHydraAuthorizationCode(t *testing.T) {
	t.Parallel()
	srv, h, _ := hydraServer(t)
	redirect := "http://127.0.0.1:9/callback"
	c := h.CreateClient(t, oauthtest.ClientSpec{GrantTypes: []string{"authorization_code", "refresh_token"},
		Scope: "read write", Audience: []string{srv.URL}, RedirectURIs: []string{redirect}, AuthMethod: "none"})
	tok := h.AuthorizationCode(t, oauthtest.CodeFlow{Client: c, RedirectURI: redirect, Scope: "read write",
		Audience: srv.URL, Subject: "user-ada"})
	upload(t, apitest.NewClient(t, srv.URL, tok), "signed-in.txt", "x").Expect(t, http.StatusCreated)
	if l := list(t, srv.Client(t, "user-ada"), ""); len(l.Data) != 1 || l.Data[0].Path != "signed-in.txt" {
		t.Fatalf("the user's files: %+v", l.Data)
	}
}

// TestMCPClientSignsInThroughHydra: the official MCP TypeScript SDK,
// given only /mcp's URL and a client registered at Hydra, starts from a
// bare 401 and follows the discovery chain of the MCP authorization spec
// (WWW-Authenticate's resource_metadata → the protected resource
// metadata → Hydra's metadata → its token endpoint), then calls tools
// with the token (tools/node/mcp-oauth.mjs).
func TestMCPClientSignsInThroughHydra(t *testing.T) {
	t.Parallel()
	node, tools := testkit.NodeTools(t)
	srv, h, _ := hydraServer(t)
	c := h.CreateClient(t, oauthtest.ClientSpec{Scope: "read write", Audience: []string{srv.URL + "/mcp"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, node, filepath.Join(tools, "mcp-oauth.mjs"))
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "MCP_URL="+srv.URL+"/mcp", "OAUTH_ISSUER="+h.Issuer,
		"OAUTH_CLIENT_ID="+c.ID, "OAUTH_CLIENT_SECRET="+c.Secret, "OAUTH_SCOPE=read write", "MCP_TOOL_PATH=ts/hello.txt")
	out, err := cmd.CombinedOutput()
	transcript := string(out)
	t.Logf("transcript:\n%s", transcript)
	if err != nil {
		t.Fatalf("the MCP client failed: %v", err)
	}
	// The chain, in order.
	want := []string{
		"> POST " + srv.URL + "/mcp",
		`< 401 WWW-Authenticate: Bearer scope="read write", resource_metadata="` + srv.URL + `/.well-known/oauth-protected-resource/mcp"`,
		"> GET " + srv.URL + "/.well-known/oauth-protected-resource/mcp",
		"< 200",
		"/.well-known/openid-configuration",
		"< 200",
		"> POST " + strings.TrimSuffix(h.Public, "/") + "/oauth2/token (grant_type=client_credentials scope=read write",
		"resource=" + srv.URL + "/mcp",
		"< 200",
		"> POST " + srv.URL + "/mcp",
		"< 200",
		"read_text_file: signed in through OAuth",
		"\nok\n",
	}
	rest := transcript
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("the transcript lacks %q after what came before", w)
		}
		rest = rest[i+len(w):]
	}
	if l := list(t, srv.Client(t, c.ID), "prefix=ts/"); len(l.Data) != 1 {
		t.Fatalf("the tool's file is not the client's: %+v", l.Data)
	}
}
