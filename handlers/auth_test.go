package handlers_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func TestAuth(t *testing.T) {
	t.Run("RequiresBearerToken", func(t *testing.T) {
		_, b := setup(t)
		anon := apitest.NewClient(t, b.srv.URL, "")
		res := anon.Do("GET", "/v1/files", nil)
		res.ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
		if res.Header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
		apitest.NewClient(t, b.srv.URL, "afs_not-a-real-token").Do("GET", "/v1/files", nil).
			ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
		anon.Do("GET", "/v1/files", nil, "Authorization", "Basic dXNlcjpwYXNz").
			ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	})

	t.Run("DuplicateAuthorizationOrKeyIsAnInvalidHeader", func(t *testing.T) {
		c, b := setup(t)
		tok := "Bearer " + b.srv.Token(t, "alice")
		anon := apitest.NewClient(t, b.srv.URL, "")
		for name, headers := range map[string][]string{
			// Checked before authentication: even two valid tokens are refused.
			"Authorization":   {"Authorization", tok, "Authorization", tok},
			"Idempotency-Key": {"Authorization", tok, "Idempotency-Key", "k-1", "Idempotency-Key", "k-2"},
		} {
			for _, r := range [][2]string{{"GET", "/v1/files"}, {"POST", "/v1/files?path=dup.txt"}} {
				p := anon.Do(r[0], r[1], "x", headers...).ExpectProblem(t, http.StatusBadRequest, "INVALID_HEADER")
				if len(p.Errors) != 1 || p.Errors[0].Field != name {
					t.Fatalf("%s %s with two %s: errors %+v, want one naming %s", r[0], r[1], name, p.Errors, name)
				}
			}
		}
		// Two different tokens are refused before either is looked up: an
		// unknown one does not turn it into a 401.
		anon.Do("GET", "/v1/files", nil, "Authorization", tok, "Authorization", "Bearer afs_unknown").
			ExpectProblem(t, http.StatusBadRequest, "INVALID_HEADER")
		c.Do("GET", "/v1/operations/k-1", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND") // nothing ran
		if n := len(list(t, c, "include_deleted=true").Data); n != 0 {
			t.Fatalf("a refused request stored %d files", n)
		}
	})

	t.Run("RevokedTokenIsRejected", func(t *testing.T) {
		_, b := setup(t)
		tok := b.srv.Token(t, "carol")
		c := apitest.NewClient(t, b.srv.URL, tok)
		c.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
		if err := b.srv.Store.RevokeToken(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		c.Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	})

	t.Run("ScopesLimitWhatATokenDoes", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "x").Expect(t, 201).File(t)
		reader := apitest.NewClient(t, b.srv.URL, b.srv.Token(t, "alice", "read"))
		reader.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		upload(t, reader, "t.txt", "x").ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		reader.Do("DELETE", "/v1/files/"+f.ID, nil).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		writer := apitest.NewClient(t, b.srv.URL, b.srv.Token(t, "alice", "write"))
		writer.Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		upload(t, writer, "t.txt", "x").Expect(t, http.StatusCreated)
	})

	t.Run("OtherSubjectsFilesAreNotFound", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "secret.txt", "mine").Expect(t, 201).File(t)
		bob := b.srv.Client(t, "bob")
		for _, r := range [][2]string{
			{"GET", "/v1/files/" + f.ID}, {"HEAD", "/v1/files/" + f.ID},
			{"GET", "/v1/files/" + f.ID + "/content"}, {"HEAD", "/v1/files/" + f.ID + "/content"},
			{"DELETE", "/v1/files/" + f.ID}, {"POST", "/v1/files/" + f.ID + "/restore"},
		} {
			if res := bob.Do(r[0], r[1], nil); res.Status != http.StatusNotFound {
				t.Errorf("%s %s by another subject: %d", r[0], r[1], res.Status)
			}
		}
		if l := list(t, bob, ""); len(l.Data) != 0 {
			t.Fatalf("bob lists alice's files: %+v", l.Data)
		}
		// bob's own file at the same path is independent of alice's.
		upload(t, bob, "secret.txt", "his").Expect(t, http.StatusCreated)
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
		if string(got.Body) != "mine" {
			t.Fatalf("alice's content changed: %q", got.Body)
		}
	})
}

// TestFailedAuthenticationsAreLimitedPerAddress: a client address that
// keeps failing to authenticate (random tokens, which no cache can answer)
// is answered 429 RATE_LIMITED with Retry-After once its failures exceed
// the burst, without a Postgres lookup; a token this instance already
// trusts still gets through from that address, and a request without a
// token is still a 401.
func TestFailedAuthenticationsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{AuthFailuresPerSecond: 0.001, AuthFailureBurst: 3}})
	good := apitest.NewClient(t, srv.URL, srv.Token(t, "alice"))
	storagetest.Eventually(t, 10*time.Second, "the token to be answered from the cache", func() bool {
		before := srv.Store.Counters().TokenCacheHits
		good.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
		return srv.Store.Counters().TokenCacheHits > before
	})
	bogus := func() *apitest.Client {
		return apitest.NewClient(t, srv.URL, "afs_"+strings.Repeat(strconv.Itoa(rand.Int()), 3))
	}
	for range 3 {
		bogus().Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	lookups := srv.Store.Counters().TokenLookups
	for range 5 {
		res := bogus().Do("GET", "/v1/files", nil)
		res.ExpectProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
		}
	}
	if got := srv.Store.Counters().TokenLookups - lookups; got != 0 {
		t.Fatalf("%d tokens were looked up past the limit", got)
	}
	good.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK)
	apitest.NewClient(t, srv.URL, "").Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	// A token this instance has not looked up waits like the others: from
	// this address, nothing unknown is looked up until the limit allows.
	fresh := apitest.NewClient(t, srv.URL, srv.Token(t, "bob"))
	fresh.Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
}

// TestEveryRouteChecksTheScopesOfItsOperation sends every /v1 route with
// a token of each kind: a route whose operation (API.RouteOperation) needs
// a scope the token lacks is 403 FORBIDDEN naming it, and no other route
// is, exactly as agentfs's operation table says.
func TestEveryRouteChecksTheScopesOfItsOperation(t *testing.T) {
	_, b := setup(t)
	kinds := [][]string{{agentfs.ScopeRead}, {agentfs.ScopeWrite}, {agentfs.ScopeRead, agentfs.ScopeWrite}}
	clients := map[string]*apitest.Client{}
	for _, scopes := range kinds {
		clients[strings.Join(scopes, "+")] = b.srv.Client(t, "alice", scopes...)
	}
	params := strings.NewReplacer(":id", "file_00000000000000000000000000", ":n", "1",
		":run_id", "run-1", ":idempotency_key", "key-1")
	checked := 0
	for _, r := range b.srv.API.Routes() {
		if !strings.HasPrefix(r.Path, "/v1/") || r.Path == "/v1/protocol" {
			continue
		}
		op, ok := b.srv.API.RouteOperation(r.Method, r.Path)
		need, known := agentfs.ScopesFor(op)
		if !ok || !known {
			t.Errorf("%s %s runs %q, which the operation table does not know", r.Method, r.Path, op)
			continue
		}
		for _, scopes := range kinds {
			var missing string
			held := agentfs.RootScopes(scopes) // the clients' tokens are root tokens
			for _, s := range need {
				if !slices.Contains(held, s) && missing == "" {
					missing = s
				}
			}
			res := clients[strings.Join(scopes, "+")].Do(r.Method, params.Replace(r.Path), nil)
			switch {
			case missing == "" && res.Status == http.StatusForbidden:
				t.Errorf("%s %s (%s) with %v: 403, want it let through: %s", r.Method, r.Path, op, scopes, res.Body)
			case missing != "" && r.Method == http.MethodHead: // a problem without its body
				res.Expect(t, http.StatusForbidden)
			case missing != "":
				p := res.ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
				if p.MissingScope != missing {
					t.Errorf("%s %s (%s) with %v: missing_scope %q, want %q", r.Method, r.Path, op, scopes, p.MissingScope, missing)
				}
			}
			checked++
		}
	}
	if checked < 3*40 {
		t.Fatalf("only %d route and token pairs checked", checked)
	}
}
