package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestRestoreSurvivesSIGKILL: a restore whose server is killed mid-batch
// resumes on the next server and finishes, each item applied once.
func TestRestoreSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRescueRig(t)
	a, ca := r.serve(t)
	ca.Do("POST", "/v1/checkpoints", `{"name":"empty"}`, "Content-Type", "application/json").Expect(t, http.StatusCreated)
	const n = 300
	var made batchState
	ca.Do("POST", "/v1/batch", putOps("rs", n), "Content-Type", "application/json", "Idempotency-Key", "fill").
		Expect(t, http.StatusAccepted).JSON(t, &made)
	if end := waitBatch(t, ca, made.ID, terminal, 2*time.Minute); end.Counts.Succeeded != n {
		t.Fatalf("the batch that fills rs/: %+v", end)
	}
	cb := r.killedMidBatch(t, a, n, func(cd *apitest.Client) string {
		var rs batchState
		cd.Do("POST", "/v1/restore", `{"prefix":"rs/","to":"empty"}`, "Content-Type", "application/json",
			"Idempotency-Key", "restore-rs", "X-Run-ID", "undo").Expect(t, http.StatusAccepted).JSON(t, &rs)
		return rs.ID
	})
	var d struct {
		Data []any `json:"data"`
	}
	cb.Do("GET", "/v1/diff?from=empty&prefix=rs/", nil).Expect(t, http.StatusOK).JSON(t, &d)
	if len(d.Data) != 0 {
		t.Fatalf("after the restore, %d files differ from the checkpoint", len(d.Data))
	}
	undoneOnce(t, cb, n)
}
