package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// crashBundle is two server processes on one fresh database and bucket,
// with short idempotency and upload complete leases so lapsed claims are
// taken over quickly.
type crashBundle struct {
	bin   string
	cfg   storage.Config
	a, b  *process
	token string
}

// crashA sends req to server A with the bundle's token and checks that A
// died of the injected crash (exit 137) instead of answering.
func (cb *crashBundle) crashA(t *testing.T, req *http.Request) {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+cb.token)
	if res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the crashing server answered %d", res.StatusCode)
	}
	_ = cb.a.cmd.Wait()
	if code := cb.a.cmd.ProcessState.ExitCode(); code != 137 {
		t.Fatalf("server A exited %d, want the injected crash (137)", code)
	}
}

func setupCrash(t *testing.T, envA ...string) *crashBundle {
	t.Helper()
	t.Parallel()
	cb := &crashBundle{bin: buildBinary(t), cfg: storagetest.Config(t)}
	leases := []string{"AGENTFS_IDEMPOTENCY_LEASE=2s", "AGENTFS_UPLOAD_COMPLETE_LEASE=3s"}
	cb.a = startServe(t, cb.bin, cb.cfg, append(leases, envA...)...)
	cb.b = startServe(t, cb.bin, cb.cfg, leases...)
	cb.a.waitReady(t)
	cb.b.waitReady(t)
	out, err := runBinary(t, cb.bin, cb.cfg, "token", "create", "--subject", "agent")
	if err != nil {
		t.Fatal(err)
	}
	cb.token = strings.TrimSpace(out)
	return cb
}

func (cb *crashBundle) client(t *testing.T, p *process) *apitest.Client {
	return apitest.NewClient(t, p.url, cb.token)
}

// startUpload sends the head of a keyed upload and the first part of its
// body, and leaves the rest for later.
func (cb *crashBundle) startUpload(t *testing.T, p *process, key string, body []byte) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/files?path=big.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Idempotency-Key: %s\r\nContent-Length: %d\r\n\r\n", cb.token, key, len(body))
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitClaimed waits until the key is claimed (in progress), as seen by p.
func (cb *crashBundle) waitClaimed(t *testing.T, p *process, key string) {
	t.Helper()
	storagetest.Eventually(t, 20*time.Second, "key "+key+" to be claimed", func() bool {
		res := cb.client(t, p).Do("GET", "/v1/operations/"+key, nil)
		var op struct{ Status string }
		return res.Status == 200 && json.Unmarshal(res.Body, &op) == nil && op.Status == "in_progress"
	})
}

// retryUntilDone repeats a keyed upload while it is answered
// OPERATION_IN_PROGRESS, as a client honouring Retry-After would.
func (cb *crashBundle) retryUntilDone(t *testing.T, p *process, key string, body []byte) *apitest.Response {
	t.Helper()
	var res *apitest.Response
	storagetest.Eventually(t, 30*time.Second, "key "+key+" to be no longer in progress", func() bool {
		res = cb.client(t, p).Do("POST", "/v1/files?path=big.bin", body, "Idempotency-Key", key)
		return res.Status != http.StatusConflict || res.Problem(t).Code != "OPERATION_IN_PROGRESS"
	})
	return res
}

func (cb *crashBundle) files(t *testing.T) []apitest.File {
	t.Helper()
	var l apitest.FileList
	cb.client(t, cb.b).Do("GET", "/v1/files?include_deleted=true&limit=1000", nil).Expect(t, 200).JSON(t, &l)
	return l.Data
}

func payload() []byte { return bytes.Repeat([]byte("agentfs!"), 128<<10) } // 1 MiB

// TestCrashBeforeCommit kills the server holding a claim mid-body: the key
// holds no effect, and the retry on another instance succeeds exactly once.
func TestCrashBeforeCommit(t *testing.T) {
	cb := setupCrash(t)
	body := payload()
	cb.startUpload(t, cb.a, "crash-1", body)
	cb.waitClaimed(t, cb.b, "crash-1")
	if err := cb.a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cb.a.cmd.Wait()

	res := cb.retryUntilDone(t, cb.b, "crash-1", body).Expect(t, http.StatusCreated)
	if res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("the dead claim was replayed as if it had committed")
	}
	again := cb.client(t, cb.b).Do("POST", "/v1/files?path=big.bin", body, "Idempotency-Key", "crash-1").Expect(t, 201)
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(res.Body) {
		t.Fatalf("second retry: %s", again.Body)
	}
	if n := len(cb.files(t)); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
}

// TestCrashAfterCommit kills the server after the effect committed and
// before the response left: the retry replays the committed outcome.
func TestCrashAfterCommit(t *testing.T) {
	cb := setupCrash(t, "AGENTFS_FAULT_AFTER_COMMIT=exit")
	body := payload()
	req, _ := http.NewRequest("POST", cb.a.url+"/v1/files?path=big.bin", bytes.NewReader(body))
	req.Header.Set("Idempotency-Key", "crash-2")
	cb.crashA(t, req)
	res := cb.client(t, cb.b).Do("POST", "/v1/files?path=big.bin", body, "Idempotency-Key", "crash-2").Expect(t, 201)
	if res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the committed upload was not replayed")
	}
	if n := len(cb.files(t)); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
}

// TestPausedOwnerCannotCommit stops a server holding a claim (SIGSTOP) until
// its lease lapses, lets another instance take the key over and finish, then
// resumes the first: it must not commit a second effect.
func TestPausedOwnerCannotCommit(t *testing.T) {
	cb := setupCrash(t)
	body := payload()
	conn := cb.startUpload(t, cb.a, "pause-1", body)
	cb.waitClaimed(t, cb.b, "pause-1")
	if err := cb.a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The paused owner renews nothing; its lease is made to lapse now.
	storagetest.Exec(t, cb.cfg, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE key = $1`, "pause-1")
	taken := cb.retryUntilDone(t, cb.b, "pause-1", body).Expect(t, http.StatusCreated).File(t)
	if err := cb.a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, late := testkit.RawAnswer(t, conn)
	if status != http.StatusConflict || !strings.Contains(late, "OPERATION_IN_PROGRESS") {
		t.Fatalf("the late owner answered %d %s", status, late)
	}
	files := cb.files(t)
	if len(files) != 1 || files[0].ID != taken.ID {
		t.Fatalf("files after the late owner woke: %+v", files)
	}
	if n := len(storagetest.ObjectKeys(t, cb.cfg)); n != 1 {
		t.Fatalf("%d objects, want 1: the late owner's blob must be removed", n)
	}
	cb.client(t, cb.a).Do("POST", "/v1/files?path=big.bin", body, "Idempotency-Key", "pause-1").Expect(t, 201)
}

// TestTwoServersRaceOneKey sends one keyed upload many times at once to two
// server processes: exactly one file, and every answer is it or
// OPERATION_IN_PROGRESS.
func TestTwoServersRaceOneKey(t *testing.T) {
	cb := setupCrash(t)
	body := payload()
	var wg sync.WaitGroup
	res := make([]*apitest.Response, 16)
	for i := range res {
		p := cb.a
		if i%2 == 1 {
			p = cb.b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = cb.client(t, p).Do("POST", "/v1/files?path=big.bin", body, "Idempotency-Key", "race-2")
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range res {
		switch r.Status {
		case http.StatusCreated:
			ids[r.File(t).ID] = true
		case http.StatusConflict:
			if code := r.Problem(t).Code; code != "OPERATION_IN_PROGRESS" {
				t.Fatalf("409 %s", code)
			}
		default:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	}
	if len(ids) != 1 || len(cb.files(t)) != 1 {
		t.Fatalf("files created: %v, listed %d", ids, len(cb.files(t)))
	}
}
