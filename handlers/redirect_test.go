package handlers_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// redirectServer is a test server whose S3 service's public endpoint is
// the test S3 server itself, with presigned URLs valid for ttl.
func redirectServer(t *testing.T, ttl time.Duration) *apitest.Server {
	t.Helper()
	cfg := storagetest.Config(t)
	scheme := "http://"
	if cfg.S3UseSSL {
		scheme = "https://"
	}
	cfg.S3PublicEndpoint = scheme + cfg.S3Endpoint
	cfg.PresignTTL = ttl
	return apitest.NewServer(t, apitest.Options{Config: &cfg})
}

// noFollow sends requests without following redirects.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// getNoFollow sends GET target with token and headers (name, value pairs),
// without following a redirect, and checks the answer against the spec.
func getNoFollow(t *testing.T, base, token, target string, headers ...string) *apitest.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := &apitest.Response{Status: res.StatusCode, Header: res.Header, Body: body}
	apitest.Check(t, req, out)
	return out
}

// fetchPlain GETs a presigned URL with no AgentFS credentials.
func fetchPlain(t *testing.T, u string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET the presigned URL: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// redirected asks for target with redirect=true and returns the Location
// of the 307, after checking the response's headers.
func redirected(t *testing.T, srv *apitest.Server, token, target, etag string) string {
	t.Helper()
	res := getNoFollow(t, srv.URL, token, target).Expect(t, http.StatusTemporaryRedirect)
	loc := res.Header.Get("Location")
	if loc == "" || len(res.Body) != 0 {
		t.Fatalf("307 without Location or with a body: %v %q", res.Header, res.Body)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "private, no-store" {
		t.Errorf("Cache-Control %q, want private, no-store", cc)
	}
	if res.Header.Get("ETag") != etag || res.Header.Get("Repr-Digest") == "" {
		t.Errorf("307 ETag %q Repr-Digest %q, want %s and a digest", res.Header.Get("ETag"), res.Header.Get("Repr-Digest"), etag)
	}
	exp, err := http.ParseTime(res.Header.Get("Expires"))
	if err != nil || exp.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("Expires %q: %v", res.Header.Get("Expires"), err)
	}
	if strings.Contains(loc, "token") || strings.Contains(loc, token) {
		t.Fatalf("the Location carries the AgentFS token: %s", loc)
	}
	return loc
}

// TestContentRedirect: with a public S3 endpoint, redirect=true answers a
// 307 to a presigned URL that reads, with no AgentFS token, exactly the
// asked version's bytes (a range too); without it, or for HEAD, the bytes
// stream as before; share links never redirect; bad values are 422.
func TestContentRedirect(t *testing.T) {
	t.Parallel()
	srv := redirectServer(t, 5*time.Minute)
	tok := srv.Token(t, "alice")
	c := apitest.NewClient(t, srv.URL, tok)
	v1 := upload(t, c, "docs/secret plan.txt", "first version of the plan", "Content-Type", "text/plain").Expect(t, http.StatusCreated).File(t)
	send(c, "POST", "/v1/checkpoints", `{"name":"before"}`).Expect(t, http.StatusCreated)
	v2 := c.Do("POST", "/v1/files?path=docs/secret%20plan.txt&if_exists=replace", "the second, longer version of the plan",
		"Content-Type", "text/markdown").Expect(t, http.StatusOK).File(t)
	if v2.ID != v1.ID || v2.ETag == v1.ETag {
		t.Fatalf("replace: %+v after %+v", v2, v1)
	}
	content := "/v1/files/" + v2.ID + "/content"

	loc := redirected(t, srv, tok, content+"?redirect=true", v2.ETag)
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != srv.Config.S3Endpoint || u.Query().Get("X-Amz-Signature") == "" {
		t.Fatalf("Location %s is not a presigned URL on the public endpoint %s", loc, srv.Config.S3Endpoint)
	}
	if strings.Contains(u.Path, "secret") || strings.Contains(u.Path, "plan") {
		t.Fatalf("the blob key in %s is derived from the file's path", u.Path)
	}
	status, h, body := fetchPlain(t, loc)
	if status != http.StatusOK || body != "the second, longer version of the plan" {
		t.Fatalf("the presigned URL: %d %q", status, body)
	}
	if ct := h.Get("Content-Type"); ct != "text/markdown" {
		t.Errorf("the presigned URL's Content-Type %q, want text/markdown", ct)
	}
	if cd := h.Get("Content-Disposition"); cd != `attachment; filename="secret plan.txt"` {
		t.Errorf("the presigned URL's Content-Disposition %q", cd)
	}
	status, h, body = fetchPlain(t, loc, "Range", "bytes=4-9")
	if status != http.StatusPartialContent || body != "second" || h.Get("Content-Range") != "bytes 4-9/38" {
		t.Fatalf("a range of the presigned URL: %d %q %q", status, body, h.Get("Content-Range"))
	}

	t.Run("OldVersion", func(t *testing.T) {
		loc := redirected(t, srv, tok, "/v1/files/"+v1.ID+"/versions/1/content?redirect=true", v1.ETag)
		if status, _, body := fetchPlain(t, loc); status != http.StatusOK || body != "first version of the plan" {
			t.Fatalf("version 1 through its presigned URL: %d %q", status, body)
		}
		loc = redirected(t, srv, tok, content+"?as_of=before&redirect=true", v1.ETag)
		if status, _, body := fetchPlain(t, loc); status != http.StatusOK || body != "first version of the plan" {
			t.Fatalf("the content as of the checkpoint through its presigned URL: %d %q", status, body)
		}
	})

	t.Run("StreamsOtherwise", func(t *testing.T) {
		for _, q := range []string{"", "?redirect=false"} {
			res := getNoFollow(t, srv.URL, tok, content+q).Expect(t, http.StatusOK)
			if string(res.Body) != "the second, longer version of the plan" || res.Header.Get("Location") != "" {
				t.Fatalf("GET content%s: %q %v", q, res.Body, res.Header)
			}
		}
		res := c.Do("HEAD", content+"?redirect=true", nil).Expect(t, http.StatusOK)
		if res.Header.Get("Content-Length") != "38" || res.Header.Get("Location") != "" {
			t.Fatalf("HEAD with redirect=true: %v", res.Header)
		}
		getNoFollow(t, srv.URL, tok, content+"?redirect=true", "If-None-Match", v2.ETag).Expect(t, http.StatusNotModified)
		empty := upload(t, c, "empty.txt", "").Expect(t, http.StatusCreated).File(t)
		res = getNoFollow(t, srv.URL, tok, "/v1/files/"+empty.ID+"/content?redirect=true").Expect(t, http.StatusOK)
		if len(res.Body) != 0 {
			t.Fatalf("empty file: %q", res.Body)
		}
	})

	t.Run("ShareLinksNeverRedirect", func(t *testing.T) {
		_, secret := createLink(t, c, v2.ID, `{}`)
		res := getNoFollow(t, srv.URL, tok, "/s/"+secret+"?redirect=true").Expect(t, http.StatusOK)
		if string(res.Body) != "the second, longer version of the plan" || res.Header.Get("Location") != "" {
			t.Fatalf("share link with redirect=true: %d %q", res.Status, res.Body)
		}
	})

	t.Run("BadValues", func(t *testing.T) {
		for _, q := range []string{"redirect=yes", "redirect=1", "redirect=TRUE", "redirect=", "redirect=true&redirect=true"} {
			p := getNoFollow(t, srv.URL, tok, content+"?"+q).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
			if len(p.Errors) != 1 || p.Errors[0].Field != "redirect" {
				t.Errorf("%s: %+v", q, p)
			}
		}
		getNoFollow(t, srv.URL, tok, "/v1/files/"+v1.ID+"/versions/1/content?redirect=maybe").
			ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	})
}

// TestContentRedirectWithoutPublicEndpoint: with no public endpoint
// configured, redirect=true is a preference the server cannot honour: the
// bytes stream through AgentFS, as without it.
func TestContentRedirectWithoutPublicEndpoint(t *testing.T) {
	c, b := setup(t)
	if b.srv.Config.S3PublicEndpoint != "" {
		t.Fatalf("the default test server has a public endpoint %q", b.srv.Config.S3PublicEndpoint)
	}
	f := upload(t, c, "a.txt", "streamed bytes").Expect(t, http.StatusCreated).File(t)
	tok := b.srv.Token(t, "alice")
	res := getNoFollow(t, b.srv.URL, tok, "/v1/files/"+f.ID+"/content?redirect=true").Expect(t, http.StatusOK)
	if string(res.Body) != "streamed bytes" || res.Header.Get("Location") != "" {
		t.Fatalf("redirect=true without a public endpoint: %q %v", res.Body, res.Header)
	}
}

// TestContentRedirectExpires: a presigned URL stops working once its TTL
// has passed (S3 refuses it), while a new request gets a fresh one.
func TestContentRedirectExpires(t *testing.T) {
	t.Parallel()
	srv := redirectServer(t, time.Second)
	tok := srv.Token(t, "alice")
	c := apitest.NewClient(t, srv.URL, tok)
	f := upload(t, c, "short.txt", "short-lived").Expect(t, http.StatusCreated).File(t)
	target := "/v1/files/" + f.ID + "/content?redirect=true"
	loc := redirected(t, srv, tok, target, f.ETag)
	if u, _ := url.Parse(loc); u.Query().Get("X-Amz-Expires") != "1" {
		t.Fatalf("Location %s: want X-Amz-Expires=1", loc)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, _, body := fetchPlain(t, loc)
		if status == http.StatusForbidden {
			break
		}
		if status != http.StatusOK || body != "short-lived" {
			t.Fatalf("the presigned URL before it expired: %d %q", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the presigned URL still works two minutes after its 1 s expiry")
		}
		time.Sleep(250 * time.Millisecond)
	}
	// A fresh redirect is a fresh URL; its expiry starts now.
	var fresh string
	for range 20 {
		fresh = redirected(t, srv, tok, target, f.ETag)
		if status, _, body := fetchPlain(t, fresh); status == http.StatusOK && body == "short-lived" {
			return
		}
	}
	t.Fatalf("no fresh presigned URL worked in 20 tries (last %s)", fresh)
}

// TestContentRedirectScoped: a token scoped to P/ gets a redirect for a
// file inside and, outside, exactly what a plain read gets: no Location.
func TestContentRedirectScoped(t *testing.T) {
	t.Parallel()
	srv := redirectServer(t, 5*time.Minute)
	root := srv.Client(t, "alice", "read", "write", "delegate")
	in := upload(t, root, "P/a.txt", "inside").Expect(t, http.StatusCreated).File(t)
	out := upload(t, root, "Q/b.txt", "outside").Expect(t, http.StatusCreated).File(t)
	child := mint(t, root, map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P/"}, "expires_in": 3600})
	ctok := *child.Token
	loc := redirected(t, srv, ctok, "/v1/files/"+in.ID+"/content?redirect=true", in.ETag)
	if status, _, body := fetchPlain(t, loc); status != http.StatusOK || body != "inside" {
		t.Fatalf("inside through the presigned URL: %d %q", status, body)
	}
	for _, target := range []string{"/v1/files/" + out.ID + "/content", "/v1/files/" + out.ID + "/versions/1/content"} {
		plain := getNoFollow(t, srv.URL, ctok, target)
		red := getNoFollow(t, srv.URL, ctok, target+"?redirect=true")
		if plain.Status != http.StatusNotFound && plain.Status != http.StatusForbidden {
			t.Fatalf("the scoped token reads %s outside its folder: %d", target, plain.Status)
		}
		if red.Status != plain.Status || red.Header.Get("Location") != "" || strings.Contains(string(red.Body), "outside") {
			t.Fatalf("%s with redirect=true: %d %v %q, plain read %d", target, red.Status, red.Header, red.Body, plain.Status)
		}
	}
	// Another subject's file is no one's to redirect to.
	other := srv.Client(t, "bob")
	theirs := upload(t, other, "P/x.txt", "bob's").Expect(t, http.StatusCreated).File(t)
	red := getNoFollow(t, srv.URL, ctok, "/v1/files/"+theirs.ID+"/content?redirect=true")
	if red.Status != http.StatusNotFound || red.Header.Get("Location") != "" {
		t.Fatalf("another subject's file with redirect=true: %d %v", red.Status, red.Header)
	}
}
