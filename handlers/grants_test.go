package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// grantWorld is a subject with files inside and outside P/, a root token
// that may delegate, and a child scoped to P/.
type grantWorld struct {
	srv          *apitest.Server
	root, child  *apitest.Client
	in, out, sib api.File // P/a.txt, Q/b.txt, P-old/c.txt
	childTok     api.Token
}

func newGrantWorld(t *testing.T) *grantWorld {
	t.Helper()
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	w := &grantWorld{srv: srv, root: srv.Client(t, "alice", "read", "write", "share", "delegate")}
	w.in = upload(t, w.root, "P/a.txt", "inside", "X-Run-ID", "run-1").Expect(t, http.StatusCreated).File(t)
	w.out = upload(t, w.root, "Q/b.txt", "outside", "X-Run-ID", "run-1").Expect(t, http.StatusCreated).File(t)
	w.sib = upload(t, w.root, "P-old/c.txt", "sibling", "X-Run-ID", "run-1").Expect(t, http.StatusCreated).File(t)
	w.childTok = mint(t, w.root, map[string]any{"scopes": []string{"read", "write", "share"}, "prefixes": []string{"P"}, "expires_in": 3600})
	w.child = apitest.NewClient(t, srv.URL, *w.childTok.Token)
	return w
}

// mint makes a child token of c's with body, and returns it with its
// secret.
func mint(t *testing.T, c *apitest.Client, body map[string]any, headers ...string) api.Token {
	t.Helper()
	tok := created[api.Token](t, c, "/v1/tokens", body, headers...)
	if tok.Token == nil || !strings.HasPrefix(*tok.Token, "afs_") {
		t.Fatalf("a new token has no secret: %+v", tok)
	}
	return tok
}

func pathsOf(files []api.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

// TestScopedTokenReadsOnlyItsFolder: every read door of a token scoped to
// P/ finds nothing outside P/ (a sibling P-old/ included): listings,
// lookups by id, content, versions, links, events, runs and archives,
// operations.
func TestScopedTokenReadsOnlyItsFolder(t *testing.T) {
	w := newGrantWorld(t)
	var list api.FileList
	w.child.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if got := pathsOf(list.Data); !slices.Equal(got, []string{"P/a.txt"}) {
		t.Fatalf("the scoped token lists %v, want only P/a.txt", got)
	}
	for _, f := range []api.File{w.out, w.sib} {
		for _, p := range []string{"", "/content", "/versions", "/versions/1", "/versions/1/content", "/links"} {
			w.child.Do("GET", "/v1/files/"+f.ID+p, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		}
	}
	w.child.Do("GET", "/v1/files/"+w.in.ID+"/content", nil).Expect(t, http.StatusOK)

	// Content search: the pattern is in all three files; the token finds
	// only its own, even when it asks for the folder outside.
	for q, want := range map[string][]string{
		"q=" + url.QueryEscape("inside|outside|sibling"):                           {"P/a.txt"},
		"prefix=Q/&q=" + url.QueryEscape("outside"):                                nil,
		"glob=" + url.QueryEscape("P-old/**") + "&q=" + url.QueryEscape("sibling"): nil,
	} {
		var found api.SearchResults
		w.child.Do("GET", "/v1/search?"+q, nil).Expect(t, http.StatusOK).JSON(t, &found)
		var got []string
		for _, m := range found.Data {
			got = append(got, m.Path)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("the scoped token's search %s found %v, want %v", q, got, want)
		}
	}

	var events api.EventList
	w.child.Do("GET", "/v1/events", nil).Expect(t, http.StatusOK).JSON(t, &events)
	if len(events.Data) != 1 || events.Data[0].Path != "P/a.txt" {
		t.Fatalf("the scoped token sees events %+v, want only P/a.txt's", events.Data)
	}
	var run api.Run
	w.child.Do("GET", "/v1/runs/run-1", nil).Expect(t, http.StatusOK).JSON(t, &run)
	if run.LiveFiles != 1 {
		t.Fatalf("the scoped token's run summary counts %d live files, want 1", run.LiveFiles)
	}
	archive := w.child.Do("GET", "/v1/runs/run-1/archive", nil).Expect(t, http.StatusOK).Body
	if strings.Contains(string(archive), "Q/b.txt") || strings.Contains(string(archive), "P-old") || !strings.Contains(string(archive), "P/a.txt") {
		t.Fatal("the run archive of a scoped token holds files outside its folder")
	}
	// A run whose every file is outside does not exist for it.
	upload(t, w.root, "Q/only.txt", "x", "X-Run-ID", "run-q").Expect(t, http.StatusCreated)
	w.child.Do("GET", "/v1/runs/run-q", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	// Another token's key record may name files outside: not its to see.
	upload(t, w.root, "Q/keyed.txt", "x", "Idempotency-Key", "root-key").Expect(t, http.StatusCreated)
	w.child.Do("GET", "/v1/operations/root-key", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")

	// Points in time: an as-of listing, and a diff since a checkpoint the
	// root made, hold only what lies inside P/.
	var asOf api.FileList
	w.child.Do("GET", "/v1/files?as_of=now", nil).Expect(t, http.StatusOK).JSON(t, &asOf)
	if got := pathsOf(asOf.Data); !slices.Equal(got, []string{"P/a.txt"}) {
		t.Fatalf("the scoped token's as-of listing holds %v, want only P/a.txt", got)
	}
	w.child.Do("GET", "/v1/files/"+w.out.ID+"?as_of=now", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.root, "POST", "/v1/checkpoints", map[string]any{"name": "grant-base"}, "Idempotency-Key", "ckpt-grant-base").Expect(t, http.StatusCreated)
	upload(t, w.root, "P/new.txt", "new inside").Expect(t, http.StatusCreated)
	upload(t, w.root, "Q/new.txt", "new outside").Expect(t, http.StatusCreated)
	var diff api.DiffList
	w.child.Do("GET", "/v1/diff?from=grant-base", nil).Expect(t, http.StatusOK).JSON(t, &diff)
	if len(diff.Data) != 1 || diff.Data[0].Path != "P/new.txt" {
		t.Fatalf("the scoped token's diff since the checkpoint is %+v, want only P/new.txt", diff.Data)
	}
}

// TestScopedTokenWritesOnlyInItsFolder: a write outside P/ is 403 naming
// the prefixes, a write naming a file outside by id is 404, both ends of
// a move stay inside, and nothing outside changes.
func TestScopedTokenWritesOnlyInItsFolder(t *testing.T) {
	w := newGrantWorld(t)
	for _, p := range []string{"Q/new.txt", "P-old/new.txt", "new.txt"} {
		prob := upload(t, w.child, p, "x").ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		if !strings.Contains(prob.Detail, "P/") {
			t.Fatalf("a write outside does not name the allowed prefixes: %q", prob.Detail)
		}
	}
	upload(t, w.child, "P/sub/new.txt", "x").Expect(t, http.StatusCreated)
	send(w.child, "POST", "/v1/uploads", map[string]any{"path": "Q/up.bin", "size_bytes": 10}).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	send(w.child, "POST", "/v1/files/"+w.in.ID+"/move", map[string]any{"path": "Q/moved.txt"}).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	send(w.child, "POST", "/v1/files/"+w.out.ID+"/move", map[string]any{"path": "P/stolen.txt"}).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	w.child.Do("DELETE", "/v1/files/"+w.out.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.child, "POST", "/v1/files/"+w.out.ID+"/revert", map[string]any{"version": 1}).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.child, "PATCH", "/v1/files/"+w.out.ID, map[string]any{"expires_at": nil}).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.child, "POST", "/v1/files/"+w.out.ID+"/links", map[string]any{}).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.child, "POST", "/v1/files/"+w.in.ID+"/links", map[string]any{}).Expect(t, http.StatusCreated)

	var after api.FileList
	w.root.Do("GET", "/v1/files?prefix=Q/", nil).Expect(t, http.StatusOK).JSON(t, &after)
	if got := pathsOf(after.Data); !slices.Equal(got, []string{"Q/b.txt"}) {
		t.Fatalf("outside P/ after the scoped token's writes: %v", got)
	}
}

// TestScopedBatchItemsAndRunRevert: a batch of a scoped token runs its
// items inside and fails the one outside FORBIDDEN; its run revert plans
// only the files inside.
func TestScopedBatchItemsAndRunRevert(t *testing.T) {
	w := newGrantWorld(t)
	var b api.Batch
	send(w.child, "POST", "/v1/batch?wait=10", map[string]any{"operations": []any{
		map[string]any{"op": "put", "path": "P/ok.txt", "content": "ok"},
		map[string]any{"op": "put", "path": "Q/no.txt", "content": "no"},
		map[string]any{"op": "delete", "file_id": w.out.ID},
	}}, "Idempotency-Key", "batch-1", "X-Run-ID", "run-2").Expect(t, http.StatusAccepted).JSON(t, &b)
	if b.Status == "queued" || b.Status == "running" {
		t.Fatalf("the batch did not end: %s", b.Status)
	}
	want := []string{"succeeded", "FORBIDDEN", "NOT_FOUND"}
	for i, it := range b.Items {
		got := it.Status
		if it.Error != nil {
			got = it.Error.Code
		}
		if got != want[i] {
			t.Errorf("item %d: %s, want %s", i, got, want[i])
		}
	}
	// The root's run-1 wrote inside and outside; the child's revert undoes
	// only what it can see.
	rb := revertRun(t, w.child, "run-1", "revert-1", false)
	if rb.Status != "succeeded" || len(rb.Items) != 1 || rb.Items[0].Path == nil || *rb.Items[0].Path != "P/a.txt" {
		t.Fatalf("a scoped revert: %+v, want only P/a.txt planned and undone", rb)
	}
	var list api.FileList
	w.root.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if got := pathsOf(list.Data); !slices.Contains(got, "Q/b.txt") || !slices.Contains(got, "P-old/c.txt") || slices.Contains(got, "P/a.txt") {
		t.Fatalf("after the scoped revert: %v, want P/a.txt undone and the others kept", got)
	}
}

// TestDelegationNeverExceedsTheParent: each part a child may ask for,
// asked beyond its parent, is 403 naming the part; bad prefixes are 422.
func TestDelegationNeverExceedsTheParent(t *testing.T) {
	w := newGrantWorld(t)
	parent := mint(t, w.root, map[string]any{"scopes": []string{"read", "write", "delegate"}, "prefixes": []string{"P/"},
		"expires_in": 600, "max_bytes": 1000, "run_id": "run-9"})
	pc := apitest.NewClient(t, w.srv.URL, *parent.Token)
	for _, c := range []struct {
		body map[string]any
		part string
	}{
		{map[string]any{"scopes": []string{"share"}, "expires_in": 60}, "scopes"},
		{map[string]any{"scopes": []string{"read"}, "prefixes": []string{"Q/"}, "expires_in": 60}, "prefixes"},
		{map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P-old/"}, "expires_in": 60}, "prefixes"},
		{map[string]any{"scopes": []string{"read"}, "expires_in": 3600}, "expires_in"},
		{map[string]any{"scopes": []string{"read"}, "expires_in": 60, "max_bytes": 1001}, "max_bytes"},
		{map[string]any{"scopes": []string{"read"}, "expires_in": 60, "run_id": "run-other"}, "run_id"},
	} {
		prob := send(pc, "POST", "/v1/tokens", c.body).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		if !strings.Contains(prob.Detail, c.part) {
			t.Errorf("%v: %q does not name %s", c.body, prob.Detail, c.part)
		}
	}
	for _, p := range []string{"P/../Q/", "P/\x00/", "/", ""} {
		send(pc, "POST", "/v1/tokens", map[string]any{"scopes": []string{"read"}, "prefixes": []string{p}, "expires_in": 60}).
			ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	}
	// No delegate scope: 403 naming it.
	prob := send(w.child, "POST", "/v1/tokens", map[string]any{"scopes": []string{"read"}, "expires_in": 60}).
		ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	if prob.MissingScope != "delegate" {
		t.Fatalf("missing_scope %q, want delegate", prob.MissingScope)
	}
	// What the child leaves out is the parent's: inside P/, pinned, no
	// later, no larger.
	kid := mint(t, pc, map[string]any{"scopes": []string{"read", "write"}, "expires_in": 60})
	if !slices.Equal(kid.Prefixes, []string{"P/"}) || kid.RunID == nil || *kid.RunID != "run-9" || kid.MaxBytes == nil || *kid.MaxBytes != 1000 ||
		kid.ParentID == nil || *kid.ParentID != parent.ID {
		t.Fatalf("the child's inherited grant: %+v", kid)
	}
}

// TestDelegatedSecretIsARecordedSecret: a replay by the same token shows
// the same secret; another token of the subject, and /v1/operations, see
// it null.
func TestDelegatedSecretIsARecordedSecret(t *testing.T) {
	w := newGrantWorld(t)
	body := map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P/"}, "expires_in": 600}
	first := mint(t, w.root, body, "Idempotency-Key", "mint-1")
	res := send(w.root, "POST", "/v1/tokens", body, "Idempotency-Key", "mint-1").Expect(t, http.StatusCreated)
	var again api.Token
	res.JSON(t, &again)
	if res.Header.Get("Idempotent-Replayed") != "true" || again.Token == nil || *again.Token != *first.Token {
		t.Fatalf("a replay by the same token: %+v", again)
	}
	other := w.srv.Client(t, "alice", "read", "write", "delegate")
	res = send(other, "POST", "/v1/tokens", body, "Idempotency-Key", "mint-1").Expect(t, http.StatusCreated)
	var redacted api.Token
	res.JSON(t, &redacted)
	if redacted.Token != nil || redacted.ID != first.ID {
		t.Fatalf("another token's replay shows the secret: %+v", redacted)
	}
	op := w.root.Do("GET", "/v1/operations/mint-1", nil).Expect(t, http.StatusOK).Body
	if strings.Contains(string(op), *first.Token) {
		t.Fatal("/v1/operations shows a delegated token's secret")
	}
}

// TestRevokingReachesEveryInstanceWithinASecond: two servers on one
// database, each having trusted the tokens (cached); revoking the parent
// on one makes both refuse it and its child within a second. A revoked
// parent's child cannot mint either.
func TestRevokingReachesEveryInstanceWithinASecond(t *testing.T) {
	w := newGrantWorld(t)
	second := apitest.NewServer(t, apitest.Options{Config: &w.srv.Config})
	mid := mint(t, w.root, map[string]any{"scopes": []string{"read", "delegate"}, "expires_in": 600})
	midC := apitest.NewClient(t, w.srv.URL, *mid.Token)
	leaf := mint(t, midC, map[string]any{"scopes": []string{"read"}, "expires_in": 300})
	clients := []*apitest.Client{midC, apitest.NewClient(t, w.srv.URL, *leaf.Token),
		apitest.NewClient(t, second.URL, *mid.Token), apitest.NewClient(t, second.URL, *leaf.Token)}
	for _, c := range clients {
		c.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK) // each instance now trusts them
	}
	var list api.TokenList
	w.root.Do("GET", "/v1/tokens", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) < 4 {
		t.Fatalf("the root lists %d tokens, want itself and its descendants", len(list.Data))
	}
	w.root.Do("DELETE", "/v1/tokens/"+mid.ID, nil).Expect(t, http.StatusOK)
	deadline := time.Now().Add(time.Second)
	for _, c := range clients {
		for {
			res := c.Do("GET", "/v1/files", nil)
			if res.Status == http.StatusUnauthorized {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a revoked token still answers %d after a second", res.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.root.Do("GET", "/v1/files", nil).Expect(t, http.StatusOK) // the root is not revoked
	w.root.Do("DELETE", "/v1/tokens/"+mid.ID, nil).Expect(t, http.StatusOK)
	w.child.Do("DELETE", "/v1/tokens/"+mid.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
}

// TestGrantPinsExpiryAndForgeries: a pinned token attributes its writes
// and refuses another run; an expired token is 401; forged and truncated
// tokens are 401.
func TestGrantPinsExpiryAndForgeries(t *testing.T) {
	w := newGrantWorld(t)
	pinned := mint(t, w.root, map[string]any{"scopes": []string{"read", "write"}, "run_id": "run-p", "agent_id": "helper", "expires_in": 600})
	pc := apitest.NewClient(t, w.srv.URL, *pinned.Token)
	upload(t, pc, "P/pinned.txt", "x", "X-Run-ID", "run-other").ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	upload(t, pc, "P/pinned.txt", "x", "X-Agent-ID", "someone").ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	upload(t, pc, "P/pinned.txt", "x").Expect(t, http.StatusCreated)
	var events api.EventList
	w.root.Do("GET", "/v1/events?run_id=run-p", nil).Expect(t, http.StatusOK).JSON(t, &events)
	if len(events.Data) != 1 || events.Data[0].AgentID == nil || *events.Data[0].AgentID != "helper" {
		t.Fatalf("the pinned token's write is not attributed to its pins: %+v", events.Data)
	}

	past := time.Now().Add(-time.Minute)
	expired, err := w.srv.Store.CreateRootToken(context.Background(), "alice", "", agentfs.Grant{Scopes: []string{"read"}, ExpiresAt: &past})
	if err != nil {
		t.Fatal(err)
	}
	apitest.NewClient(t, w.srv.URL, expired.Secret).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	secret := *w.childTok.Token
	for _, forged := range []string{secret[:len(secret)-1], secret + "x", "afs_" + strings.Repeat("A", 43), strings.ToUpper(secret), secret[4:]} {
		apitest.NewClient(t, w.srv.URL, forged).Do("GET", "/v1/files", nil).ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
}

// TestMaxBytesHoldsUnderConcurrentUploads: uploads racing on one token's
// max_bytes never store more than it; the rest are 403, and once spent it
// stays spent.
func TestMaxBytesHoldsUnderConcurrentUploads(t *testing.T) {
	w := newGrantWorld(t)
	tok := mint(t, w.root, map[string]any{"scopes": []string{"read", "write"}, "prefixes": []string{"P/"}, "expires_in": 600, "max_bytes": 1000})
	c := apitest.NewClient(t, w.srv.URL, *tok.Token)
	const n = 12
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = c.Do("POST", "/v1/files?path="+url.QueryEscape("P/race-"+string(rune('a'+i))), strings.Repeat("x", 300)).Status
		}()
	}
	wg.Wait()
	if created := countCreated(t, statuses, http.StatusForbidden); created != 3 {
		t.Fatalf("%d uploads of 300 bytes stored under max_bytes 1000, want 3", created)
	}
	prob := upload(t, c, "P/more.txt", strings.Repeat("y", 200)).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	if !strings.Contains(prob.Detail, "max_bytes") {
		t.Fatalf("a spent budget's problem: %q", prob.Detail)
	}
	var got api.Token
	c.Do("GET", "/v1/tokens/"+tok.ID, nil).Expect(t, http.StatusOK).JSON(t, &got)
	if got.BytesWritten != 900 {
		t.Fatalf("bytes_written %d, want 900", got.BytesWritten)
	}
}

// TestCheckpointsHeldToTheGrant: a token scoped to P/ lists and gets only
// the checkpoints of folders inside P/, cannot delete another, and cannot
// make one that pins versions outside P/ (no prefix, or Q/); naming the
// root's checkpoint as a point still reads only what lies inside.
func TestCheckpointsHeldToTheGrant(t *testing.T) {
	w := newGrantWorld(t)
	all := createCheckpointREST(t, w.root, `{"name":"all"}`)
	q := createCheckpointREST(t, w.root, `{"name":"q","prefix":"Q/"}`)
	mine := createCheckpointREST(t, w.child, `{"name":"mine","prefix":"P/"}`)
	send(w.child, "POST", "/v1/checkpoints", `{"name":"everything"}`).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	send(w.child, "POST", "/v1/checkpoints", `{"name":"theirs","prefix":"Q/"}`).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	var list api.CheckpointList
	w.child.Do("GET", "/v1/checkpoints", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != mine.ID {
		t.Fatalf("the scoped token lists %+v, want only its checkpoint of P/", list.Data)
	}
	for _, cp := range []api.Checkpoint{all, q} {
		w.child.Do("GET", "/v1/checkpoints/"+cp.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		w.child.Do("DELETE", "/v1/checkpoints/"+cp.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	}
	w.child.Do("GET", "/v1/checkpoints/mine", nil).Expect(t, http.StatusOK)
	w.root.Do("GET", "/v1/checkpoints", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 3 {
		t.Fatalf("the root token lists %d checkpoints, want 3", len(list.Data))
	}
}
