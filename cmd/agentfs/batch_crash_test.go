package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

type batchState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Counts struct {
		Total, Succeeded, Failed, Pending int
	} `json:"counts"`
}

func putOps(prefix string, n int) []byte {
	ops := make([]map[string]any, n)
	for i := range ops {
		ops[i] = map[string]any{"op": "put", "path": fmt.Sprintf("%s/%04d.txt", prefix, i), "content": strings.Repeat("x", 512)}
	}
	raw, _ := json.Marshal(map[string]any{"operations": ops})
	return raw
}

func waitBatch(t *testing.T, c *apitest.Client, id string, done func(batchState) bool, limit time.Duration) batchState {
	t.Helper()
	var b batchState
	storagetest.Eventually(t, limit, "batch "+id+" to reach the state awaited", func() bool {
		b = batchState{}
		c.Do("GET", "/v1/batch/"+id, nil).Expect(t, 200).JSON(t, &b)
		return done(b)
	})
	return b
}

func terminal(b batchState) bool {
	return b.Status == "succeeded" || b.Status == "failed" || b.Status == "partially_succeeded"
}

// rescueRig is a database and a token shared by servers that rescue one
// another's batches quickly, one item at a time.
type rescueRig struct {
	bin   string
	cfg   storage.Config
	token string
}

func newRescueRig(t *testing.T) *rescueRig {
	t.Helper()
	return &rescueRig{bin: buildBinary(t), cfg: storagetest.Config(t)}
}

// serve starts a server of the rig (with extra environment), waits until it
// is ready and returns it with a client holding the rig's token, made once
// the first server has migrated the database.
func (r *rescueRig) serve(t *testing.T, extra ...string) (*process, *apitest.Client) {
	t.Helper()
	p := startServe(t, r.bin, r.cfg, append([]string{"AGENTFS_BATCH_RESCUE_AFTER=3s", "AGENTFS_BATCH_WORKERS=1"}, extra...)...)
	p.waitReady(t)
	if r.token == "" {
		r.token = createToken(t, r.bin, r.cfg, "--subject", "agent")
	}
	return p, apitest.NewClient(t, p.url, r.token)
}

// TestBatchSurvivesSIGKILL kills the server running a 400-item batch and
// starts another: the batch resumes at its first pending item and every
// item is applied exactly once. The server dies like a killed process once
// 20 items are applied (AGENTFS_FAULT_AFTER_ITEMS): mid-batch, however fast
// the items go.
func TestBatchSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRescueRig(t)
	cb := r.killedMidBatch(t, nil, 400, func(ca *apitest.Client) string {
		var b batchState
		ca.Do("POST", "/v1/batch", putOps("crash", 400), "Content-Type", "application/json", "Idempotency-Key", "crash-batch").
			Expect(t, http.StatusAccepted).JSON(t, &b)
		return b.ID
	})
	var files apitest.FileList
	cb.Do("GET", "/v1/files?prefix=crash/&include_deleted=true&limit=1000", nil).Expect(t, 200).JSON(t, &files)
	seen := map[string]bool{}
	for _, f := range files.Data {
		if seen[f.Path] || f.Version != 1 {
			t.Fatalf("item applied twice: %s (version %d)", f.Path, f.Version)
		}
		seen[f.Path] = true
	}
	if len(seen) != 400 {
		t.Fatalf("%d files, want 400", len(seen))
	}
	// The item in flight when the server died may have left its blob
	// unreferenced; the blob sweep removes exactly such blobs.
	if _, err := storagetest.OpenConfig(t, r.cfg).SweepBlobs(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if n := len(storagetest.ObjectKeys(t, r.cfg)); n != 400 {
		t.Fatalf("%d objects after the blob sweep, want 400", n)
	}
}

// TestTwoServersShareTheQueue submits batches to two server processes on
// one database: all run to the end, each item once.
func TestTwoServersShareTheQueue(t *testing.T) {
	cb := setupCrash(t)
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		c := cb.client(t, cb.a)
		if i%2 == 1 {
			c = cb.client(t, cb.b)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b batchState
			c.Do("POST", "/v1/batch", putOps(fmt.Sprintf("b%d", i), 40), "Content-Type", "application/json",
				"Idempotency-Key", fmt.Sprintf("shared-%d", i)).Expect(t, http.StatusAccepted).JSON(t, &b)
			ids[i] = b.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		end := waitBatch(t, cb.client(t, cb.a), id, terminal, 2*time.Minute)
		if end.Status != "succeeded" || end.Counts.Succeeded != 40 {
			t.Fatalf("batch %s: %s %+v", id, end.Status, end.Counts)
		}
	}
	if n := len(cb.files(t)); n != 240 {
		t.Fatalf("%d files, want 240", n)
	}
}

// TestRunRevertSurvivesSIGKILL kills the server in the middle of undoing a
// run of 300 files and starts another: the revert resumes, every file is
// undone, and no undo is applied twice (one event each).
func TestRunRevertSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRescueRig(t)
	a, ca := r.serve(t)
	const n = 300
	var made batchState
	ca.Do("POST", "/v1/batch", putOps("doomed", n), "Content-Type", "application/json", "Idempotency-Key", "doomed-batch",
		"X-Run-ID", "doomed").Expect(t, http.StatusAccepted).JSON(t, &made)
	if end := waitBatch(t, ca, made.ID, terminal, 2*time.Minute); end.Counts.Succeeded != n {
		t.Fatalf("the run's batch: %+v", end)
	}
	cb := r.killedMidBatch(t, a, n, func(cd *apitest.Client) string {
		var undo batchState
		cd.Do("POST", "/v1/runs/doomed/revert", `{}`, "Content-Type", "application/json",
			"Idempotency-Key", "undo-doomed", "X-Run-ID", "undo").Expect(t, http.StatusAccepted).JSON(t, &undo)
		return undo.ID
	})
	var live apitest.FileList
	cb.Do("GET", "/v1/files?prefix=doomed/", nil).Expect(t, http.StatusOK).JSON(t, &live)
	if len(live.Data) != 0 {
		t.Fatalf("%d of the run's files are still live", len(live.Data))
	}
	undoneOnce(t, cb, n)
}

// killedMidBatch stops a (if any) and runs start (which posts a durable batch of n
// items and answers its id) on a server that dies like a killed process once
// 20 items are applied (AGENTFS_FAULT_AFTER_ITEMS): mid-batch, however fast
// the items go. A third server then resumes the batch; killedMidBatch
// returns a client of it once the batch succeeded with all n items.
func (r *rescueRig) killedMidBatch(t *testing.T, a *process, n int, start func(*apitest.Client) string) *apitest.Client {
	t.Helper()
	if a != nil {
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = a.cmd.Wait()
	}
	doomed, cd := r.serve(t, "AGENTFS_FAULT_AFTER_ITEMS=20")
	id := start(cd)
	if err := doomed.cmd.Wait(); err == nil {
		t.Fatal("the server running the batch exited cleanly, not as killed mid-batch")
	}
	_, cb := r.serve(t)
	var mid batchState
	cb.Do("GET", "/v1/batch/"+id, nil).Expect(t, http.StatusOK).JSON(t, &mid)
	if terminal(mid) {
		t.Fatalf("the batch finished before the kill (%+v); the test proves nothing", mid.Counts)
	}
	if end := waitBatch(t, cb, id, terminal, 3*time.Minute); end.Status != "succeeded" || end.Counts.Succeeded != n {
		t.Fatalf("after restart: %s %+v", end.Status, end.Counts)
	}
	return cb
}

// undoneOnce checks that run "undo" deleted n files, each exactly once.
// Events are handed out once every transaction before them ended (other
// tests write on the same Postgres): it counts until all are there.
func undoneOnce(t *testing.T, cb *apitest.Client, n int) {
	t.Helper()
	var deleted map[string]int
	storagetest.Eventually(t, 30*time.Second, "an event for every undone file", func() bool {
		deleted = undoneFiles(t, cb)
		return len(deleted) >= n
	})
	if len(deleted) != n {
		t.Fatalf("%d files undone, want %d", len(deleted), n)
	}
	for id, k := range deleted {
		if k != 1 {
			t.Fatalf("file %s was undone %d times", id, k)
		}
	}
}

// undoneFiles counts the file.deleted events of run "undo" by file.
func undoneFiles(t *testing.T, cb *apitest.Client) map[string]int {
	t.Helper()
	deleted := map[string]int{}
	for cursor := ""; ; {
		var page struct {
			Data []struct {
				FileID string `json:"file_id"`
				Type   string `json:"type"`
			} `json:"data"`
			HasMore    bool   `json:"has_more"`
			NextCursor string `json:"next_cursor"`
		}
		cb.Do("GET", "/v1/events?run_id=undo&limit=1000"+cursor, nil).Expect(t, http.StatusOK).JSON(t, &page)
		for _, e := range page.Data {
			if e.Type == "file.deleted" {
				deleted[e.FileID]++
			}
		}
		if !page.HasMore {
			break
		}
		cursor = "&after=" + page.NextCursor
	}
	return deleted
}
