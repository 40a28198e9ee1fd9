package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage"
)

func recovery(t *testing.T, c *apitest.Client, run, query string) api.RunRecovery {
	t.Helper()
	var r api.RunRecovery
	c.Do("GET", "/v1/runs/"+url.PathEscape(run)+"/recovery"+query, nil).Expect(t, http.StatusOK).JSON(t, &r)
	return r
}

// claimFor claims key for run as the admission core would, and leaves the
// claim as a dead process would (no renewal); abandoned makes its lease
// lapse (a row seeded in the past).
func claimFor(t *testing.T, srv *apitest.Server, key, run, path string, abandoned bool) {
	t.Helper()
	ctx := context.Background()
	claim, _, err := srv.Store.BeginKey(ctx, "alice", key, "POST", "/v1/files", []byte("request of "+key),
		storage.KeyOrigin{RunID: run, Paths: []string{path}, RequestURI: "/v1/files?path=" + url.QueryEscape(path)})
	if err != nil || claim == nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	claim.Close()
	if abandoned {
		if _, err := srv.Store.Pool().Exec(ctx, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
	}
}

func statuses(r api.RunRecovery) map[string]string {
	m := map[string]string{}
	for _, o := range r.Operations {
		m[o.IdempotencyKey] = o.Status
	}
	return m
}

// TestRunRecovery: a run's keys (completed, in progress, abandoned), its
// open upload session and its confirmed events in one answer, each with
// its next step; /v1/operations says abandoned too; keys of other runs
// and other subjects are not listed; an unknown run is 404.
func TestRunRecovery(t *testing.T) {
	c, b := setup(t)
	srv := b.srv
	f := keyed(t, c, "put-1", "r/a.txt", "one", "X-Run-ID", "run-r").Expect(t, http.StatusCreated).File(t)
	keyed(t, c, "other-run", "r/b.txt", "two", "X-Run-ID", "run-s").Expect(t, http.StatusCreated)
	claimFor(t, srv, "running", "run-r", "r/c.txt", false)
	claimFor(t, srv, "dead", "run-r", "r/d.txt", true)
	u := createUpload(t, c, map[string]any{"path": "r/big.bin", "size_bytes": 3*partSize - 7}, http.StatusCreated, "X-Run-ID", "run-r")
	putPart(t, c, u.ID, 2, partOf(randomBytes(3*partSize-7, 1), 2)).Expect(t, http.StatusOK)

	r := recovery(t, c, "run-r", "")
	if got := statuses(r); len(got) != 3 || got["put-1"] != "completed" || got["running"] != "in_progress" || got["dead"] != "abandoned" {
		t.Fatalf("operations %v, want put-1 completed, running in_progress, dead abandoned (and not other-run)", got)
	}
	if r.Operations[0].IdempotencyKey != "dead" || r.Operations[2].IdempotencyKey != "put-1" {
		t.Fatalf("operations not newest first: %+v", r.Operations)
	}
	if op := r.Operations[2]; op.Resource == nil || op.Resource.ID != f.ID || op.ResponseStatus == nil || *op.ResponseStatus != 201 {
		t.Fatalf("the completed put shows %+v, want file %s and 201", op, f.ID)
	}
	if r.Confirmed.Events != 1 || r.Confirmed.Counts.Created != 1 || r.Confirmed.LiveFiles != 1 || r.Confirmed.LastEventCursor == nil {
		t.Fatalf("confirmed %+v, want one created live file and a cursor", r.Confirmed)
	}
	if len(r.InFlight.Uploads) != 1 || !slices.Equal(r.InFlight.Uploads[0].MissingParts, []int{1, 3}) ||
		!slices.Equal(r.InFlight.Uploads[0].PartsReceived, []int{2}) {
		t.Fatalf("in flight %+v, want the session missing parts 1 and 3", r.InFlight.Uploads)
	}
	want := []api.Next{
		{Method: "GET", Path: "/v1/operations/running"},
		{Method: "PUT", Path: "/v1/uploads/" + u.ID + "/parts/1"},
		{Method: "PUT", Path: "/v1/uploads/" + u.ID + "/parts/3"},
		{Method: "POST", Path: "/v1/uploads/" + u.ID + "/complete"},
		{Method: "POST", Path: "/v1/files?path=r%2Fd.txt", IdempotencyKey: "dead"},
	}
	if len(r.NextActions) != len(want) {
		t.Fatalf("next_actions %+v, want %d", r.NextActions, len(want))
	}
	for i, n := range r.NextActions {
		if n.Method != want[i].Method || n.Path != want[i].Path || n.IdempotencyKey != want[i].IdempotencyKey || n.Text == "" {
			t.Fatalf("next_actions[%d] = %+v, want %+v", i, n, want[i])
		}
	}
	if r.NextActions[0].AfterSeconds < 1 {
		t.Fatalf("the poll of a running key says no wait: %+v", r.NextActions[0])
	}
	// as_of is a cursor of the feed: nothing the answer counted lies after it.
	var events api.EventList
	c.Do("GET", "/v1/events?after="+url.QueryEscape(r.AsOf), nil).Expect(t, http.StatusOK).JSON(t, &events)
	if len(events.Data) != 0 {
		t.Fatalf("events after as_of: %+v", events.Data)
	}

	var op api.Operation
	c.Do("GET", "/v1/operations/dead", nil).Expect(t, http.StatusOK).JSON(t, &op)
	if op.Status != api.OperationAbandoned {
		t.Fatalf("/v1/operations says %q for an abandoned claim", op.Status)
	}
	c.Do("GET", "/v1/operations/running", nil).Expect(t, http.StatusOK).JSON(t, &op)
	if op.Status != api.OperationInProgress {
		t.Fatalf("/v1/operations says %q for a live claim", op.Status)
	}

	c.Do("GET", "/v1/runs/no-such-run/recovery", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	srv.Client(t, "bob").Do("GET", "/v1/runs/run-r/recovery", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	c.Do("GET", "/v1/runs/run-r/recovery?cursor=bogus", nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	c.Do("GET", "/v1/runs/run-r/recovery?limit=0", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// TestRunRecoveryPages: keys come newest first, limit per page, and the
// cursors walk every key once.
func TestRunRecoveryPages(t *testing.T) {
	c, _ := setup(t)
	var want []string
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		keyed(t, c, k, "p/"+k, k, "X-Run-ID", "paged").Expect(t, http.StatusCreated)
		want = append([]string{k}, want...)
	}
	var got []string
	query := "?limit=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than keys")
		}
		r := recovery(t, c, "paged", query)
		for _, o := range r.Operations {
			got = append(got, o.IdempotencyKey)
		}
		if r.NextCursor == nil {
			if r.HasMore {
				t.Fatal("has_more without a cursor")
			}
			break
		}
		query = "?limit=2&cursor=" + url.QueryEscape(*r.NextCursor)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages walked %v, want %v", got, want)
	}
}

// TestRunRecoveryHeldToTheGrant: a token scoped to P/ sees only the keys
// whose effects lie in P/ (whoever claimed them), the sessions on P/ and
// the events there; a run with nothing inside is 404 for it.
func TestRunRecoveryHeldToTheGrant(t *testing.T) {
	w := newGrantWorld(t) // run-1 wrote P/a.txt, Q/b.txt, P-old/c.txt unkeyed
	keyed(t, w.root, "in-key", "P/k.txt", "x", "X-Run-ID", "run-1").Expect(t, http.StatusCreated)
	keyed(t, w.root, "out-key", "Q/k.txt", "x", "X-Run-ID", "run-1").Expect(t, http.StatusCreated)
	keyed(t, w.root, "sib-key", "P-old/k.txt", "x", "X-Run-ID", "run-1").Expect(t, http.StatusCreated)
	createUpload(t, w.root, map[string]any{"path": "P/u.bin", "size_bytes": 10}, http.StatusCreated, "X-Run-ID", "run-1")
	createUpload(t, w.root, map[string]any{"path": "Q/u.bin", "size_bytes": 10}, http.StatusCreated, "X-Run-ID", "run-1")

	all := recovery(t, w.root, "run-1", "")
	if len(all.Operations) != 3 || len(all.InFlight.Uploads) != 2 || all.Confirmed.Events != 6 {
		t.Fatalf("the root sees %d keys, %d sessions, %d events; want 3, 2, 6", len(all.Operations), len(all.InFlight.Uploads), all.Confirmed.Events)
	}
	r := recovery(t, w.child, "run-1", "")
	if got := statuses(r); len(got) != 1 || got["in-key"] != "completed" {
		t.Fatalf("the scoped token sees keys %v, want only in-key", got)
	}
	if len(r.InFlight.Uploads) != 1 || r.InFlight.Uploads[0].Path != "P/u.bin" {
		t.Fatalf("the scoped token sees sessions %+v, want only P/u.bin", r.InFlight.Uploads)
	}
	if r.Confirmed.Events != 2 || r.Confirmed.LiveFiles != 2 {
		t.Fatalf("the scoped token's confirmed %+v, want the 2 events and files of P/", r.Confirmed)
	}
	keyed(t, w.root, "q-only", "Q/only.txt", "x", "X-Run-ID", "run-q").Expect(t, http.StatusCreated)
	w.child.Do("GET", "/v1/runs/run-q/recovery", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	w.child.Do("GET", "/v1/operations/in-key", nil).Expect(t, http.StatusOK)
	w.child.Do("GET", "/v1/operations/out-key", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
}
