package oauthtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Hydra is the Ory Hydra v2.3.0 the test scripts start on the test
// Postgres (scripts/test.sh: hydra_start), named by
// AGENTFS_TEST_HYDRA_PUBLIC_URL (OAuth, the issuer) and
// AGENTFS_TEST_HYDRA_ADMIN_URL (clients, keys, login and consent).
type Hydra struct {
	// Issuer is Hydra's issuer identifier, as its tokens' iss has it
	// (with a trailing slash).
	Issuer string
	Public string
	Admin  string
	client *http.Client
}

// NewHydra returns the test Hydra, failing the test (never skipping it)
// when the scripts did not start one.
func NewHydra(t testing.TB) *Hydra {
	t.Helper()
	pub, adm := os.Getenv("AGENTFS_TEST_HYDRA_PUBLIC_URL"), os.Getenv("AGENTFS_TEST_HYDRA_ADMIN_URL")
	if pub == "" || adm == "" {
		t.Fatal("AGENTFS_TEST_HYDRA_PUBLIC_URL and AGENTFS_TEST_HYDRA_ADMIN_URL are not set: run the tests with " +
			"`make test` or `scripts/test.sh ./PACKAGE/`, which start Ory Hydra (scripts/lib.sh: ensure_deps hydra, hydra_start)")
	}
	h := &Hydra{Public: strings.TrimSuffix(pub, "/"), Admin: strings.TrimSuffix(adm, "/"),
		client: &http.Client{Timeout: 20 * time.Second}}
	var meta struct {
		Issuer string `json:"issuer"`
	}
	// scripts/test.sh builds and starts Hydra while go test compiles: it
	// may be a little late the first time (a cold build).
	deadline := time.Now().Add(hydraStartTimeout)
	for {
		err := h.do(http.MethodGet, h.Public+"/.well-known/openid-configuration", nil, &meta)
		if err == nil && meta.Issuer != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Hydra at %s did not answer its discovery metadata within %s (%v): is it running? `make test` "+
				"starts it (its log: hydra-start.log and hydra.log in the test servers' log directory)", h.Public, hydraStartTimeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	h.Issuer = meta.Issuer
	return h
}

// hydraStartTimeout bounds the wait for the Hydra the scripts start: a
// cold build of it takes about 80 s of two cores, more while go test
// compiles beside it.
const hydraStartTimeout = 4 * time.Minute

// do sends a JSON request (body nil: none) and decodes a 2xx answer into
// out (nil: discarded).
func (h *Hydra) do(method, u string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, u, res.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Client is an OAuth client registered at Hydra.
type Client struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret"`
}

// ClientSpec is what a test registers: grant types (default
// client_credentials), scopes, the audiences it may ask for, redirect
// URIs and how it authenticates at the token endpoint (default
// client_secret_basic; "none" for a public client using PKCE).
type ClientSpec struct {
	GrantTypes   []string `json:"grant_types"`
	Scope        string   `json:"scope"`
	Audience     []string `json:"audience"`
	RedirectURIs []string `json:"redirect_uris,omitempty"`
	AuthMethod   string   `json:"token_endpoint_auth_method,omitempty"`
	// ResponseTypes default to code when the grant types hold
	// authorization_code.
	ResponseTypes []string `json:"response_types,omitempty"`
	// AccessTokenLifespan, when set, is how long its client-credentials
	// tokens live (Hydra's per-client lifespans).
	AccessTokenLifespan time.Duration `json:"-"`
}

// CreateClient registers a client.
func (h *Hydra) CreateClient(t testing.TB, spec ClientSpec) Client {
	t.Helper()
	if len(spec.GrantTypes) == 0 {
		spec.GrantTypes = []string{"client_credentials"}
	}
	for _, g := range spec.GrantTypes {
		if g == "authorization_code" && len(spec.ResponseTypes) == 0 {
			spec.ResponseTypes = []string{"code"}
		}
	}
	var c Client
	if err := h.do(http.MethodPost, h.Admin+"/admin/clients", spec, &c); err != nil {
		t.Fatalf("register a Hydra client: %v", err)
	}
	if spec.AccessTokenLifespan > 0 {
		life := map[string]string{"client_credentials_grant_access_token_lifespan": spec.AccessTokenLifespan.String(),
			"authorization_code_grant_access_token_lifespan": spec.AccessTokenLifespan.String()}
		if err := h.do(http.MethodPut, h.Admin+"/admin/clients/"+c.ID+"/lifespans", life, nil); err != nil {
			t.Fatalf("set the client's token lifespan: %v", err)
		}
	}
	return c
}

// tokenResponse is the token endpoint's answer.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
}

// ClientCredentials gets an access token for c with scope, for audience
// (Hydra's parameter for what RFC 8707 calls the resource; "" asks for
// none).
func (h *Hydra) ClientCredentials(t testing.TB, c Client, scope, audience string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}
	if audience != "" {
		form.Set("audience", audience)
	}
	return h.token(t, form, c)
}

func (h *Hydra) token(t testing.TB, form url.Values, c Client) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.Public+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.Secret != "" {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("Hydra's token endpoint: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var tr tokenResponse
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("Hydra's token endpoint: %s: %s", res.Status, b)
	}
	return tr.AccessToken
}

// accessTokenKeys is the key set Hydra signs JWT access tokens with.
const accessTokenKeys = "hydra.jwt.access-token"

// RotateKey makes Hydra sign access tokens with a new key from now on (it
// signs with the newest key of the set) and returns its kid. The key is
// ES256: Hydra makes an RSA key of 4096 bits, which takes it many seconds
// on a small machine, and a rotation to another algorithm is a rotation
// all the same.
func (h *Hydra) RotateKey(t testing.TB) string {
	t.Helper()
	kid := fmt.Sprintf("rotated-%d", time.Now().UnixNano())
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	body := map[string]string{"alg": "ES256", "use": "sig", "kid": kid}
	if err := h.do(http.MethodPost, h.Admin+"/admin/keys/"+accessTokenKeys, body, &set); err != nil {
		t.Fatalf("create a Hydra signing key: %v", err)
	}
	if len(set.Keys) == 0 {
		t.Fatal("Hydra made no key")
	}
	return set.Keys[0].KID
}

// CodeFlow is an authorization-code request with PKCE (S256).
type CodeFlow struct {
	Client      Client
	RedirectURI string
	Scope       string
	Audience    string
	// Subject is the user the login step signs in.
	Subject string
}

// AuthorizationCode runs the authorization-code flow with PKCE the way a
// browser, a login-and-consent app and a public client do together: the
// client sends the user to the authorization endpoint with a code
// challenge; Hydra redirects to its login URL with a login challenge,
// which the login app accepts (Hydra's admin API) for Subject; then to
// its consent URL with a consent challenge, which the consent app accepts
// granting the scopes and audience asked for; Hydra redirects back with
// a code, which the client exchanges with its code verifier. It returns
// the access token.
func (h *Hydra) AuthorizationCode(t testing.TB, f CodeFlow) string {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	q := url.Values{"response_type": {"code"}, "client_id": {f.Client.ID}, "redirect_uri": {f.RedirectURI},
		"scope": {f.Scope}, "state": {state}, "code_challenge": {Base64(sum[:])}, "code_challenge_method": {"S256"}}
	if f.Audience != "" {
		q.Set("audience", f.Audience)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := h.redirect(t, browser, h.Public+"/oauth2/auth?"+q.Encode())
	login := next.Query().Get("login_challenge")
	if login == "" {
		t.Fatalf("Hydra did not send the user to login: %s", next)
	}
	var accepted struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := h.do(http.MethodPut, h.Admin+"/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(login),
		map[string]any{"subject": f.Subject}, &accepted); err != nil {
		t.Fatalf("accept the login: %v", err)
	}
	next = h.redirect(t, browser, accepted.RedirectTo)
	consent := next.Query().Get("consent_challenge")
	if consent == "" {
		t.Fatalf("Hydra did not ask for consent: %s", next)
	}
	var asked struct {
		Scopes    []string `json:"requested_scope"`
		Audiences []string `json:"requested_access_token_audience"`
	}
	cq := "?consent_challenge=" + url.QueryEscape(consent)
	if err := h.do(http.MethodGet, h.Admin+"/admin/oauth2/auth/requests/consent"+cq, nil, &asked); err != nil {
		t.Fatalf("read the consent request: %v", err)
	}
	if err := h.do(http.MethodPut, h.Admin+"/admin/oauth2/auth/requests/consent/accept"+cq,
		map[string]any{"grant_scope": asked.Scopes, "grant_access_token_audience": asked.Audiences}, &accepted); err != nil {
		t.Fatalf("accept the consent: %v", err)
	}
	back := h.redirect(t, browser, accepted.RedirectTo)
	// Hydra may pass through its own auth endpoint once more before it
	// sends the user back to the client.
	for range 3 {
		if strings.HasPrefix(back.String(), f.RedirectURI) {
			break
		}
		back = h.redirect(t, browser, back.String())
	}
	if back.Query().Get("state") != state || back.Query().Get("code") == "" {
		t.Fatalf("Hydra's redirect back to the client holds no code for our state: %s", back)
	}
	return h.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
		"redirect_uri": {f.RedirectURI}, "client_id": {f.Client.ID}, "code_verifier": {verifier}}, f.Client)
}

// redirect GETs u and returns where its redirect points.
func (h *Hydra) redirect(t testing.TB, browser *http.Client, u string) *url.URL {
	t.Helper()
	res, err := browser.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	loc, err := res.Location()
	if err != nil {
		t.Fatalf("GET %s: %s, no redirect: %s", u, res.Status, b)
	}
	return loc
}
