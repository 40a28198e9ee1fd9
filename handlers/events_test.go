package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// eventList reads a page of c's events.
func eventList(t *testing.T, b *testBundle, c *apitest.Client, query string) api.EventList {
	t.Helper()
	return apitest.GetJSON[api.EventList](t, c, "/v1/events?"+query)
}

func eventTypes(events []api.Event) []string {
	return pluck(events, func(e api.Event) string { return e.Type })
}

// str reads a nullable string ("<nil>" for null).
func str(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// exec runs SQL on the test's schema, to seed rows in the past.
func exec(t *testing.T, b *testBundle, sql string, args ...any) int64 {
	t.Helper()
	tag, err := b.srv.Store.Pool().Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

func TestEvents(t *testing.T) {
	t.Run("EveryEffectCommitsOneEvent", func(t *testing.T) {
		c, b := setup(t)
		by := []string{"X-Run-ID", "run-e", "X-Agent-ID", "agent-e"}
		with := func(reqID string, more ...string) []string {
			return append(append([]string{"X-Request-ID", reqID}, by...), more...)
		}
		f := upload(t, c, "e/a.txt", "one", with("req-create", "Idempotency-Key", "k-create")...).Expect(t, 201).File(t)
		upload(t, c, "e/a.txt", "one", with("req-replay", "Idempotency-Key", "k-create")...).Expect(t, 201) // replay: none
		c.Do("POST", "/v1/files?path=e/a.txt&if_exists=replace", "two", with("req-replace")...).Expect(t, 200)
		c.Do("POST", "/v1/files?path=e/a.txt&if_exists=replace", "two", with("req-noop")...).Expect(t, 200) // no-op: none
		revert(c, f.ID, 1, with("req-revert")...).Expect(t, 200)
		move(c, f.ID, "e/b.txt", "", with("req-move")...).Expect(t, 200)
		move(c, f.ID, "e/b.txt", "", with("req-move-again")...).Expect(t, 200) // no-op: none
		c.Do("DELETE", "/v1/files/"+f.ID, nil, with("req-delete")...).Expect(t, 200)
		c.Do("DELETE", "/v1/files/"+f.ID, nil, with("req-delete-again")...).Expect(t, 200) // none
		c.Do("POST", "/v1/files/"+f.ID+"/restore", nil, with("req-restore")...).Expect(t, 200)
		send(c, "PATCH", "/v1/files/"+f.ID, `{"expires_at":null}`, with("req-patch")...).Expect(t, 200)
		send(c, "POST", "/v1/files/"+f.ID+"/links", `{}`, with("req-link")...).Expect(t, 201)

		evs := eventList(t, b, c, "file_id="+f.ID).Data
		if got := fmt.Sprint(eventTypes(evs)); got != "[file.created file.replaced file.reverted file.moved file.deleted file.restored]" {
			t.Fatalf("events of the file: %s", got)
		}
		wantReq := []string{"req-create", "req-replace", "req-revert", "req-move", "req-delete", "req-restore"}
		wantVersion := []int64{1, 2, 3, 3, 3, 3}
		wantBody := []string{"one", "two", "one", "one", "one", "one"}
		for i, e := range evs {
			if e.Object != "event" || e.FileID != f.ID || str(e.RequestID) != wantReq[i] || str(e.RunID) != "run-e" ||
				str(e.AgentID) != "agent-e" || e.Version == nil || *e.Version != wantVersion[i] ||
				str(e.SHA256) != sha(wantBody[i]) || *e.SizeBytes != int64(len(wantBody[i])) || e.BatchID != nil {
				t.Fatalf("event %d: %+v", i, e)
			}
		}
		if str(evs[0].IdempotencyKey) != "k-create" || evs[1].IdempotencyKey != nil {
			t.Fatalf("idempotency keys: %s, %s", str(evs[0].IdempotencyKey), str(evs[1].IdempotencyKey))
		}
		if evs[0].Path != "e/a.txt" || evs[3].Path != "e/b.txt" || str(evs[3].PreviousPath) != "e/a.txt" || evs[2].PreviousPath != nil {
			t.Fatalf("paths: %+v", evs)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].At.Before(evs[i-1].At) || evs[i].ID == evs[i-1].ID {
				t.Fatalf("events out of order: %+v", evs)
			}
		}

		bt, res := runBatch(t, c, "ev-batch", []map[string]any{
			{"op": "put", "path": "e/batch.txt", "content": "b", "idempotency_key": "item-key"},
			{"op": "delete", "file_id": f.ID},
		}, http.StatusAccepted, "X-Run-ID", "run-b", "X-Request-ID", "req-batch")
		if bt.Status != "succeeded" {
			t.Fatalf("batch: %+v", bt)
		}
		batchEvents := eventList(t, b, c, "run_id=run-b").Data
		if got := fmt.Sprint(eventTypes(batchEvents)); got != "[file.created file.deleted]" {
			t.Fatalf("batch events: %s", got)
		}
		for i, e := range batchEvents {
			if str(e.BatchID) != bt.ID || str(e.RequestID) != res.Header.Get("X-Request-ID") || e.AgentID != nil {
				t.Fatalf("batch event %d: %+v", i, e)
			}
		}
		if str(batchEvents[0].IdempotencyKey) != "item-key" || batchEvents[1].IdempotencyKey != nil {
			t.Fatalf("item keys: %+v", batchEvents)
		}

		// The sweeper's effects: an expiry and a purge.
		g := upload(t, c, "e/expiring.txt", "x", "X-Run-ID", "run-x").Expect(t, 201).File(t)
		exec(t, b, `UPDATE files SET expires_at = now() - interval '1 minute' WHERE id = $1`, g.ID)
		if n, err := b.srv.Store.ExpireFiles(context.Background()); err != nil || n != 1 {
			t.Fatalf("ExpireFiles: %d, %v", n, err)
		}
		exec(t, b, `UPDATE files SET purge_after = now() - interval '1 minute' WHERE id = $1`, f.ID)
		if n, err := b.srv.Store.PurgeDeleted(context.Background()); err != nil || n != 1 {
			t.Fatalf("PurgeDeleted: %d, %v", n, err)
		}
		expired := eventList(t, b, c, "type=file.expired").Data
		purged := eventList(t, b, c, "type=file.purged").Data
		if len(expired) != 1 || expired[0].FileID != g.ID || expired[0].RunID != nil || expired[0].RequestID != nil ||
			len(purged) != 1 || purged[0].FileID != f.ID {
			t.Fatalf("expired %+v, purged %+v", expired, purged)
		}
		all := eventList(t, b, c, "")
		if len(all.Data) != 11 || all.HasMore {
			t.Fatalf("%d events: %v", len(all.Data), eventTypes(all.Data))
		}
	})

	t.Run("FiltersAndFollowsCursors", func(t *testing.T) {
		c, b := setup(t)
		a := upload(t, c, "docs/a", "a", "X-Run-ID", "r1", "X-Agent-ID", "g1").Expect(t, 201).File(t)
		upload(t, c, "docs/b", "b", "X-Run-ID", "r2", "X-Agent-ID", "g1").Expect(t, 201)
		upload(t, c, "img/c", "c", "X-Run-ID", "r1", "X-Agent-ID", "g2").Expect(t, 201)
		c.Do("POST", "/v1/files?path=docs/a&if_exists=replace", "a2", "X-Run-ID", "r2").Expect(t, 200)
		c.Do("DELETE", "/v1/files/"+a.ID, nil).Expect(t, 200)
		for q, want := range map[string]string{
			"run_id=r1":                        "[docs/a img/c]",
			"run_id=r2":                        "[docs/b docs/a]",
			"agent_id=g1":                      "[docs/a docs/b]",
			"file_id=" + a.ID:                  "[docs/a docs/a docs/a]",
			"prefix=docs/":                     "[docs/a docs/b docs/a docs/a]",
			"prefix=img":                       "[img/c]",
			"type=file.replaced,file.deleted":  "[docs/a docs/a]",
			"type=file.created&run_id=r1":      "[docs/a img/c]",
			"type=file.created&prefix=docs%2F": "[docs/a docs/b]",
			"run_id=nobody":                    "[]",
			"prefix=d_cs":                      "[]",
		} {
			l := eventList(t, b, c, q)
			var got []string
			for _, e := range l.Data {
				got = append(got, e.Path)
			}
			if fmt.Sprint(got) != want || l.HasMore || l.NextCursor == "" {
				t.Fatalf("%s: %v (has_more %v, next_cursor %q), want %s", q, got, l.HasMore, l.NextCursor, want)
			}
		}
		whole := eventList(t, b, c, "").Data
		var paged []api.Event
		q := "limit=2"
		for i := 0; ; i++ {
			l := eventList(t, b, c, q)
			paged = append(paged, l.Data...)
			if l.NextCursor == "" {
				t.Fatal("no next_cursor")
			}
			q = "limit=2&after=" + url.QueryEscape(l.NextCursor)
			if !l.HasMore {
				if i != 2 || len(l.Data) != 1 {
					t.Fatalf("last page %d holds %d", i, len(l.Data))
				}
				break
			}
		}
		if fmt.Sprint(ids(paged)) != fmt.Sprint(ids(whole)) || len(whole) != 5 {
			t.Fatalf("pages %v, whole %v", ids(paged), ids(whole))
		}
		// The cursor of the last page waits for what comes next.
		tail := eventList(t, b, c, q)
		if len(tail.Data) != 0 || tail.HasMore || tail.NextCursor == "" {
			t.Fatalf("after the end: %+v", tail)
		}
		upload(t, c, "docs/z", "z").Expect(t, 201)
		next := eventList(t, b, c, "after="+url.QueryEscape(tail.NextCursor))
		if len(next.Data) != 1 || next.Data[0].Path != "docs/z" {
			t.Fatalf("after the tail: %+v", next.Data)
		}
		now := eventList(t, b, c, "after=now")
		if len(now.Data) != 0 || now.NextCursor == "" {
			t.Fatalf("after=now: %+v", now)
		}
		upload(t, c, "docs/y", "y").Expect(t, 201)
		if l := eventList(t, b, c, "after="+url.QueryEscape(now.NextCursor)); len(l.Data) != 1 || l.Data[0].Path != "docs/y" {
			t.Fatalf("after the now cursor: %+v", l.Data)
		}
	})

	t.Run("WaitAnswersWhenAnEventCommits", func(t *testing.T) {
		c, b := setup(t)
		start := eventList(t, b, c, "after=now").NextCursor
		got := make(chan api.EventList, 1)
		go func() {
			var l api.EventList
			res := c.Do("GET", "/v1/events?wait=30&type=file.created&after="+url.QueryEscape(start), nil)
			if res.Status == http.StatusOK {
				_ = json.Unmarshal(res.Body, &l) // an undecodable body fails below
			}
			got <- l
		}()
		upload(t, c, "w.txt", "w").Expect(t, 201)
		if l := <-got; len(l.Data) != 1 || l.Data[0].Path != "w.txt" {
			t.Fatalf("the waiting request got %+v", l)
		}
	})

	t.Run("WaitsPastTheBoundAreRateLimited", func(t *testing.T) {
		t.Parallel()
		cfg := storagetest.Config(t)
		cfg.MaxWaitersPerSubject = 1
		srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
		c := srv.Client(t, "alice")
		start := url.QueryEscape(eventList(t, nil, c, "after=now").NextCursor)
		first := make(chan *apitest.Response, 1)
		go func() { first <- c.Do("GET", "/v1/events?wait=30&after="+start, nil) }()
		storagetest.Eventually(t, time.Minute, "the first request waiting", func() bool { return srv.Store.Counters().EventLooks > 0 })
		res := c.Do("GET", "/v1/events?wait=30&after="+start, nil)
		if res.ExpectProblem(t, http.StatusTooManyRequests, "RATE_LIMITED"); res.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		srv.Client(t, "bob").Do("GET", "/v1/events?wait=1&after=now", nil).Expect(t, http.StatusOK) // another subject waits
		c.Do("GET", "/v1/events?after="+start, nil).Expect(t, http.StatusOK)                        // a read that does not wait is not bounded
		upload(t, c, "w.txt", "w").Expect(t, 201)
		var l api.EventList
		if (<-first).Expect(t, http.StatusOK).JSON(t, &l); len(l.Data) != 1 {
			t.Fatalf("the waiting request got %+v", l)
		}
	})

	t.Run("RejectsBadQueries", func(t *testing.T) {
		c, b := setup(t)
		upload(t, c, "x", "x").Expect(t, 201)
		bobCursor := eventList(t, b, b.srv.Client(t, "bob"), "").NextCursor
		for q, want := range map[string]string{
			"wait=31": "VALIDATION_FAILED", "wait=-1": "VALIDATION_FAILED", "wait=x": "INVALID_REQUEST",
			"wait=1.5": "INVALID_REQUEST", "run_id=bad%20id": "VALIDATION_FAILED", "run_id=-dash": "VALIDATION_FAILED",
			"run_id=a%25b": "VALIDATION_FAILED", "agent_id=%C3%A9": "VALIDATION_FAILED", "type=file.nope": "VALIDATION_FAILED",
			"type=file.created,": "VALIDATION_FAILED", "file_id=nope": "VALIDATION_FAILED", "prefix=%01": "VALIDATION_FAILED",
			"limit=0": "VALIDATION_FAILED", "limit=1001": "VALIDATION_FAILED", "limit=x": "INVALID_REQUEST",
			"after=garbage": "INVALID_REQUEST", "after=" + url.QueryEscape(bobCursor): "INVALID_REQUEST",
			"after=NOW": "INVALID_REQUEST", "after=ZTF8MXwxfDF8eA": "INVALID_REQUEST",
		} {
			res := c.Do("GET", "/v1/events?"+q, nil)
			if p := res.Problem(t); p.Code != want {
				t.Fatalf("%s: %d %s, want %s", q, res.Status, p.Code, want)
			}
		}
	})

	t.Run("AnExpiredCursorIsGone", func(t *testing.T) {
		c, b := setup(t)
		upload(t, c, "old", "o").Expect(t, 201)
		upload(t, c, "new", "n").Expect(t, 201)
		exec(t, b, `UPDATE events SET at = now() - interval '800 hours' WHERE path = 'old'`)
		old := eventList(t, b, c, "limit=1")
		if len(old.Data) != 1 || old.Data[0].Path != "old" || !old.HasMore {
			t.Fatalf("first page: %+v", old)
		}
		c.Do("GET", "/v1/events?after="+url.QueryEscape(old.NextCursor), nil).ExpectProblem(t, http.StatusGone, "CURSOR_EXPIRED")
		fresh := eventList(t, b, c, "after=now").NextCursor
		c.Do("GET", "/v1/events?after="+url.QueryEscape(fresh), nil).Expect(t, http.StatusOK)
	})

	t.Run("EachSubjectSeesItsOwn", func(t *testing.T) {
		c, b := setup(t)
		bob := b.srv.Client(t, "bob")
		upload(t, c, "a", "a").Expect(t, 201)
		upload(t, bob, "b", "b").Expect(t, 201)
		if l := eventList(t, b, bob, ""); len(l.Data) != 1 || l.Data[0].Path != "b" {
			t.Fatalf("bob's events: %+v", l.Data)
		}
	})
}

func ids(events []api.Event) []string {
	return pluck(events, func(e api.Event) string { return e.ID })
}

func getRun(t *testing.T, c *apitest.Client, id string) api.Run {
	t.Helper()
	return apitest.GetJSON[api.Run](t, c, "/v1/runs/"+url.PathEscape(id))
}

func TestRuns(t *testing.T) {
	t.Run("SummarizesWhatARunDid", func(t *testing.T) {
		c, _ := setup(t)
		run := []string{"X-Run-ID", "run-1", "X-Agent-ID", "planner"}
		a := upload(t, c, "a.txt", "abc", run...).Expect(t, 201).File(t)
		bf := upload(t, c, "b.txt", "bbbbb", "X-Run-ID", "run-1", "X-Agent-ID", "writer").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=a.txt&if_exists=replace", "abcd", run...).Expect(t, 200)
		c.Do("POST", "/v1/files?path=a.txt&if_exists=replace", "abcd", run...).Expect(t, 200) // no-op
		c.Do("DELETE", "/v1/files/"+bf.ID, nil, run...).Expect(t, 200)
		move(c, a.ID, "moved.txt", "", run...).Expect(t, 200)
		revert(c, a.ID, 1, run...).Expect(t, 200)
		upload(t, c, "other.txt", "zzzzzzzz", "X-Run-ID", "run-2").Expect(t, 201)
		r := getRun(t, c, "run-1")
		if r.Object != "run" || r.RunID != "run-1" || fmt.Sprint(r.AgentIDs) != "[planner writer]" ||
			r.Counts != (api.RunCounts{Created: 2, Replaced: 1, Deleted: 1, Moved: 1, Reverted: 1}) ||
			r.BytesWritten != 3+5+4 || r.LiveFiles != 1 || r.LastAt.Before(r.FirstAt) {
			t.Fatalf("run: %+v", r)
		}
		if r2 := getRun(t, c, "run-2"); r2.LiveFiles != 1 || r2.BytesWritten != 8 || r2.Counts.Created != 1 {
			t.Fatalf("run-2: %+v", r2)
		}
	})

	t.Run("RunIDsWithSlashes", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, "s.txt", "s", "X-Run-ID", "team/run:7@2026").Expect(t, 201)
		res := c.Do("GET", "/v1/runs/team%2Frun:7@2026", nil).Expect(t, http.StatusOK)
		var r api.Run
		res.JSON(t, &r)
		if r.RunID != "team/run:7@2026" || r.Counts.Created != 1 {
			t.Fatalf("run with a slash: %+v", r)
		}
		if got := getRun(t, c, "team/run:7@2026"); got.RunID != r.RunID {
			t.Fatalf("escaped by url.PathEscape: %+v", got)
		}
		c.Do("GET", "/v1/runs/team/run:7@2026", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND") // two segments: no route
	})

	t.Run("UnknownAndInvalidRuns", func(t *testing.T) {
		c, b := setup(t)
		upload(t, c, "a", "a", "X-Run-ID", "mine").Expect(t, 201)
		c.Do("GET", "/v1/runs/nobody", nil).ExpectProblem(t, 404, "NOT_FOUND")
		b.srv.Client(t, "bob").Do("GET", "/v1/runs/mine", nil).ExpectProblem(t, 404, "NOT_FOUND")
		for _, bad := range []string{"-dash", "has%20space", "a%25b", "%C3%A9t%C3%A9", "x%00y"} {
			c.Do("GET", "/v1/runs/"+bad, nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
		}
		long := make([]byte, 129)
		for i := range long {
			long[i] = 'r'
		}
		c.Do("GET", "/v1/runs/"+string(long), nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
	})

	t.Run("ListsFilesARunLastWrote", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, "one", "1", "X-Run-ID", "creator").Expect(t, 201)
		upload(t, c, "two", "2", "X-Run-ID", "creator").Expect(t, 201)
		c.Do("POST", "/v1/files?path=two&if_exists=replace", "2b", "X-Run-ID", "editor").Expect(t, 200)
		if got := fmt.Sprint(paths(list(t, c, "last_run_id=editor").Data)); got != "[two]" {
			t.Fatalf("last_run_id=editor: %s", got)
		}
		if got := fmt.Sprint(paths(list(t, c, "last_run_id=creator").Data)); got != "[one]" {
			t.Fatalf("last_run_id=creator: %s", got)
		}
		if got := fmt.Sprint(paths(list(t, c, "run_id=creator").Data)); got != "[two one]" {
			t.Fatalf("run_id=creator: %s", got)
		}
		c.Do("GET", "/v1/files?last_run_id=bad%20id", nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
	})
}
