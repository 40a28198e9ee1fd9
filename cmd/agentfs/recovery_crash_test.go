package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// recoveryIntent is what the dead run meant to do: the files it meant to
// write and the upload session it meant to fill, which the worker taking
// over knows from its task (not from the state, which it learns only from
// the run's recovery).
type recoveryIntent struct {
	run      string
	files    map[string][]byte // path → bytes of a keyed put
	uploads  map[string][]byte // path → bytes of a multipart upload
	partSize int
}

// TestRunRecoveryAfterSIGKILL kills the server of a run mid-way (a keyed
// upload streaming, a multipart session with parts missing, a batch
// running; the server dies like a killed process once 20 batch items are
// applied, AGENTFS_FAULT_AFTER_ITEMS) and starts a fresh one; a fresh
// client reads the run's recovery and does only what its next_actions
// say, each the exact request it names. Every intended effect then exists
// exactly once: one event and version 1 per file, the bytes intended.
func TestRunRecoveryAfterSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRescueRig(t)
	a, ca := r.serve(t, "AGENTFS_FAULT_AFTER_ITEMS=20")
	in := recoveryIntent{run: "recover-run",
		files:   map[string][]byte{"rec/keyed.txt": []byte("the keyed upload, all of it")},
		uploads: map[string][]byte{"rec/big.bin": bytes.Repeat([]byte("0123456789abcdef"), (16<<20+4096)/16)}}
	run := []string{"X-Run-ID", in.run}

	// A keyed upload whose body is still streaming when the server dies.
	pr, pw := io.Pipe()
	go func() {
		req, _ := http.NewRequest("POST", a.url+"/v1/files?path="+url.QueryEscape("rec/keyed.txt"), pr)
		req.Header.Set("Authorization", "Bearer "+r.token)
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Idempotency-Key", "rec-put")
		req.Header.Set("X-Run-ID", in.run)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	_, _ = pw.Write(in.files["rec/keyed.txt"][:8])
	storagetest.Eventually(t, 30*time.Second, "the streaming upload to claim its key", func() bool {
		return ca.Do("GET", "/v1/operations/rec-put", nil).Status == http.StatusOK
	})
	// A session with one part of three received.
	big := in.uploads["rec/big.bin"]
	raw, _ := json.Marshal(map[string]any{"path": "rec/big.bin", "size_bytes": len(big)})
	var u struct {
		ID        string `json:"id"`
		PartSize  int    `json:"part_size"`
		PartCount int    `json:"part_count"`
	}
	ca.Do("POST", "/v1/uploads", raw, append(run, "Content-Type", "application/json", "Idempotency-Key", "rec-session")...).
		Expect(t, http.StatusCreated).JSON(t, &u)
	in.partSize = u.PartSize
	if u.PartCount != 3 {
		t.Fatalf("the session has %d parts, want 3", u.PartCount)
	}
	ca.Do("PUT", "/v1/uploads/"+u.ID+"/parts/1", big[:u.PartSize], run...).Expect(t, http.StatusOK)
	// A batch of 400 puts; the server dies once 20 are applied.
	var b batchState
	ca.Do("POST", "/v1/batch", putOps("rec/batch", 400), append(run, "Content-Type", "application/json", "Idempotency-Key", "rec-batch")...).
		Expect(t, http.StatusAccepted).JSON(t, &b)
	if err := a.cmd.Wait(); err == nil {
		t.Fatal("the server of the run exited cleanly, not as killed mid-run")
	}
	pw.Close()
	// The dead upload's lease lapses (a row seeded in the past: time is an
	// input), which makes its claim abandoned.
	storagetest.Exec(t, r.cfg, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE status = 'in_progress'`)

	// A fresh server, which rescues the orphaned batch 10 s after it starts
	// (long after the recovery below is read), and a fresh client.
	p, cb := r.serve(t, "AGENTFS_BATCH_RESCUE_AFTER=10s")
	fresh, err := client.New(p.url, r.token)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fresh.RunRecovery(context.Background(), in.run, client.RecoveryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkDeadRun(t, rec, u.ID, b.ID)
	for _, n := range rec.NextActions {
		follow(t, p.url, r.token, rec, n, in)
	}
	checkEveryEffectOnce(t, cb, fresh, in)
}

// checkDeadRun: the recovery of the killed run says what each of its
// pieces is: the streaming put abandoned, the session missing parts 2 and
// 3, the batch running.
func checkDeadRun(t *testing.T, rec *client.RunRecovery, uploadID, batchID string) {
	t.Helper()
	status := map[string]string{}
	for _, o := range rec.Operations {
		status[o.IdempotencyKey] = o.Status
	}
	if status["rec-put"] != "abandoned" || status["rec-session"] != "completed" || status["rec-batch"] != "completed" {
		t.Fatalf("the run's keys are %v, want rec-put abandoned, rec-session and rec-batch completed", status)
	}
	ups := rec.InFlight.Uploads
	if len(ups) != 1 || ups[0].ID != uploadID || fmt.Sprint(ups[0].MissingParts) != "[2 3]" {
		t.Fatalf("in-flight uploads %+v, want %s missing parts 2 and 3", ups, uploadID)
	}
	bs := rec.InFlight.Batches
	if len(bs) != 1 || bs[0].ID != batchID || bs[0].Counts.Pending == 0 {
		t.Fatalf("in-flight batches %+v, want %s still running", bs, batchID)
	}
	var steps []string
	for _, n := range rec.NextActions {
		steps = append(steps, n.Method+" "+n.Path+" "+n.IdempotencyKey)
	}
	t.Logf("next_actions:\n%s", strings.Join(steps, "\n"))
}

// follow sends the request n names, as a program that knows only the
// run's intent would: a part's bytes cut from the intended content, a put
// sent again with its key and the run's id, a wait repeated until the
// batch ends.
func follow(t *testing.T, base, token string, rec *client.RunRecovery, n client.Next, in recoveryIntent) {
	t.Helper()
	var body []byte
	path, _, _ := strings.Cut(n.Path, "?")
	switch {
	case n.Method == http.MethodPut && strings.Contains(path, "/parts/"):
		id, num, _ := strings.Cut(strings.TrimPrefix(path, "/v1/uploads/"), "/parts/")
		k, _ := strconv.Atoi(num)
		data := in.uploads[uploadPath(rec, id)]
		body = data[(k-1)*in.partSize : min(k*in.partSize, len(data))]
	case n.Method == http.MethodPost && path == "/v1/files":
		q, _ := url.ParseQuery(strings.SplitN(n.Path, "?", 2)[1])
		body = in.files[q.Get("path")]
	}
	for round := 0; ; round++ {
		req, _ := http.NewRequest(n.Method, base+n.Path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Run-ID", in.run)
		if n.Method == http.MethodPost && path == "/v1/files" {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		if n.IdempotencyKey != "" {
			req.Header.Set("Idempotency-Key", n.IdempotencyKey)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", n.Method, n.Path, err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s (%s): %d %s", n.Method, n.Path, n.Text, res.StatusCode, out)
		}
		var state struct{ Status string }
		_ = json.Unmarshal(out, &state)
		if n.Method != http.MethodGet || state.Status != "queued" && state.Status != "running" {
			return
		}
		if round == 10 {
			t.Fatalf("%s: still %s after 10 waits", n.Path, state.Status)
		}
	}
}

func uploadPath(rec *client.RunRecovery, id string) string {
	for _, u := range rec.InFlight.Uploads {
		if u.ID == id {
			return u.Path
		}
	}
	return ""
}

// checkEveryEffectOnce: each intended file exists once, at version 1
// with the intended bytes, with one event; the run's recovery is left
// with nothing to do.
func checkEveryEffectOnce(t *testing.T, c *apitest.Client, fresh *client.Client, in recoveryIntent) {
	t.Helper()
	const want = 402 // the keyed put, the multipart upload, 400 batch items
	var events struct {
		Data []struct{ Type, Path string } `json:"data"`
	}
	storagetest.Eventually(t, 30*time.Second, "the run's events", func() bool {
		c.Do("GET", "/v1/events?run_id="+in.run+"&limit=1000", nil).Expect(t, http.StatusOK).JSON(t, &events)
		return len(events.Data) >= want
	})
	seen := map[string]int{}
	for _, e := range events.Data {
		if e.Type != "file.created" {
			t.Fatalf("event %s of %s: the run only creates", e.Type, e.Path)
		}
		if seen[e.Path]++; seen[e.Path] > 1 {
			t.Fatalf("%s created twice", e.Path)
		}
	}
	if len(events.Data) != want {
		t.Fatalf("%d events, want %d", len(events.Data), want)
	}
	for path, data := range map[string][]byte{"rec/keyed.txt": in.files["rec/keyed.txt"], "rec/big.bin": in.uploads["rec/big.bin"]} {
		var list apitest.FileList
		c.Do("GET", "/v1/files?path="+url.QueryEscape(path), nil).Expect(t, http.StatusOK).JSON(t, &list)
		sum := sha256.Sum256(data)
		if len(list.Data) != 1 || list.Data[0].Version != 1 || list.Data[0].SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: %+v, want one file at version 1 of the intended bytes", path, list.Data)
		}
	}
	after, err := fresh.RunRecovery(context.Background(), in.run, client.RecoveryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.NextActions) != 0 || len(after.InFlight.Uploads) != 0 || len(after.InFlight.Batches) != 0 || after.Confirmed.Events != want {
		t.Fatalf("after the takeover the recovery says %+v", after)
	}
}
