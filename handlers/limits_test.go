package handlers_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

func TestRateLimit(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 1 << 20, RatePerSecond: 0.5, RateBurst: 2}})
	c := srv.Client(t, "alice")
	c.Do("GET", "/v1/files", nil).Expect(t, 200)
	c.Do("GET", "/v1/files", nil).Expect(t, 200)
	res := c.Do("GET", "/v1/files", nil)
	res.ExpectProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
	if s, _ := strconv.Atoi(res.Header.Get("Retry-After")); s < 1 || s > 2 {
		t.Fatalf("Retry-After %q, want the wait for one token (2 s at 0.5/s)", res.Header.Get("Retry-After"))
	}
	srv.Client(t, "bob").Do("GET", "/v1/files", nil).Expect(t, 200) // per subject
}

func TestByteQuota(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 1 << 20, QuotaBytes: 10, QuotaWindow: time.Hour}})
	c := srv.Client(t, "alice")
	keyed(t, c, "q-1", "a.txt", "123456").Expect(t, 201)
	keyed(t, c, "q-1", "a.txt", "123456").Expect(t, 201) // a replay writes nothing and costs nothing
	res := c.Do("POST", "/v1/files?path=b.txt", "123456")
	res.ExpectProblem(t, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	if s, _ := strconv.Atoi(res.Header.Get("Retry-After")); s < 1 || s > 3600 {
		t.Fatalf("Retry-After %q, want the rest of the window", res.Header.Get("Retry-After"))
	}
	c.Do("POST", "/v1/files?path=c.txt", "1234").Expect(t, 201) // exactly fills the quota
	c.Do("POST", "/v1/files?path=d.txt", "1").ExpectProblem(t, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	c.Do("GET", "/v1/files", nil).Expect(t, 200) // reads are not counted
	srv.Client(t, "bob").Do("POST", "/v1/files?path=a.txt", "123456").Expect(t, 201)
	if n := len(list(t, c, "include_deleted=true").Data); n != 2 {
		t.Fatalf("%d files, want 2", n)
	}
}
