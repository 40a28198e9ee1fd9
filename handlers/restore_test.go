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

// TestRestoreSwapsPathsBack: files that traded places since a checkpoint
// (two by moves through a third path, three around a ring, one of them
// edited too) trade back exactly: each file id at its old path with its old
// bytes, the diff empty, a dry run listing every move first and changing
// nothing, and a restore of the restore swapping them again.
func TestRestoreSwapsPathsBack(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	ids := map[string]string{}
	for _, p := range []string{"s/a.txt", "s/b.txt", "s/x.txt", "s/y.txt", "s/z.txt"} {
		var f api.File
		upload(t, c, p, "was "+p+"\n").JSON(t, &f)
		ids[p] = f.ID
	}
	createCheckpointREST(t, c, `{"name":"before-swap"}`)

	// a and b swap by moves: a → t, b → a, t → b.
	move(c, ids["s/a.txt"], "s/t.txt", "").Expect(t, http.StatusOK)
	move(c, ids["s/b.txt"], "s/a.txt", "").Expect(t, http.StatusOK)
	move(c, ids["s/a.txt"], "s/b.txt", "").Expect(t, http.StatusOK)
	// x, y and z go round: x → y's path, y → z's, z → x's; y is edited.
	move(c, ids["s/x.txt"], "s/tmp", "").Expect(t, http.StatusOK)
	move(c, ids["s/z.txt"], "s/x.txt", "").Expect(t, http.StatusOK)
	move(c, ids["s/y.txt"], "s/z.txt", "").Expect(t, http.StatusOK)
	move(c, ids["s/x.txt"], "s/y.txt", "").Expect(t, http.StatusOK)
	c.Do("POST", "/v1/files?if_exists=replace&path=s/z.txt", "y, edited at z\n").Expect(t, http.StatusOK)
	createCheckpointREST(t, c, `{"name":"swapped"}`)
	if n := len(diffREST(t, c, "before-swap", "s/")); n != 5 {
		t.Fatalf("%d changes since the checkpoint, want 5 moves", n)
	}

	var plan api.RestorePlan
	send(c, "POST", "/v1/restore", `{"prefix":"s/","to":"before-swap","dry_run":true}`).Expect(t, http.StatusOK).JSON(t, &plan)
	if len(plan.Items) != 5 {
		t.Fatalf("plan of %d items, want 5: %+v", len(plan.Items), plan.Items)
	}
	for _, it := range plan.Items {
		if it.Change != "moved" || it.PreviousPath == nil || it.From == nil || it.To == nil {
			t.Fatalf("planned item %+v, want a move back to its previous path", it)
		}
	}
	if n := len(diffREST(t, c, "before-swap", "s/")); n != 5 {
		t.Fatalf("the dry run changed something: %d changes", n)
	}

	res := restoreREST(t, c, "s/", "before-swap", "swap-1")
	if res.Status != "succeeded" || res.Counts.Succeeded != 5 {
		t.Fatalf("restore batch %+v", res)
	}
	if d := diffREST(t, c, "before-swap", "s/"); len(d) != 0 {
		t.Fatalf("after the restore, diff(before-swap, now) under s/ = %+v", d)
	}
	for p, id := range ids {
		l := list(t, c, "path="+p)
		if len(l.Data) != 1 || l.Data[0].ID != id {
			t.Fatalf("%s holds %+v after the restore, want file %s", p, l.Data, id)
		}
		if got := content(t, c, p); got != "was "+p+"\n" {
			t.Errorf("%s holds %q after the restore, want its bytes at the checkpoint", p, got)
		}
	}
	if l := list(t, c, "prefix=s/"); len(l.Data) != 5 {
		t.Fatalf("%d live files under s/ after the restore, want 5 (no step left behind)", len(l.Data))
	}

	// A restore of the restore swaps them again.
	res = restoreREST(t, c, "s/", "swapped", "swap-2")
	if res.Status != "succeeded" || res.Counts.Succeeded != 5 {
		t.Fatalf("restore of the restore %+v", res)
	}
	if d := diffREST(t, c, "swapped", "s/"); len(d) != 0 {
		t.Fatalf("after restoring to swapped, diff(swapped, now) = %+v", d)
	}
	for p, id := range map[string]string{"s/a.txt": ids["s/b.txt"], "s/b.txt": ids["s/a.txt"],
		"s/x.txt": ids["s/z.txt"], "s/y.txt": ids["s/x.txt"], "s/z.txt": ids["s/y.txt"]} {
		if l := list(t, c, "path="+p); len(l.Data) != 1 || l.Data[0].ID != id {
			t.Fatalf("%s holds %+v after the restore of the restore, want file %s", p, l.Data, id)
		}
	}
	if got := content(t, c, "s/z.txt"); got != "y, edited at z\n" {
		t.Errorf("s/z.txt holds %q, want the edit back", got)
	}
}
