package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestStorageOutages stops the S3 server and cuts Postgres off under a
// running API: writes and reads that need the missing part answer
// 503 STORAGE_UNAVAILABLE with Retry-After, /readyz fails, nothing
// half-written appears, and service resumes by itself once the dependency
// is back.
func TestStorageOutages(t *testing.T) {
	t.Parallel()
	s3 := storagetest.StartS3(t)
	pg := storagetest.NewProxy(t, storagetest.PostgresAddr(t))
	cfg := storagetest.ConfigOn(t, s3, pg.Addr())
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	c := srv.Client(t, "alice")
	anon := apitest.NewClient(t, srv.URL, "")
	before := upload(t, c, "before.txt", "kept").Expect(t, http.StatusCreated).File(t)

	unavailable := func(res *apitest.Response) {
		t.Helper()
		res.ExpectProblem(t, http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE")
		if res.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	}

	t.Run("S3Down", func(t *testing.T) {
		s3.Stop()
		unavailable(keyed(t, c, "during-s3-outage", "during.txt", "lost?"))
		unavailable(c.Do("GET", "/v1/files/"+before.ID+"/content", nil))
		unavailable(anon.Do("GET", "/readyz", nil))
		c.Do("GET", "/v1/files/"+before.ID, nil).Expect(t, http.StatusOK) // metadata needs only Postgres
		if l := list(t, c, "path=during.txt&include_deleted=true"); len(l.Data) != 0 {
			t.Fatal("a failed upload left a file")
		}
		s3.Start()
		eventually(t, func() bool { return anon.Do("GET", "/readyz", nil).Status == http.StatusOK })
		keyed(t, c, "during-s3-outage", "during.txt", "lost?").Expect(t, http.StatusCreated) // the key was released
		if got := c.Do("GET", "/v1/files/"+before.ID+"/content", nil).Expect(t, 200); string(got.Body) != "kept" {
			t.Fatalf("content after the outage: %q", got.Body)
		}
	})

	t.Run("PostgresDown", func(t *testing.T) {
		pg.Cut()
		unavailable(c.Do("GET", "/v1/files", nil))
		unavailable(upload(t, c, "pg.txt", "x"))
		unavailable(anon.Do("GET", "/readyz", nil))
		pg.Restore()
		eventually(t, func() bool { return anon.Do("GET", "/readyz", nil).Status == http.StatusOK })
		upload(t, c, "pg.txt", "x").Expect(t, http.StatusCreated)
	})
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the service did not recover within 30 s")
		}
	}
}
