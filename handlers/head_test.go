package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestHeadAnswersEveryGetRoute sends HEAD to every route Echo serves with
// GET, on real resources and on missing ones: HEAD answers with GET's
// status and headers and no body (the error contract), never 405.
func TestHeadAnswersEveryGetRoute(t *testing.T) {
	c, b := setup(t)
	token := b.srv.Token(t, "alice")
	f := upload(t, c, "head/a.txt", "0123456789", "X-Run-ID", "head-run").Expect(t, http.StatusCreated).File(t)
	u := createUpload(t, c, map[string]any{"path": "head/big.bin", "size_bytes": 10}, http.StatusCreated)
	batch, _ := runBatch(t, c, "head-batch", []map[string]any{{"op": "put", "path": "head/b.txt", "content": "b"}}, http.StatusAccepted)
	keyed(t, c, "head-key", "head/k.txt", "k").Expect(t, http.StatusCreated)
	link := c.Do("POST", "/v1/files/"+f.ID+"/links", `{}`, "Content-Type", "application/json").Expect(t, http.StatusCreated)
	var l struct{ URL string }
	link.JSON(t, &l)
	secret := l.URL[strings.LastIndex(l.URL, "/")+1:]
	existing := strings.NewReplacer(":code", "NOT_FOUND", ":idempotency_key", "head-key",
		"/files/:id", "/files/"+f.ID, "/uploads/:id", "/uploads/"+u.ID, "/batch/:id", "/batch/"+batch.ID,
		":n", "1", ":secret", secret, ":run_id", "head-run")
	missing := strings.NewReplacer(":code", "NO_SUCH_CODE", ":idempotency_key", "no-such-key",
		"/files/:id", "/files/"+missingFileID, "/uploads/:id", "/uploads/upl_"+strings.Repeat("0", 26),
		"/batch/:id", "/batch/batch_"+strings.Repeat("0", 26), ":n", "99", ":secret", "no-such-secret",
		":run_id", "no-such-run")

	heads := map[string]bool{}
	for _, r := range b.srv.API.Routes() {
		if r.Method == http.MethodHead {
			heads[r.Path] = true
		}
	}
	gets := 0
	for _, r := range b.srv.API.Routes() {
		if r.Method != http.MethodGet || strings.HasPrefix(r.Path, "/console") {
			continue // the console's HEAD: TestConsoleServesItsPage
		}
		gets++
		if !heads[r.Path] {
			t.Errorf("GET %s has no HEAD route", r.Path)
		}
		paths := []string{existing.Replace(r.Path)}
		if strings.Contains(r.Path, ":") {
			paths = append(paths, missing.Replace(r.Path)) // the problem's status and headers
		}
		for _, path := range paths {
			t.Run(path, func(t *testing.T) { sameAsGet(t, apitest.NewClient(t, b.srv.URL, token), path) })
		}
	}
	if gets < 12 {
		t.Fatalf("only %d GET routes", gets)
	}
	t.Run("Unauthenticated", func(t *testing.T) {
		sameAsGet(t, apitest.NewClient(t, b.srv.URL, "afs_unknown"), "/v1/files")
	})
	t.Run("NotModified", func(t *testing.T) {
		sameAsGet(t, apitest.NewClient(t, b.srv.URL, token), "/v1/files/"+f.ID, "If-None-Match", f.ETag)
	})
}

// sameAsGet sends GET and HEAD to path and holds HEAD to GET's status and
// headers, with no body.
func sameAsGet(t *testing.T, c *apitest.Client, path string, headers ...string) {
	t.Helper()
	get := c.Do("GET", path, nil, headers...)
	head := c.Do("HEAD", path, nil, headers...)
	if head.Status != get.Status {
		t.Fatalf("HEAD %s: %d, GET: %d\nbody: %s", path, head.Status, get.Status, head.Body)
	}
	if len(head.Body) != 0 {
		t.Fatalf("HEAD %s has a body: %q", path, head.Body)
	}
	for name := range get.Header {
		switch name {
		case "Date", "X-Request-Id", "Transfer-Encoding":
			continue // per response, or how GET's body is framed
		case "Content-Length":
			// /metrics counts the GET just made, so its length moves.
			if v := head.Header.Get(name); v != "" && v != get.Header.Get(name) && path != "/metrics" {
				t.Errorf("HEAD %s: Content-Length %s, GET: %s", path, v, get.Header.Get(name))
			}
			continue
		}
		if h, g := strings.Join(head.Header.Values(name), ", "), strings.Join(get.Header.Values(name), ", "); h != g {
			t.Errorf("HEAD %s: %s %q, GET: %q", path, name, h, g)
		}
	}
	for name := range head.Header {
		if _, ok := get.Header[name]; !ok && name != "Content-Length" {
			t.Errorf("HEAD %s has %s, GET does not", path, name)
		}
	}
}
