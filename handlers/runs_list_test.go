package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

func runIDs(runs []api.Run) string {
	return strings.Join(pluck(runs, func(r api.Run) string { return r.RunID }), ",")
}

// TestListRuns: GET /v1/runs lists the subject's runs newest activity
// first, each summarised as GET /v1/runs/{id} does, paged by cursor
// without repeats; a scoped token sees only the runs (and counts) of its
// folders; another subject sees none.
func TestListRuns(t *testing.T) {
	c, b := setup(t)
	upload(t, c, "P/a.txt", "1", "X-Run-ID", "run-a").Expect(t, 201)
	upload(t, c, "Q/b.txt", "1", "X-Run-ID", "run-b").Expect(t, 201)
	upload(t, c, "Q/c.txt", "1", "X-Run-ID", "run-c", "X-Agent-ID", "ag").Expect(t, 201)
	c.Do("POST", "/v1/files?path=P/a.txt&if_exists=replace", "22", "X-Run-ID", "run-a").Expect(t, 200)
	upload(t, c, "Q/none.txt", "1").Expect(t, 201) // no run id: no run

	all := apitest.GetJSON[api.RunList](t, c, "/v1/runs")
	if runIDs(all.Data) != "run-a,run-c,run-b" || all.HasMore || all.NextCursor != nil {
		t.Fatalf("runs %s (more %v), want run-a,run-c,run-b", runIDs(all.Data), all.HasMore)
	}
	one := apitest.GetJSON[api.Run](t, c, "/v1/runs/run-a")
	if got := all.Data[0]; got.Counts != one.Counts || got.BytesWritten != one.BytesWritten || got.LiveFiles != one.LiveFiles ||
		!got.FirstAt.Equal(one.FirstAt) || !got.LastAt.Equal(one.LastAt) || got.Counts.Created != 1 || got.Counts.Replaced != 1 {
		t.Fatalf("listed %+v, GET /v1/runs/run-a %+v", got, one)
	}
	if all.Data[1].AgentIDs[0] != "ag" {
		t.Fatalf("run-c agents %v", all.Data[1].AgentIDs)
	}

	var paged []api.Run
	q := "/v1/runs?limit=1"
	for range 5 {
		p := apitest.GetJSON[api.RunList](t, c, q)
		paged = append(paged, p.Data...)
		if !p.HasMore {
			break
		}
		q = "/v1/runs?limit=1&cursor=" + *p.NextCursor
	}
	if runIDs(paged) != "run-a,run-c,run-b" {
		t.Fatalf("paged runs %s", runIDs(paged))
	}

	child := mint(t, b.srv.Client(t, "alice", "read", "write", "delegate"), map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P"}, "expires_in": 3600})
	scoped := apitest.GetJSON[api.RunList](t, apitest.NewClient(t, b.srv.URL, *child.Token), "/v1/runs")
	if runIDs(scoped.Data) != "run-a" {
		t.Fatalf("a token scoped to P/ lists runs %s", runIDs(scoped.Data))
	}
	other := apitest.GetJSON[api.RunList](t, b.srv.Client(t, "bob"), "/v1/runs")
	if len(other.Data) != 0 {
		t.Fatalf("another subject lists %s", runIDs(other.Data))
	}
	c.Do("GET", "/v1/runs?cursor=garbage", nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	c.Do("GET", "/v1/runs?limit=0", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// TestRunRevertDryRun: dry_run answers the plan (what is deleted, what is
// put back to which version) and changes nothing; the revert that follows
// does what the plan said.
func TestRunRevertDryRun(t *testing.T) {
	c, _ := setup(t)
	old := upload(t, c, "keep.txt", "v1").Expect(t, 201).File(t)
	c.Do("POST", "/v1/files?path=keep.txt&if_exists=replace", "v2", "X-Run-ID", "run-x").Expect(t, 200)
	made := upload(t, c, "made.txt", "new", "X-Run-ID", "run-x").Expect(t, 201).File(t)
	before := eventList(t, nil, c, "limit=1000")

	var plan api.RunRevertPlan
	send(c, "POST", "/v1/runs/run-x/revert", map[string]any{"dry_run": true}).Expect(t, 200).JSON(t, &plan)
	if plan.Object != "run_revert_plan" || plan.RunID != "run-x" || len(plan.Items) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	del, put := plan.Items[0], plan.Items[1]
	if del.FileID != made.ID || del.Action != "delete" || del.Version != nil || del.Path != "made.txt" {
		t.Fatalf("first step %+v, want the delete of made.txt", del)
	}
	if put.FileID != old.ID || put.Action != "put_back" || put.Version == nil || *put.Version != 1 || put.Path != "keep.txt" {
		t.Fatalf("second step %+v, want keep.txt put back to version 1", put)
	}
	if after := eventList(t, nil, c, "limit=1000"); len(after.Data) != len(before.Data) {
		t.Fatalf("the dry run made %d events", len(after.Data)-len(before.Data))
	}
	send(c, "POST", "/v1/runs/run-none/revert", map[string]any{"dry_run": true}).ExpectProblem(t, 404, "NOT_FOUND")
	send(c, "POST", "/v1/runs/run-x/revert", map[string]any{}).ExpectProblem(t, 400, "IDEMPOTENCY_KEY_REQUIRED")
}
