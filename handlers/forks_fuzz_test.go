package handlers_test

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzForkBodies fuzzes the JSON bodies of POST /v1/forks (into a fresh
// folder, or onto a taken one) and of POST /v1/forks/{id}/merge: every
// answer is a success or a problem, never a 5xx, a hang or a broken
// exchange (fuzzServer.check).
func FuzzForkBodies(f *testing.F) {
	s := newFuzzServer(f)
	s.setup(f, "POST", "/v1/files?path=forksrc/a.txt", []byte("a"), http.StatusCreated)
	s.setup(f, "POST", "/v1/files?path=forktaken/a.txt", []byte("t"), http.StatusCreated)
	fork := s.setupID(f, "POST", "/v1/forks", []byte(`{"from":"forksrc","to":"forkdst"}`), http.StatusCreated,
		"Content-Type", "application/json")
	for _, seed := range []struct {
		merge bool
		body  string
	}{
		{false, `{"from":"forksrc","to":"$fresh"}`},
		{false, `{"from":"forksrc","to":"forktaken"}`},
		{false, `{"from":"forksrc","to":"forksrc/in"}`},
		{false, `{"from":"forksrc/","to":"forksrc"}`},
		{false, `{"from":"","to":""}`},
		{false, `{"from":"forksrc","to":"$fresh","as_of":"now"}`},
		{false, `{"from":"forksrc","to":"$fresh","as_of":"2000-01-01T00:00:00Z"}`},
		{false, `{"from":"forksrc","to":"$fresh","as_of":"ckpt_nope"}`},
		{false, `{"from":"forksrc","to":"$fresh","as_of":"c1.zzz"}`},
		{false, `{"from":"a\u0000b","to":"x/../y"}`},
		{false, "{\"from\":\"bad\xff\",\"to\":\"x\"}"},
		{false, `{"from":null,"to":[],"as_of":{}}`},
		{false, `{"from":"forksrc","to":"$fresh","from":"x"}`},
		{true, `{}`},
		{true, ``},
		{true, `{"dry_run":true}`},
		{true, `{"on_conflict":"fork"}`},
		{true, `{"on_conflict":"target","dry_run":false}`},
		{true, `{"on_conflict":"maybe"}`},
		{true, `{"on_conflict":null,"dry_run":null}`},
		{true, `[`},
	} {
		f.Add(seed.merge, seed.body)
	}
	f.Fuzz(func(t *testing.T, merge bool, body string) {
		var r *fuzzRequest
		if merge {
			r = newFuzzRequest(http.MethodPost, "/v1/forks/"+fork+"/merge")
		} else {
			r = newFuzzRequest(http.MethodPost, "/v1/forks")
			body = strings.ReplaceAll(body, "$fresh", s.fresh("forkto"))
		}
		r.set("Content-Type", "application/json").set("Idempotency-Key", s.fresh("key"))
		r.body = []byte(body)
		s.do(t, r, bearer(s.readWrite))
	})
}
