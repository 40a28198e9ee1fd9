package handlers_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestOpenUploadSessionsPerSubjectAreBounded: a subject may have
// MaxPendingUploads sessions open at once; past it a new session is 429
// QUOTA_EXCEEDED (retryable, Retry-After until the first open one
// expires, its key released), resuming one is not refused, another subject
// is not counted, and a session that ends (aborted, completed, expired)
// frees its place. Before the bound, 300 sessions of 5 TiB opened in 0.7 s; here they are of 1 TiB, the test server's largest.
func TestOpenUploadSessionsPerSubjectAreBounded(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxPendingUploads: 3, UploadTTL: time.Hour}})
	c := srv.Client(t, "alice")
	open := func(path string, headers ...string) *apitest.Response {
		return c.Do("POST", "/v1/uploads", `{"path":"`+path+`","size_bytes":1099511627776}`,
			append([]string{"Content-Type", "application/json"}, headers...)...)
	}
	var ids []string
	for i := range 3 {
		var u session
		open(fmt.Sprintf("big-%d.bin", i)).Expect(t, http.StatusCreated).JSON(t, &u)
		ids = append(ids, u.ID)
	}
	refused := open("big-3.bin", "Idempotency-Key", "one-too-many")
	p := refused.ExpectProblem(t, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	if secs, _ := strconv.Atoi(refused.Header.Get("Retry-After")); !p.Retryable || secs < 3500 || secs > 3600 {
		t.Fatalf("Retry-After %q (retryable %v), want until the first open session expires, about an hour", refused.Header.Get("Retry-After"), p.Retryable)
	}
	c.Do("GET", "/v1/operations/one-too-many", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND") // released
	open("big-0.bin").Expect(t, http.StatusOK)                                                         // resumed, not a new one
	srv.Client(t, "bob").Do("POST", "/v1/uploads", `{"path":"b.bin","size_bytes":10}`, "Content-Type", "application/json").
		Expect(t, http.StatusCreated)

	c.Do("DELETE", "/v1/uploads/"+ids[0], nil).Expect(t, http.StatusOK)
	var small session
	open("big-3.bin").Expect(t, http.StatusCreated)
	open("big-4.bin").ExpectProblem(t, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	storagetest.Exec(t, srv.Config, `UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, ids[1])
	c.Do("POST", "/v1/uploads", `{"path":"small.bin","size_bytes":3}`, "Content-Type", "application/json").
		Expect(t, http.StatusCreated).JSON(t, &small)
	putPart(t, c, small.ID, 1, []byte("abc")).Expect(t, http.StatusOK)
	complete(t, c, small.ID, "").Expect(t, http.StatusCreated)
	open("big-5.bin").Expect(t, http.StatusCreated)
}

// TestOpenUploadSessionsBoundHoldsUnderConcurrency races 12 creates of
// sessions at distinct paths against a bound of 3: exactly 3 open.
func TestOpenUploadSessionsBoundHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxPendingUploads: 3}})
	c := srv.Client(t, "alice")
	statuses := concurrently(12, func(i int) int {
		return c.Do("POST", "/v1/uploads", fmt.Sprintf(`{"path":"race-%d.bin","size_bytes":10}`, i),
			"Content-Type", "application/json").Status
	})
	if created := countCreated(t, statuses, http.StatusTooManyRequests); created != 3 {
		t.Fatalf("%d sessions opened against a bound of 3: %v", created, statuses)
	}
}
