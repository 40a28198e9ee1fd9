package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestSoak runs many clients uploading, replacing and retrying with keys
// while the S3 server is restarted once, all bounded in count and on
// loopback (AGENTFS_SOAK_OPS=500 make test ARGS='./handlers/ -run TestSoak'
// for a longer run). Afterwards every acknowledged write is there with the right
// SHA-256, no path has two live files, a sweep leaves no unreferenced blob,
// and no response was a 5xx other than 503.
func TestSoak(t *testing.T) {
	t.Parallel()
	s3 := storagetest.StartS3(t)
	cfg := storagetest.ConfigOn(t, s3, "")
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	// AGENTFS_SOAK_OPS lengthens the soak (operations per client; 30 keep
	// it to seconds in make test).
	const clients = 8
	ops := 30
	if v, err := strconv.Atoi(os.Getenv("AGENTFS_SOAK_OPS")); err == nil && v > 0 {
		ops = v
	}
	var (
		outages   atomic.Int64 // answers that said "retry later"
		recovered atomic.Bool  // S3 is back after its outage
		mu        sync.Mutex
		acked     = map[string]string{} // path -> sha256 of the last acknowledged content
		bad       []string
	)
	send := func(c *apitest.Client, path, body, key string, replace bool) {
		url := "/v1/files?path=" + path
		if replace {
			url += "&if_exists=replace"
		}
		for attempt := 0; attempt < 40; attempt++ {
			res := c.Do("POST", url, body, "Idempotency-Key", key)
			switch {
			case res.Status == 200 || res.Status == 201:
				sum := sha256.Sum256([]byte(body))
				mu.Lock()
				acked[path] = hex.EncodeToString(sum[:])
				mu.Unlock()
				return
			case res.Status == 503 || res.Status == 409 && res.Problem(t).Code == "OPERATION_IN_PROGRESS":
				outages.Add(1)
				// Real time on purpose: a client honouring Retry-After waits
				// before it sends the same key again; S3 and the claim of an
				// earlier attempt come back on their own time.
				time.Sleep(100 * time.Millisecond)
			default:
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s %s: %d %s", key, path, res.Status, res.Body))
				mu.Unlock()
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := apitest.NewClient(t, srv.URL, srv.Token(t, "soak"))
			rnd := rand.New(rand.NewSource(int64(i)))
			// Each client writes until it did its share and S3 came back.
			for op := 0; op < ops || !recovered.Load(); op++ {
				path := fmt.Sprintf("c%d/f%d", i, rnd.Intn(5))
				body := fmt.Sprintf("client %d op %d %s", i, op, string(make([]byte, rnd.Intn(64<<10))))
				send(c, path, body, fmt.Sprintf("soak-%d-%d", i, op), true)
			}
		}()
	}
	// S3 stops once writes are flowing and starts again once they felt it.
	storagetest.Eventually(t, 30*time.Second, "the first acknowledged writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= clients
	})
	before := outages.Load()
	s3.Stop()
	storagetest.Eventually(t, 30*time.Second, "a write to meet the outage", func() bool { return outages.Load() > before })
	s3.Start()
	recovered.Store(true)
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}

	c := apitest.NewClient(t, srv.URL, srv.Token(t, "soak"))
	var live []apitest.File
	for cursor := ""; ; {
		var page apitest.FileList
		c.Do("GET", "/v1/files?limit=1000"+cursor, nil).Expect(t, 200).JSON(t, &page)
		live = append(live, page.Data...)
		if !page.HasMore {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	seen := map[string]bool{}
	for _, f := range live {
		if seen[f.Path] {
			t.Errorf("two live files at %s", f.Path)
		}
		seen[f.Path] = true
		if want := acked[f.Path]; f.SHA256 != want {
			t.Errorf("%s holds %s, the last acknowledged write was %s", f.Path, f.SHA256, want)
		}
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
		if sum := sha256.Sum256(got.Body); hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: content does not match its sha256", f.Path)
		}
	}
	if len(seen) != len(acked) {
		t.Errorf("%d live paths, %d acknowledged", len(seen), len(acked))
	}
	if _, err := srv.Store.SweepBlobs(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// Every object left is the content of a version kept (the current one
	// of each live file, and the earlier ones a replace kept), each once.
	var keys, refs []string
	keys = storagetest.ObjectKeys(t, cfg)
	for _, f := range live {
		versions, err := srv.Store.Versions(context.Background(), "soak", f.ID, agentfs.VersionFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range versions {
			refs = append(refs, v.BlobKey)
		}
	}
	sort.Strings(keys)
	refs = slices.Compact(slices.Sorted(slices.Values(refs)))
	if fmt.Sprint(keys) != fmt.Sprint(refs) {
		t.Errorf("after a sweep the bucket holds %d objects for the %d blobs of %d live files' versions", len(keys), len(refs), len(live))
	}
}
