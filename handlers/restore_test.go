package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// restoreREST restores prefix to point and waits for its batch to end.
func restoreREST(t *testing.T, c *apitest.Client, prefix, to, key string) runResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prefix": prefix, "to": to})
	res := send(c, "POST", "/v1/restore", string(body), "Idempotency-Key", key).Expect(t, http.StatusAccepted)
	var b runResult
	storagetest.Eventually(t, 30*time.Second, "the restore to end", func() bool {
		b = runResult{}
		c.Do("GET", "/v1/batch/"+batchID(res), nil).Expect(t, http.StatusOK).JSON(t, &b)
		return b.Status != "queued" && b.Status != "running"
	})
	return b
}

func diffREST(t *testing.T, c *apitest.Client, from, prefix string) []api.Change {
	t.Helper()
	var d api.DiffList
	c.Do("GET", "/v1/diff?from="+url.QueryEscape(from)+"&prefix="+prefix, nil).Expect(t, http.StatusOK).JSON(t, &d)
	return d.Data
}

// TestRestoreREST: a restore puts a folder back to a checkpoint (edits,
// deletes, moves, adds, a path taken by another file), leaving the diff
// empty and what is outside the folder alone; a dry run plans and changes
// nothing; a restore of the restore puts the bad state back.
func TestRestoreREST(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	var a, b, m, e api.File
	upload(t, c, "r/a.txt", "alpha\n").JSON(t, &a)
	upload(t, c, "r/b.txt", "beta\n").JSON(t, &b)
	upload(t, c, "r/m.txt", "moved\n").JSON(t, &m)
	upload(t, c, "r/e.txt", "evicted\n").JSON(t, &e)
	upload(t, c, "r/same.txt", "same\n").Expect(t, http.StatusCreated)
	upload(t, c, "out.txt", "outside\n").Expect(t, http.StatusCreated)
	createCheckpointREST(t, c, `{"name":"good"}`)

	c.Do("POST", "/v1/files?if_exists=replace&path=r/a.txt", "broken\n").Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+b.ID, nil).Expect(t, http.StatusOK)
	move(c, m.ID, "r/sub/m.txt", "").Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+e.ID, nil).Expect(t, http.StatusOK)
	upload(t, c, "r/e.txt", "a stranger at e's path\n").Expect(t, http.StatusCreated)
	upload(t, c, "r/new.txt", "new\n").Expect(t, http.StatusCreated)
	c.Do("POST", "/v1/files?if_exists=replace&path=out.txt", "outside, changed\n").Expect(t, http.StatusOK)
	createCheckpointREST(t, c, `{"name":"bad"}`)
	if n := len(diffREST(t, c, "good", "r/")); n != 6 {
		t.Fatalf("%d changes under r/ since good, want 6", n)
	}

	var plan api.RestorePlan
	send(c, "POST", "/v1/restore", `{"prefix":"r/","to":"good","dry_run":true}`).Expect(t, http.StatusOK).JSON(t, &plan)
	if plan.Object != "restore_plan" || len(plan.Items) != 6 || plan.Items[0].From != nil {
		t.Fatalf("plan %+v (the files that go come first)", plan)
	}
	if n := len(diffREST(t, c, "good", "r/")); n != 6 {
		t.Fatalf("the dry run changed something: %d changes", n)
	}
	send(c, "POST", "/v1/restore", `{"prefix":"r/","to":"good"}`).ExpectProblem(t, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
	send(c, "POST", "/v1/restore", `{"prefix":"r/","to":"nope"}`, "Idempotency-Key", "rs-x").ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(c, "POST", "/v1/restore", `{"to":"good"}`, "Idempotency-Key", "rs-y").ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	res := restoreREST(t, c, "r/", "good", "rs-1")
	if res.Status != "succeeded" || res.Counts.Total != 6 {
		t.Fatalf("restore batch %+v", res)
	}
	if d := diffREST(t, c, "good", "r/"); len(d) != 0 {
		t.Fatalf("after the restore, diff(good, now) under r/ = %+v", d)
	}
	for path, want := range map[string]string{"r/a.txt": "alpha\n", "r/b.txt": "beta\n", "r/m.txt": "moved\n",
		"r/e.txt": "evicted\n", "r/new.txt": "", "r/sub/m.txt": "", "out.txt": "outside, changed\n"} {
		if got := content(t, c, path); got != want {
			t.Errorf("%s holds %q after the restore, want %q", path, got, want)
		}
	}
	// The same key replays the batch; nothing runs twice.
	send(c, "POST", "/v1/restore", `{"prefix":"r/","to":"good"}`, "Idempotency-Key", "rs-1").Expect(t, http.StatusOK)

	// A restore of the restore: back to the bad state.
	res = restoreREST(t, c, "r/", "bad", "rs-2")
	if res.Status != "succeeded" {
		t.Fatalf("restore of the restore %+v", res)
	}
	if d := diffREST(t, c, "bad", "r/"); len(d) != 0 {
		t.Fatalf("after restoring to bad, diff(bad, now) = %+v", d)
	}
	if got := content(t, c, "r/a.txt"); got != "broken\n" {
		t.Errorf("r/a.txt holds %q, want the bad edit back", got)
	}
}
