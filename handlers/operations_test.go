package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func keyed(t *testing.T, c *apitest.Client, key, path, body string, headers ...string) *apitest.Response {
	t.Helper()
	return c.Do("POST", "/v1/files?path="+url.QueryEscape(path), body, append([]string{"Idempotency-Key", key}, headers...)...)
}

func fileCount(t *testing.T, c *apitest.Client) int {
	t.Helper()
	return len(list(t, c, "include_deleted=true").Data)
}

func TestIdempotentUpload(t *testing.T) {
	t.Run("ReplaysSameKeySameBytes", func(t *testing.T) {
		c, b := setup(t)
		first := keyed(t, c, "k-1", "a.txt", "hello", "X-Run-ID", "r1").Expect(t, http.StatusCreated)
		again := keyed(t, c, "k-1", "a.txt", "hello", "X-Run-ID", "r1").Expect(t, http.StatusCreated)
		if again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("Idempotent-Replayed: first %q, again %q", first.Header.Get("Idempotent-Replayed"), again.Header.Get("Idempotent-Replayed"))
		}
		if string(again.Body) != string(first.Body) || again.Header.Get("Location") != first.Header.Get("Location") ||
			again.Header.Get("ETag") != first.Header.Get("ETag") {
			t.Fatalf("replay differs:\n%s\n%s", first.Body, again.Body)
		}
		// A quoted structured-field key is the same key.
		keyed(t, c, `"k-1"`, "a.txt", "hello", "X-Run-ID", "r1").Expect(t, http.StatusCreated)
		if fileCount(t, c) != 1 || objectCount(t, b) != 1 {
			t.Fatalf("%d files, %d objects after replays", fileCount(t, c), objectCount(t, b))
		}
	})

	t.Run("RejectsKeyReuseForAnotherRequest", func(t *testing.T) {
		c, b := setup(t)
		f := keyed(t, c, "k-2", "b.txt", "hello", "X-Run-ID", "r1").Expect(t, 201).File(t)
		for name, tc := range map[string]struct {
			path, body string
			headers    []string
		}{
			"OneByteChanged": {"b.txt", "hellO", []string{"X-Run-ID", "r1"}},
			"OtherRun":       {"b.txt", "hello", []string{"X-Run-ID", "r2"}},
			"NoRun":          {"b.txt", "hello", nil},
			"OtherAgent":     {"b.txt", "hello", []string{"X-Run-ID", "r1", "X-Agent-ID", "a"}},
			"OtherPath":      {"c.txt", "hello", []string{"X-Run-ID", "r1"}},
			"OtherType":      {"b.txt", "hello", []string{"X-Run-ID", "r1", "Content-Type", "text/plain"}},
			"IfNoneMatch":    {"b.txt", "hello", []string{"X-Run-ID", "r1", "If-None-Match", "*"}},
		} {
			t.Run(name, func(t *testing.T) {
				keyed(t, c, "k-2", tc.path, tc.body, tc.headers...).ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
			})
		}
		c.Do("POST", "/v1/files?path=b.txt&if_exists=replace", "hello", "Idempotency-Key", "k-2", "X-Run-ID", "r1").
			ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
		c.Do("POST", "/v1/files?path=b.txt&if_exists=replace", "hello", "Idempotency-Key", "k-3", "If-Match", f.ETag).Expect(t, 200)
		c.Do("POST", "/v1/files?path=b.txt&if_exists=replace", "hello", "Idempotency-Key", "k-3", "If-Match", `"`+sha("x")+`"`).
			ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
		// Unknown query parameters are not part of the request.
		c.Do("POST", "/v1/files?path=b.txt&utm=1", "hello", "Idempotency-Key", "k-2", "X-Run-ID", "r1").Expect(t, 201)
		c.Do("DELETE", "/v1/files/"+f.ID, nil, "Idempotency-Key", "k-2").ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
		if fileCount(t, c) != 1 || objectCount(t, b) != 1 {
			t.Fatalf("conflicts changed state: %d files, %d objects", fileCount(t, c), objectCount(t, b))
		}
	})

	t.Run("JSONKeyOrderDoesNotMatterInContent", func(t *testing.T) {
		// A put's content is its bytes: reordered JSON is other bytes, so
		// another request. (Canonical JSON applies to JSON request bodies,
		// which idempotency's own tests cover.)
		c, _ := setup(t)
		keyed(t, c, "k-j", "j.json", `{"a":1,"b":2}`, "Content-Type", "application/json").Expect(t, 201)
		keyed(t, c, "k-j", "j.json", `{"b":2,"a":1}`, "Content-Type", "application/json").
			ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("KeysAreScopedBySubject", func(t *testing.T) {
		c, b := setup(t)
		bob := b.srv.Client(t, "bob")
		fa := keyed(t, c, "shared", "x.txt", "alice's").Expect(t, 201).File(t)
		fb := keyed(t, bob, "shared", "x.txt", "bob's").Expect(t, 201).File(t)
		if fa.ID == fb.ID {
			t.Fatal("two subjects share a key's outcome")
		}
		bob.Do("GET", "/v1/operations/shared", nil).Expect(t, 200)
	})

	t.Run("ReplaysRecordedPathExists", func(t *testing.T) {
		c, _ := setup(t)
		holder := upload(t, c, "taken.txt", "first").Expect(t, 201).File(t)
		p := keyed(t, c, "k-taken", "taken.txt", "second").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		c.Do("DELETE", "/v1/files/"+holder.ID, nil).Expect(t, 200)
		again := keyed(t, c, "k-taken", "taken.txt", "second")
		p2 := again.ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if again.Header.Get("Idempotent-Replayed") != "true" || p2.ExistingFileID != p.ExistingFileID {
			t.Fatalf("the recorded 409 was not replayed: %s", again.Body)
		}
		keyed(t, c, "k-taken", "taken.txt", "third").ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("ReleasesKeyOnChecksumMismatch", func(t *testing.T) {
		c, _ := setup(t)
		keyed(t, c, "k-sum", "s.txt", "data", "Content-Digest", digestHeader("other")).
			ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
		c.Do("GET", "/v1/operations/k-sum", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		keyed(t, c, "k-sum", "s.txt", "data").Expect(t, http.StatusCreated)
	})

	t.Run("ReplayStillChecksAuthAndScope", func(t *testing.T) {
		c, b := setup(t)
		keyed(t, c, "k-auth", "z.txt", "z").Expect(t, 201)
		reader := apitest.NewClient(t, b.srv.URL, b.srv.Token(t, "alice", "read"))
		keyed(t, reader, "k-auth", "z.txt", "z").ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		keyed(t, apitest.NewClient(t, b.srv.URL, ""), "k-auth", "z.txt", "z").ExpectProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	})

	t.Run("ConcurrentRequestsWithOneKeyMakeOneFile", func(t *testing.T) {
		c, b := setup(t)
		res := concurrently(24, func(int) *apitest.Response {
			return keyed(t, c, "k-race", "race.bin", strings.Repeat("z", 256<<10))
		})
		var id string
		for _, r := range res {
			switch r.Status {
			case http.StatusCreated:
				f := r.File(t)
				if id != "" && f.ID != id {
					t.Fatalf("two files: %s and %s", id, f.ID)
				}
				id = f.ID
			case http.StatusConflict:
				if p := r.Problem(t); p.Code != "OPERATION_IN_PROGRESS" || r.Header.Get("Retry-After") == "" ||
					!strings.Contains(r.Header.Get("Link"), "/v1/operations/k-race") {
					t.Fatalf("409 %s, Retry-After %q, Link %q", p.Code, r.Header.Get("Retry-After"), r.Header.Get("Link"))
				}
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		}
		if id == "" {
			t.Fatal("no request created the file")
		}
		if fileCount(t, c) != 1 || objectCount(t, b) != 1 {
			t.Fatalf("%d files, %d objects", fileCount(t, c), objectCount(t, b))
		}
	})
}

func TestIdempotentDeleteAndRestore(t *testing.T) {
	c, _ := setup(t)
	f := upload(t, c, "d.txt", "x").Expect(t, 201).File(t)
	del := c.Do("DELETE", "/v1/files/"+f.ID, nil, "Idempotency-Key", "del-1").Expect(t, 200)
	c.Do("POST", "/v1/files/"+f.ID+"/restore", nil, "Idempotency-Key", "res-1").Expect(t, 200)
	// The key replays the recorded delete; it does not delete again.
	again := c.Do("DELETE", "/v1/files/"+f.ID, nil, "Idempotency-Key", "del-1").Expect(t, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(del.Body) {
		t.Fatalf("delete replay: %s", again.Body)
	}
	if meta := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); meta.DeletedAt != nil {
		t.Fatal("a replayed delete deleted the file again")
	}
	// A recorded 404 replays too.
	c.Do("POST", "/v1/files/file_none/restore", nil, "Idempotency-Key", "res-404").ExpectProblem(t, 404, "NOT_FOUND")
	r := c.Do("POST", "/v1/files/file_none/restore", nil, "Idempotency-Key", "res-404")
	r.ExpectProblem(t, 404, "NOT_FOUND")
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("a recorded 404 was not replayed")
	}
}

func TestOperations(t *testing.T) {
	c, b := setup(t)
	f := keyed(t, c, "op-1", "o.txt", "o").Expect(t, 201).File(t)
	var op struct {
		Object         string                 `json:"object"`
		IdempotencyKey string                 `json:"idempotency_key"`
		Status         string                 `json:"status"`
		Method         string                 `json:"method"`
		Route          string                 `json:"route"`
		ResponseStatus int                    `json:"response_status"`
		Response       map[string]any         `json:"response"`
		Resource       map[string]string      `json:"resource"`
		ExpiresAt      time.Time              `json:"expires_at"`
		Extra          map[string]interface{} `json:"-"`
	}
	c.Do("GET", "/v1/operations/op-1", nil).Expect(t, 200).JSON(t, &op)
	if op.Status != "completed" || op.ResponseStatus != 201 || op.Method != "POST" || op.Route != "/v1/files" ||
		op.Resource["id"] != f.ID || op.Resource["object"] != "file" || op.Response["id"] != f.ID {
		t.Fatalf("operation: %+v", op)
	}
	if d := time.Until(op.ExpiresAt); d < 6*24*time.Hour {
		t.Fatalf("expires_at %v is not the retention away", op.ExpiresAt)
	}
	c.Do("GET", "/v1/operations/never-used", nil).ExpectProblem(t, 404, "NOT_FOUND")
	c.Do("GET", "/v1/operations/bad%20key", nil).ExpectProblem(t, 400, "INVALID_IDEMPOTENCY_KEY")
	b.srv.Client(t, "bob").Do("GET", "/v1/operations/op-1", nil).ExpectProblem(t, 404, "NOT_FOUND")
}

// TestDigestAnswersBeforeBody sends only the headers of a keyed upload that
// carries Content-Digest: the server must answer the replay or the
// conflict without waiting for a body that never comes.
func TestDigestAnswersBeforeBody(t *testing.T) {
	c, b := setup(t)
	keyed(t, c, "k-dig", "d.bin", "content", "Content-Digest", digestHeader("content")).Expect(t, 201)
	token := b.srv.Token(t, "alice")
	for _, tc := range []struct {
		digest string
		status int
	}{{digestHeader("content"), 201}, {digestHeader("other"), 409}} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/files?path=d.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Idempotency-Key: k-dig\r\nContent-Digest: %s\r\nContent-Length: 1000000\r\n\r\n", token, tc.digest)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer before the body: %v", err)
		}
		res.Body.Close()
		conn.Close()
		if res.StatusCode != tc.status {
			t.Fatalf("status %d, want %d", res.StatusCode, tc.status)
		}
	}
}

// TestLeaseRenewedWhileBodyStreams sends a body that outlasts the claim's
// lease: the claim is renewed, so a repeat meanwhile is told to wait, never
// allowed to take the key over. Each round makes the lease lapse (a row
// seeded in the past) and waits for the streaming request to renew it.
func TestLeaseRenewedWhileBodyStreams(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Lease: time.Second})
	c := srv.Client(t, "alice")
	pr, pw := io.Pipe()
	done := make(chan *apitest.Response, 1)
	go func() {
		done <- c.Do("POST", "/v1/files?path=slow.bin", pr, "Idempotency-Key", "slow-body")
	}()
	_, _ = pw.Write([]byte("first part "))
	storagetest.Eventually(t, 10*time.Second, "the slow upload to claim its key", func() bool {
		return c.Do("GET", "/v1/operations/slow-body", nil).Status == http.StatusOK
	})
	ctx := context.Background()
	for i := 0; i < 3; i++ { // three leases
		if _, err := srv.Store.Pool().Exec(ctx, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second'
			WHERE key = 'slow-body'`); err != nil {
			t.Fatal(err)
		}
		storagetest.Eventually(t, 10*time.Second, "the streaming request to renew its lease", func() bool {
			var live bool
			err := srv.Store.Pool().QueryRow(ctx, `SELECT lease_expires_at > now() FROM idempotency_keys WHERE key = 'slow-body'`).Scan(&live)
			return err == nil && live
		})
		_, _ = pw.Write([]byte("more "))
		c.Do("POST", "/v1/files?path=slow.bin", "first part more more more ", "Idempotency-Key", "slow-body").
			ExpectProblem(t, http.StatusConflict, "OPERATION_IN_PROGRESS")
	}
	_, _ = pw.Write([]byte("more "))
	pw.Close()
	(<-done).Expect(t, http.StatusCreated)
	again := c.Do("POST", "/v1/files?path=slow.bin", "first part more more more more ", "Idempotency-Key", "slow-body").Expect(t, 201)
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the finished slow upload was not replayed")
	}
}

// TestStalledBodyTimesOut sends part of a keyed upload and then nothing:
// after the idle limit the server answers 408, closes the connection,
// stores nothing and releases the key.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 1 << 20, BodyIdleTimeout: time.Second}})
	c := srv.Client(t, "alice")
	token := srv.Token(t, "alice")
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/files?path=stall.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Idempotency-Key: stall-1\r\nContent-Length: 100000\r\n\r\npartial body", token)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "REQUEST_TIMEOUT") || !res.Close {
		t.Fatalf("stalled body: %d close=%v %s", res.StatusCode, res.Close, body)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open")
	}
	c.Do("GET", "/v1/operations/stall-1", nil).ExpectProblem(t, 404, "NOT_FOUND")
	if n := len(list(t, c, "include_deleted=true").Data); n != 0 || len(storagetest.ObjectKeys(t, srv.Config)) != 0 {
		t.Fatalf("a stalled upload left %d files", n)
	}
	keyed(t, c, "stall-1", "stall.bin", "complete body").Expect(t, http.StatusCreated)
}
