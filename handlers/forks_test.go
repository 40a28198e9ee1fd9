package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func forkREST(t *testing.T, c *apitest.Client, body string, headers ...string) api.Fork {
	t.Helper()
	return created[api.Fork](t, c, "/v1/forks", body, headers...)
}

func mergeREST(t *testing.T, c *apitest.Client, id, body string, headers ...string) api.Merge {
	t.Helper()
	var m api.Merge
	send(c, "POST", "/v1/forks/"+id+"/merge", body, headers...).Expect(t, http.StatusOK).JSON(t, &m)
	return m
}

// liveUnder is the content of each live file under prefix, by path (as of
// the point when asOf is set).
func liveUnder(t *testing.T, c *apitest.Client, prefix, asOf string) map[string]string {
	t.Helper()
	q := "/v1/files?limit=1000&prefix=" + url.QueryEscape(prefix)
	if asOf != "" {
		q += "&as_of=" + url.QueryEscape(asOf)
	}
	var l api.FileList
	c.Do("GET", q, nil).Expect(t, http.StatusOK).JSON(t, &l)
	out := map[string]string{}
	for _, f := range l.Data {
		out[f.Path] = f.SHA256
	}
	return out
}

func eventsOf(t *testing.T, c *apitest.Client, query string) []api.Event {
	t.Helper()
	var page api.EventList
	c.Do("GET", "/v1/events?limit=1000&"+query, nil).Expect(t, http.StatusOK).JSON(t, &page)
	return page.Data
}

func contentOf(t *testing.T, c *apitest.Client, path string) string {
	t.Helper()
	var l api.FileList
	c.Do("GET", "/v1/files?path="+url.QueryEscape(path), nil).Expect(t, http.StatusOK).JSON(t, &l)
	if len(l.Data) != 1 {
		return "<none>"
	}
	return string(c.Do("GET", "/v1/files/"+l.Data[0].ID+"/content", nil).Expect(t, http.StatusOK).Body)
}

// TestForkAndMergeREST: a fork copies a folder as new files sharing their
// blobs with no S3 request; changes on both sides merge three-way: a
// conflict fails the merge with nothing applied, a dry run changes
// nothing, on_conflict target applies the fork's other changes in one
// transaction with merge events, the base moves so the next merge applies
// only newer changes, and as-of reads and diffs stay true across both.
func TestForkAndMergeREST(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	proxy := storagetest.NewProxy(t, cfg.S3Endpoint)
	cfg.S3Endpoint = proxy.Addr()
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	c := srv.Client(t, "alice")
	src := map[string]api.File{}
	for _, n := range []string{"a", "b", "c", "d"} {
		src[n] = upload(t, c, "src/"+n+".txt", n+"0\n").Expect(t, http.StatusCreated).File(t)
	}
	before := createCheckpointREST(t, c, `{"name":"before-fork"}`)

	s3Before := proxy.Exchanges()
	if s3Before == 0 {
		t.Fatal("the uploads made no S3 request through the proxy: it does not count this server's S3 traffic")
	}
	fork := forkREST(t, c, `{"from":"src","to":"dst/"}`, "Idempotency-Key", "fk-1")
	if n := proxy.Exchanges() - s3Before; n != 0 {
		t.Fatalf("a fork made %d S3 requests, want 0", n)
	}
	if fork.From != "src/" || fork.To != "dst/" || fork.Files != 4 || !strings.HasPrefix(fork.ID, "fork_") {
		t.Fatalf("fork %+v", fork)
	}
	var replay api.Fork
	send(c, "POST", "/v1/forks", `{"from":"src","to":"dst/"}`, "Idempotency-Key", "fk-1").Expect(t, http.StatusCreated).JSON(t, &replay)
	if replay.ID != fork.ID {
		t.Fatalf("a replay made fork %s, want %s", replay.ID, fork.ID)
	}
	var copied api.FileList
	c.Do("GET", "/v1/files?prefix=dst/", nil).Expect(t, http.StatusOK).JSON(t, &copied)
	if len(copied.Data) != 4 {
		t.Fatalf("%d files under dst/, want 4", len(copied.Data))
	}
	dst := map[string]api.File{}
	for _, f := range copied.Data {
		dst[f.Path] = f
		orig := src[strings.TrimSuffix(strings.TrimPrefix(f.Path, "dst/"), ".txt")]
		if f.ID == orig.ID || f.Version != 1 || f.ForkedFrom == nil || f.ForkedFrom.FileID != orig.ID || f.SHA256 != orig.SHA256 {
			t.Fatalf("forked file %+v of %+v", f, orig)
		}
	}
	for _, e := range eventsOf(t, c, "prefix=dst/") {
		if e.Type != "file.created" || e.ForkID == nil || *e.ForkID != fork.ID || e.Origin == nil || *e.Origin != "fork" {
			t.Fatalf("fork event %+v", e)
		}
	}
	send(c, "POST", "/v1/forks", `{"from":"src","to":"dst"}`).ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
	send(c, "POST", "/v1/forks", `{"from":"src","to":"src/sub"}`).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	// Both sides change: a only in the fork, b only in the target, c on
	// both (a conflict), d deleted in the fork, e added in the fork, and
	// f added on both sides with the same bytes.
	c.Do("POST", "/v1/files?if_exists=replace&path=dst/a.txt", "a-fork\n").Expect(t, http.StatusOK)
	c.Do("POST", "/v1/files?if_exists=replace&path=src/b.txt", "b-target\n").Expect(t, http.StatusOK)
	c.Do("POST", "/v1/files?if_exists=replace&path=dst/c.txt", "c-fork\n").Expect(t, http.StatusOK)
	c.Do("POST", "/v1/files?if_exists=replace&path=src/c.txt", "c-target\n").Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+dst["dst/d.txt"].ID, nil).Expect(t, http.StatusOK)
	upload(t, c, "dst/e.txt", "e-fork\n").Expect(t, http.StatusCreated)
	upload(t, c, "dst/f.txt", "same\n").Expect(t, http.StatusCreated)
	upload(t, c, "src/f.txt", "same\n").Expect(t, http.StatusCreated)
	beforeMerge := createCheckpointREST(t, c, `{"name":"before-merge"}`)

	p := send(c, "POST", "/v1/forks/"+fork.ID+"/merge", `{}`, "Idempotency-Key", "mg-1").ExpectProblem(t, http.StatusConflict, "MERGE_CONFLICT")
	if len(p.Conflicts) != 1 || p.Conflicts[0].Path != "src/c.txt" || p.Conflicts[0].Base == nil || p.Conflicts[0].Fork == nil || p.Conflicts[0].Target == nil {
		t.Fatalf("conflicts %+v", p.Conflicts)
	}
	if got := contentOf(t, c, "src/a.txt"); got != "a0\n" {
		t.Fatalf("a failed merge applied src/a.txt: %q", got)
	}
	dry := mergeREST(t, c, fork.ID, `{"dry_run":true,"on_conflict":"target"}`)
	if got := liveUnder(t, c, "src/", ""); len(got) != len(liveUnder(t, c, "src/", beforeMerge.Cursor)) || contentOf(t, c, "src/a.txt") != "a0\n" {
		t.Fatalf("a dry run changed src/: %v", got)
	}

	s3Before = proxy.Exchanges()
	m := mergeREST(t, c, fork.ID, `{"on_conflict":"target"}`, "Idempotency-Key", "mg-2")
	if n := proxy.Exchanges() - s3Before; n != 0 {
		t.Fatalf("a merge made %d S3 requests, want 0", n)
	}
	kinds := map[string]string{}
	for _, ch := range m.Applied {
		kinds[ch.Path] = ch.Change
	}
	want := map[string]string{"src/a.txt": "modified", "src/d.txt": "deleted", "src/e.txt": "added"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) || len(dry.Applied) != len(m.Applied) {
		t.Fatalf("merge applied %v (dry run %d), want %v", kinds, len(dry.Applied), want)
	}
	if len(m.Conflicts) != 1 || m.Conflicts[0].Resolution == nil || *m.Conflicts[0].Resolution != "target" {
		t.Fatalf("merge conflicts %+v", m.Conflicts)
	}
	if contentOf(t, c, "src/b.txt") != "b-target\n" || contentOf(t, c, "src/c.txt") != "c-target\n" || contentOf(t, c, "src/e.txt") != "e-fork\n" {
		t.Fatalf("after the merge: b %q, c %q, e %q", contentOf(t, c, "src/b.txt"), contentOf(t, c, "src/c.txt"), contentOf(t, c, "src/e.txt"))
	}
	merged := 0
	for _, e := range eventsOf(t, c, "prefix=src/") {
		if e.Origin != nil && *e.Origin == "merge" && e.ForkID != nil && *e.ForkID == fork.ID {
			merged++
		}
	}
	if merged != len(m.Applied) {
		t.Fatalf("%d merge events, want %d", merged, len(m.Applied))
	}

	// As-of reads and diffs hold across the fork and the merge.
	if got := liveUnder(t, c, "", before.Cursor); len(got) != 4 {
		t.Fatalf("as of before the fork: %v", got)
	}
	if got := liveUnder(t, c, "src/", beforeMerge.Cursor); got["src/a.txt"] != src["a"].SHA256 {
		t.Fatalf("as of before the merge, src/a.txt is %s, want the original", got["src/a.txt"])
	}
	if d := diffREST(t, c, "before-merge", "src/"); len(d) != len(m.Applied) {
		t.Fatalf("diff since before-merge lists %d changes, want the %d the merge applied: %+v", len(d), len(m.Applied), d)
	}
	if d := diffREST(t, c, "before-fork", "dst/"); len(d) != 5 {
		t.Fatalf("diff of dst/ since before the fork lists %d changes, want 5 added (a, b, c, e, f; d came and went): %+v", len(d), d)
	}

	// The base moved: a second merge applies nothing, a newer change only itself.
	if again := mergeREST(t, c, fork.ID, `{"on_conflict":"target"}`); len(again.Applied) != 0 {
		t.Fatalf("a second merge applied %+v", again.Applied)
	}
	c.Do("POST", "/v1/files?if_exists=replace&path=dst/b.txt", "b-fork-later\n").Expect(t, http.StatusOK)
	p = send(c, "POST", "/v1/forks/"+fork.ID+"/merge", `{}`).ExpectProblem(t, http.StatusConflict, "MERGE_CONFLICT")
	if len(p.Conflicts) != 1 || p.Conflicts[0].Path != "src/b.txt" {
		t.Fatalf("b changed on both sides since the fork: conflicts %+v", p.Conflicts)
	}
	if m := mergeREST(t, c, fork.ID, `{"on_conflict":"fork"}`); len(m.Applied) != 1 || contentOf(t, c, "src/b.txt") != "b-fork-later\n" {
		t.Fatalf("on_conflict fork applied %+v", m.Applied)
	}

	var list api.ForkList
	c.Do("GET", "/v1/forks", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != fork.ID || list.Data[0].MergedAt == nil {
		t.Fatalf("forks %+v", list.Data)
	}
	c.Do("GET", "/v1/forks/"+fork.ID, nil).Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/forks/"+fork.ID, nil).Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/forks/"+fork.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	c.Do("GET", "/v1/forks/"+fork.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	if n := len(liveUnder(t, c, "dst/", "")); n != 5 {
		t.Fatalf("forgetting the fork left %d files under dst/, want its 5", n)
	}
}

// TestForkAsOf: a fork of a past point copies the files as they were then.
func TestForkAsOf(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	upload(t, c, "s/a.txt", "old\n").Expect(t, http.StatusCreated)
	createCheckpointREST(t, c, `{"name":"then"}`)
	c.Do("POST", "/v1/files?if_exists=replace&path=s/a.txt", "new\n").Expect(t, http.StatusOK)
	upload(t, c, "s/b.txt", "later\n").Expect(t, http.StatusCreated)
	f := forkREST(t, c, `{"from":"s/","to":"t/","as_of":"then"}`)
	if f.Files != 1 || contentOf(t, c, "t/a.txt") != "old\n" || contentOf(t, c, "t/b.txt") != "<none>" {
		t.Fatalf("fork as of then: %+v, t/a.txt %q", f, contentOf(t, c, "t/a.txt"))
	}
	send(c, "POST", "/v1/forks", `{"from":"s/","to":"u/","as_of":"nope"}`).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
}

// TestForkBadInput: every malformed or disallowed body is a problem, never
// a 500, and nothing is forked.
func TestForkBadInput(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	upload(t, c, "s/a.txt", "a\n").Expect(t, http.StatusCreated)
	fork := forkREST(t, c, `{"from":"s","to":"t"}`)
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/forks", `{`, 400, "INVALID_REQUEST"},
		{"/v1/forks", `[]`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", ``, 400, "INVALID_REQUEST"},
		{"/v1/forks", `{}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s","to":""}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"/","to":"x"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s","to":"s"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s/x","to":"s"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"a/../s","to":"x"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s","to":"x","as_of":"2999-01-01T00:00:00Z"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":"s","to":"x","extra":1}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks", `{"from":1,"to":"x"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks/" + fork.ID + "/merge", `{"on_conflict":"sometimes"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks/" + fork.ID + "/merge", `{"dry_run":"yes"}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks/" + fork.ID + "/merge", `{"nope":true}`, 422, "VALIDATION_FAILED"},
		{"/v1/forks/fork_nope/merge", `{}`, 404, "NOT_FOUND"},
		{"/v1/forks/%00/merge", `{}`, 404, "NOT_FOUND"},
	} {
		t.Run(tc.body, func(t *testing.T) { send(c, "POST", tc.path, tc.body).ExpectProblem(t, tc.status, tc.code) })
	}
	c.Do("GET", "/v1/forks?limit=0", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	c.Do("GET", "/v1/forks?cursor=zzz", nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	if n := len(liveUnder(t, c, "", "")); n != 2 {
		t.Fatalf("%d files after bad forks, want 2", n)
	}
}

// TestMergeRacesTargetWrite: a merge of 20 fork changes races a writer of
// one of the target's files. The merge is all or nothing: it either
// commits all 20 (the write lands before, as a conflict, or after) or
// fails with MERGE_CONFLICT and applies none.
func TestMergeRacesTargetWrite(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	for round := range 4 {
		from, to := fmt.Sprintf("r%d/", round), fmt.Sprintf("f%d/", round)
		for i := range 20 {
			upload(t, c, fmt.Sprintf("%s%02d.txt", from, i), "base\n").Expect(t, http.StatusCreated)
		}
		fork := forkREST(t, c, `{"from":"`+from+`","to":"`+to+`"}`)
		for i := range 20 {
			c.Do("POST", fmt.Sprintf("/v1/files?if_exists=replace&path=%s%02d.txt", to, i), "fork\n").Expect(t, http.StatusOK)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Do("POST", fmt.Sprintf("/v1/files?if_exists=replace&path=%s10.txt", from), "writer\n")
		}()
		res := send(c, "POST", "/v1/forks/"+fork.ID+"/merge", `{}`)
		wg.Wait()
		applied := 0
		for i := range 20 {
			if contentOf(t, c, fmt.Sprintf("%s%02d.txt", from, i)) == "fork\n" {
				applied++
			}
		}
		switch res.Status {
		case http.StatusOK:
			// The writer may have overwritten 10 after the merge.
			if applied < 19 {
				t.Fatalf("round %d: the merge committed but %d of 20 files hold the fork's bytes", round, applied)
			}
		case http.StatusConflict:
			if applied != 0 {
				t.Fatalf("round %d: the merge failed but %d files hold the fork's bytes", round, applied)
			}
		default:
			t.Fatalf("round %d: merge answered %d: %s", round, res.Status, res.Body)
		}
	}
}

// TestForkOfAFolderBeingWritten: writers replace the files of a folder
// while it is forked; the fork is one consistent point: its files equal
// the as-of listing at its base, path for path.
func TestForkOfAFolderBeingWritten(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	for i := range 10 {
		upload(t, c, fmt.Sprintf("w/%d.txt", i), "0\n").Expect(t, http.StatusCreated)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Do("POST", fmt.Sprintf("/v1/files?if_exists=replace&path=w/%d.txt", (n+w*5)%10), fmt.Sprintf("%d-%d\n", w, n))
			}
		}()
	}
	var forks []api.Fork
	for i := range 4 {
		forks = append(forks, forkREST(t, c, fmt.Sprintf(`{"from":"w/","to":"copy%d/"}`, i)))
	}
	close(stop)
	wg.Wait()
	for i, f := range forks {
		at := liveUnder(t, c, "w/", f.Base)
		got := liveUnder(t, c, fmt.Sprintf("copy%d/", i), "")
		if len(at) != 10 || len(got) != 10 {
			t.Fatalf("fork %d: %d files at its base, %d copied", i, len(at), len(got))
		}
		for p, sha := range at {
			if got[fmt.Sprintf("copy%d/", i)+strings.TrimPrefix(p, "w/")] != sha {
				t.Fatalf("fork %d: %s differs from the base's", i, p)
			}
		}
	}
}

// TestForksHeldToTheGrant: a token scoped to P/ cannot fork from or to
// outside it, cannot merge or see a fork that reaches outside, and lists
// only the forks inside.
func TestForksHeldToTheGrant(t *testing.T) {
	w := newGrantWorld(t)
	outside := forkREST(t, w.root, `{"from":"Q","to":"P/q-copy"}`)
	upload(t, w.root, "P/src/a.txt", "inside").Expect(t, http.StatusCreated)
	inside := forkREST(t, w.child, `{"from":"P/src","to":"P/dst"}`)
	send(w.child, "POST", "/v1/forks", `{"from":"Q","to":"P/x"}`).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	send(w.child, "POST", "/v1/forks", `{"from":"P","to":"Q/x"}`).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	send(w.child, "POST", "/v1/forks/"+outside.ID+"/merge", `{}`).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(w.child, "POST", "/v1/forks/"+outside.ID+"/merge", `{"dry_run":true}`).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	w.child.Do("GET", "/v1/forks/"+outside.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	w.child.Do("DELETE", "/v1/forks/"+outside.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	var list api.ForkList
	w.child.Do("GET", "/v1/forks", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != inside.ID {
		t.Fatalf("the scoped token lists %+v, want only %s", list.Data, inside.ID)
	}
	if m := mergeREST(t, w.child, inside.ID, `{}`); len(m.Applied) != 0 {
		t.Fatalf("merge of an unchanged fork applied %+v", m.Applied)
	}
	w.root.Do("GET", "/v1/forks", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 2 {
		t.Fatalf("the root token lists %d forks, want 1", len(list.Data))
	}
}
