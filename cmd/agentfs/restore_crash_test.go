package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestRestoreSurvivesSIGKILL: a restore whose server is killed mid-batch
// resumes on the next server and finishes, each item applied once.
func TestRestoreSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin, cfg := buildBinary(t), storagetest.Config(t)
	env := []string{"AGENTFS_BATCH_RESCUE_AFTER=3s", "AGENTFS_BATCH_WORKERS=1"}
	a := startServe(t, bin, cfg, env...)
	a.waitReady(t)
	out, err := runBinary(t, bin, cfg, "token", "create", "--subject", "agent")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	ca := apitest.NewClient(t, a.url, token)
	ca.Do("POST", "/v1/checkpoints", `{"name":"empty"}`, "Content-Type", "application/json").Expect(t, http.StatusCreated)
	const n = 300
	var made batchState
	ca.Do("POST", "/v1/batch", putOps("rs", n), "Content-Type", "application/json", "Idempotency-Key", "fill").
		Expect(t, http.StatusAccepted).JSON(t, &made)
	if end := waitBatch(t, ca, made.ID, terminal, 2*time.Minute); end.Counts.Succeeded != n {
		t.Fatalf("the batch that fills rs/: %+v", end)
	}
	// The restore runs on a server that dies like a killed process once 20
	// of its items are applied (AGENTFS_FAULT_AFTER_ITEMS).
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	doomed := startServe(t, bin, cfg, append(env, "AGENTFS_FAULT_AFTER_ITEMS=20")...)
	doomed.waitReady(t)
	var rs batchState
	apitest.NewClient(t, doomed.url, token).Do("POST", "/v1/restore", `{"prefix":"rs/","to":"empty"}`,
		"Content-Type", "application/json", "Idempotency-Key", "restore-rs", "X-Run-ID", "undo").
		Expect(t, http.StatusAccepted).JSON(t, &rs)
	if err := doomed.cmd.Wait(); err == nil {
		t.Fatal("the server running the restore exited cleanly, not as killed mid-restore")
	}
	b := startServe(t, bin, cfg, env...)
	b.waitReady(t)
	cb := apitest.NewClient(t, b.url, token)
	var mid batchState
	cb.Do("GET", "/v1/batch/"+rs.ID, nil).Expect(t, http.StatusOK).JSON(t, &mid)
	if terminal(mid) {
		t.Fatalf("the restore finished before the kill (%+v); the test proves nothing", mid.Counts)
	}
	if end := waitBatch(t, cb, rs.ID, terminal, 3*time.Minute); end.Status != "succeeded" || end.Counts.Succeeded != n {
		t.Fatalf("after restart: %s %+v", end.Status, end.Counts)
	}
	var d struct {
		Data []any `json:"data"`
	}
	cb.Do("GET", "/v1/diff?from=empty&prefix=rs/", nil).Expect(t, http.StatusOK).JSON(t, &d)
	if len(d.Data) != 0 {
		t.Fatalf("after the restore, %d files differ from the checkpoint", len(d.Data))
	}
	var deleted map[string]int
	storagetest.Eventually(t, 30*time.Second, "an event for every restored file", func() bool {
		deleted = undoneFiles(t, cb)
		return len(deleted) >= n
	})
	if len(deleted) != n {
		t.Fatalf("%d files deleted by the restore, want %d", len(deleted), n)
	}
	for id, k := range deleted {
		if k != 1 {
			t.Fatalf("file %s was deleted %d times", id, k)
		}
	}
}
