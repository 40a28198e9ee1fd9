package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// cacheServer is a server whose blob cache holds max bytes, in blobs of
// at most maxObject.
func cacheServer(t *testing.T, max, maxObject int64) *apitest.Server {
	t.Helper()
	cfg := storagetest.Config(t)
	cfg.BlobCacheBytes, cfg.BlobCacheMaxObject = max, maxObject
	return apitest.NewServer(t, apitest.Options{Config: &cfg})
}

// removeBlob deletes a file's blob from S3 behind the server's back: a
// read that still answers with the bytes was served from the cache.
func removeBlob(t *testing.T, srv *apitest.Server, subject, id string) {
	t.Helper()
	f, err := srv.Store.File(context.Background(), subject, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := storagetest.S3(t, srv.Config).RemoveObject(context.Background(), srv.Config.S3Bucket, f.BlobKey, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cacheSeries is what /metrics says of the blob cache.
func cacheSeries(t *testing.T, url string) map[string]float64 {
	t.Helper()
	m := scrape(t, url)
	out := map[string]float64{}
	for k, v := range m {
		if name, ok := strings.CutPrefix(k, "agentfs_blob_cache_"); ok {
			out[name] = v
		}
	}
	for _, name := range []string{"hits_total", "misses_total", "fills_total", "evictions_total", "bytes", "entries", "max_bytes"} {
		if _, ok := out[name]; !ok {
			t.Fatalf("/metrics has no agentfs_blob_cache_%s: %v", name, out)
		}
	}
	return out
}

// expectContent checks a 200 of the whole content: exact bytes and the
// headers the file's metadata says.
func expectContent(t *testing.T, res *apitest.Response, f api.File, want []byte) {
	t.Helper()
	res.Expect(t, http.StatusOK)
	if !bytes.Equal(res.Body, want) {
		t.Fatalf("content differs: got %d bytes, want %d", len(res.Body), len(want))
	}
	sum := sha256.Sum256(want)
	for name, v := range map[string]string{
		"ETag":           f.ETag,
		"Content-Length": strconv.Itoa(len(want)),
		"Content-Type":   "application/octet-stream",
		"Accept-Ranges":  "bytes",
		"Repr-Digest":    "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
	} {
		if got := res.Header.Get(name); got != v {
			t.Fatalf("%s: %q, want %q", name, got, v)
		}
	}
	if res.Header.Get("Last-Modified") == "" || !strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("headers: %v", res.Header)
	}
}

// TestBlobCacheServesSmallFiles: a small file uploaded is read back from
// the instance's cache, without S3 (its blob removed from S3 behind the
// server's back still reads), whole and in ranges, with the headers of
// its metadata; another instance, whose cache is empty, fills it on its
// first read; the metrics count it.
func TestBlobCacheServesSmallFiles(t *testing.T) {
	t.Parallel()
	srv := cacheServer(t, 1<<20, 64<<10)
	tok := srv.Token(t, "alice")
	c := apitest.NewClient(t, srv.URL, tok)
	body := randomBytes(5000, 1)
	before := cacheSeries(t, srv.URL)
	f := c.Do("POST", "/v1/files?path=small.bin", body, "Content-Type", "application/octet-stream").Expect(t, http.StatusCreated).File(t)
	after := cacheSeries(t, srv.URL)
	if after["fills_total"] != before["fills_total"]+1 || after["bytes"] != before["bytes"]+5000 || after["entries"] != before["entries"]+1 {
		t.Fatalf("an upload did not fill the cache: %v → %v", before, after)
	}
	if after["max_bytes"] != 1<<20 {
		t.Fatalf("max_bytes %v", after["max_bytes"])
	}

	// A second instance on the same storage, cache empty: a miss, then
	// filled from S3, then a hit.
	srv2 := apitest.NewServer(t, apitest.Options{Config: &srv.Config})
	c2 := apitest.NewClient(t, srv2.URL, tok)
	expectContent(t, c2.Do("GET", "/v1/files/"+f.ID+"/content", nil), f, body)
	s2 := cacheSeries(t, srv2.URL)
	if s2["misses_total"] != 1 || s2["fills_total"] != 1 || s2["hits_total"] != 0 || s2["bytes"] != 5000 {
		t.Fatalf("the second instance's first read: %v", s2)
	}

	removeBlob(t, srv, "alice", f.ID)
	for _, cl := range []*apitest.Client{c, c2} {
		expectContent(t, cl.Do("GET", "/v1/files/"+f.ID+"/content", nil), f, body)
		res := cl.Do("GET", "/v1/files/"+f.ID+"/content", nil, "Range", "bytes=100-199").Expect(t, http.StatusPartialContent)
		if !bytes.Equal(res.Body, body[100:200]) || res.Header.Get("Content-Range") != "bytes 100-199/5000" || res.Header.Get("Content-Length") != "100" {
			t.Fatalf("range from the cache: %q %v", res.Header.Get("Content-Range"), len(res.Body))
		}
		res = cl.Do("GET", "/v1/files/"+f.ID+"/content", nil, "Range", "bytes=-10").Expect(t, http.StatusPartialContent)
		if !bytes.Equal(res.Body, body[4990:]) {
			t.Fatal("suffix range from the cache differs")
		}
		cl.Do("GET", "/v1/files/"+f.ID+"/content", nil, "If-None-Match", f.ETag).Expect(t, http.StatusNotModified)
		cl.Do("HEAD", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
	}
	end := cacheSeries(t, srv.URL)
	if end["hits_total"] != after["hits_total"]+3 {
		t.Fatalf("three reads of bytes, hits %v → %v", after["hits_total"], end["hits_total"])
	}
	if s := cacheSeries(t, srv2.URL); s["hits_total"] != 3 || s["misses_total"] != 1 {
		t.Fatalf("the second instance: %v", s)
	}

	// A blob over the object bound is never kept: with its blob gone
	// from S3, its read fails as storage failing.
	big := randomBytes(70<<10, 2)
	g := c.Do("POST", "/v1/files?path=big.bin", big).Expect(t, http.StatusCreated).File(t)
	expectContent(t, c.Do("GET", "/v1/files/"+g.ID+"/content", nil), g, big)
	removeBlob(t, srv, "alice", g.ID)
	if res := c.Do("GET", "/v1/files/"+g.ID+"/content", nil); res.Status < 500 {
		t.Fatalf("a large file whose blob is gone answered %d: it was cached", res.Status)
	}
}

// TestBlobCacheKeepsGrants: a token scoped to P/ gets the same 404 for a
// file outside P/ whose bytes the cache holds as for any other file it
// cannot see, on every content route; inside P/, it reads from the cache.
// TestBlobCacheSkipsBatchItems: the items of a batch (a bulk load) do not
// fill the cache, so a batch's memory stays bounded by its body and what
// reads use is not pushed out; a read of an item's file fills it as any
// read from S3 does.
func TestBlobCacheSkipsBatchItems(t *testing.T) {
	t.Parallel()
	srv := cacheServer(t, 1<<20, 64<<10)
	c := apitest.NewClient(t, srv.URL, srv.Token(t, "alice"))
	before := cacheSeries(t, srv.URL)
	b, _ := runBatch(t, c, "bulk", []map[string]any{
		{"op": "put", "path": "bulk/a.txt", "content": "alpha"},
		{"op": "put", "path": "bulk/b.txt", "content": "bravo"},
	}, http.StatusAccepted)
	if b.Status != "succeeded" || len(b.Items) != 2 || b.Items[0].File == nil {
		t.Fatalf("batch: %+v", b)
	}
	if after := cacheSeries(t, srv.URL); after["fills_total"] != before["fills_total"] || after["entries"] != before["entries"] {
		t.Fatalf("a batch filled the cache: %v → %v", before, after)
	}
	res := c.Do("GET", "/v1/files/"+b.Items[0].File.ID+"/content", nil).Expect(t, http.StatusOK)
	if string(res.Body) != "alpha" {
		t.Fatalf("content %q", res.Body)
	}
	if after := cacheSeries(t, srv.URL); after["misses_total"] != before["misses_total"]+1 || after["fills_total"] != before["fills_total"]+1 {
		t.Fatalf("the first read of a batch item's file: %v → %v, want a miss and a fill", before, after)
	}
}

func TestBlobCacheKeepsGrants(t *testing.T) {
	t.Parallel()
	srv := cacheServer(t, 1<<20, 64<<10)
	root := srv.Client(t, "alice", "read", "write", "share", "delegate")
	in := upload(t, root, "P/a.txt", "inside").Expect(t, http.StatusCreated).File(t)
	out := upload(t, root, "Q/b.txt", "outside").Expect(t, http.StatusCreated).File(t)
	// The root token reads both, so both are in the cache for sure.
	root.Do("GET", "/v1/files/"+out.ID+"/content", nil).Expect(t, http.StatusOK)
	root.Do("GET", "/v1/files/"+in.ID+"/content", nil).Expect(t, http.StatusOK)
	before := cacheSeries(t, srv.URL)
	if before["entries"] != 2 {
		t.Fatalf("cache entries %v, want the 2 files", before["entries"])
	}
	tok := mint(t, root, map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P"}, "expires_in": 3600})
	child := apitest.NewClient(t, srv.URL, *tok.Token)
	other := srv.Client(t, "bob")
	for _, cl := range []*apitest.Client{child, other} {
		for _, p := range []string{"/content", "/versions/1/content"} {
			cl.Do("GET", "/v1/files/"+out.ID+p, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
			cl.Do("GET", "/v1/files/"+out.ID+p, nil, "Range", "bytes=0-1").ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		}
	}
	if after := cacheSeries(t, srv.URL); after["hits_total"] != before["hits_total"] || after["misses_total"] != before["misses_total"] {
		t.Fatalf("a refused read reached the cache: %v → %v", before, after)
	}
	if got := child.Do("GET", "/v1/files/"+in.ID+"/content", nil).Expect(t, http.StatusOK).Body; string(got) != "inside" {
		t.Fatalf("inside its folder the token reads %q", got)
	}
	if after := cacheSeries(t, srv.URL); after["hits_total"] != before["hits_total"]+1 {
		t.Fatalf("the token's read inside its folder was not a hit: %v → %v", before, after)
	}
}

// TestBlobCacheEvicts: the cache never holds more than its bound, evicts
// the least recently used, and what it evicted reads from S3 again.
func TestBlobCacheEvicts(t *testing.T) {
	t.Parallel()
	const max, size = 3000, 1000
	srv := cacheServer(t, max, size)
	c := srv.Client(t, "alice")
	var files []api.File
	var bodies [][]byte
	for i := range 6 {
		b := randomBytes(size, int64(10+i))
		files = append(files, c.Do("POST", fmt.Sprintf("/v1/files?path=f%d.bin", i), b).Expect(t, http.StatusCreated).File(t))
		bodies = append(bodies, b)
		if s := cacheSeries(t, srv.URL); s["bytes"] > max || s["entries"] > 3 {
			t.Fatalf("after %d uploads the cache holds %v bytes in %v entries, bound %d", i+1, s["bytes"], s["entries"], max)
		}
	}
	s := cacheSeries(t, srv.URL)
	if s["evictions_total"] != 3 || s["bytes"] != max {
		t.Fatalf("six uploads into room for three: %v", s)
	}
	// The oldest three were evicted: each read is a miss that fills again
	// (and evicts), and every read has the right bytes, concurrently too.
	var wg sync.WaitGroup
	for i := range files {
		wg.Go(func() {
			res := c.Do("GET", "/v1/files/"+files[i].ID+"/content", nil)
			if res.Status != http.StatusOK || !bytes.Equal(res.Body, bodies[i]) {
				t.Errorf("file %d read %d with other bytes", i, res.Status)
			}
		})
	}
	wg.Wait()
	e := cacheSeries(t, srv.URL)
	if e["misses_total"] < 3 || e["bytes"] > max || e["evictions_total"] <= s["evictions_total"] {
		t.Fatalf("after reading all six: %v", e)
	}
}

// countingTracer counts the statements sent on a pool while serving a
// request, with their SQL: a statement's context carries the HTTP
// server's (http.ServerContextKey) when a request made it, and not when
// a background task did (the search index's mover, the listeners).
type countingTracer struct {
	mu  sync.Mutex
	sql []string
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(http.ServerContextKey) == nil {
		return ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sql = append(c.sql, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.sql
	c.sql = nil
	return out
}

// TestContentReadIsOneQuery: a read of a file's content, current or of a
// version, asks Postgres one statement (its token is in the token cache,
// its bytes in the blob cache or S3), counted on the pool.
func TestContentReadIsOneQuery(t *testing.T) {
	t.Parallel()
	tracer := &countingTracer{}
	cfg := storagetest.Config(t)
	cfg.BlobCacheBytes = 1 << 20
	cfg.Tracers = []pgx.QueryTracer{tracer}
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	c := srv.Client(t, "alice")
	f := upload(t, c, "one.txt", "first").Expect(t, http.StatusCreated).File(t)
	c.Do("POST", "/v1/files?path=one.txt&if_exists=replace", "second").Expect(t, http.StatusOK)
	// The token cache trusts nothing until its listener listens: wait
	// until a request's token is answered from it.
	storagetest.Eventually(t, 30*time.Second, "the token cache to answer", func() bool {
		before := srv.Store.Counters().TokenCacheHits
		c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK)
		return srv.Store.Counters().TokenCacheHits > before
	})
	lookups := srv.Store.Counters().TokenLookups
	for _, r := range []struct{ path, want string }{
		{"/content", "second"},
		{"/versions/1/content", "first"},
		{"/versions/2/content", "second"},
	} {
		tracer.take()
		const n = 5
		for range n {
			if got := string(c.Do("GET", "/v1/files/"+f.ID+r.path, nil).Expect(t, http.StatusOK).Body); got != r.want {
				t.Fatalf("%s: %q, want %q", r.path, got, r.want)
			}
		}
		if sql := tracer.take(); len(sql) != n {
			t.Fatalf("%d reads of %s sent %d statements, want one each:\n%s", n, r.path, len(sql), strings.Join(sql, "\n"))
		}
	}
	if got := srv.Store.Counters().TokenLookups; got != lookups {
		t.Fatalf("the reads looked their token up in Postgres %d times; the token cache answers them", got-lookups)
	}
}

// listKeys decodes a listing's data as objects and returns each one's
// member names, in order of the page.
func listKeys(t *testing.T, body []byte) []map[string]json.RawMessage {
	t.Helper()
	var page struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Data
}

// TestListFieldsAnswersOnlyThem: fields= answers each file with id and
// the members named, on the plain listing, by folder and as of now; the
// listing's statement reads only their columns; a token scoped to P/ sees
// nothing outside P/ with it; bad names are 422.
func TestListFieldsAnswersOnlyThem(t *testing.T) {
	t.Parallel()
	tracer := &countingTracer{}
	cfg := storagetest.Config(t)
	cfg.Tracers = []pgx.QueryTracer{tracer}
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	root := srv.Client(t, "alice", "read", "write", "delegate")
	in := upload(t, root, "P/a.txt", "inside").Expect(t, http.StatusCreated).File(t)
	upload(t, root, "Q/b.txt", "outside").Expect(t, http.StatusCreated)

	for _, q := range []string{"fields=size_bytes,path", "fields=path,size_bytes&delimiter=/&prefix=P/", "fields=path,size_bytes&as_of=now"} {
		tracer.take()
		res := root.Do("GET", "/v1/files?"+q, nil).Expect(t, http.StatusOK)
		data := listKeys(t, res.Body)
		if len(data) == 0 {
			t.Fatalf("%s: no files", q)
		}
		for _, f := range data {
			if len(f) != 3 || f["id"] == nil || f["path"] == nil || f["size_bytes"] == nil {
				t.Fatalf("%s: a file with members %v", q, f)
			}
		}
		if !strings.Contains(string(res.Body), `"has_more":false`) || !strings.Contains(string(res.Body), `"next_cursor":null`) {
			t.Fatalf("%s: page members: %s", q, res.Body)
		}
		if q == "fields=size_bytes,path" {
			sql := strings.Join(tracer.take(), "\n")
			if !strings.Contains(sql, "NULL::timestamptz") || strings.Contains(sql, "SELECT id, subject, path") {
				t.Fatalf("the listing read every column:\n%s", sql)
			}
		}
	}
	// Paging with fields: the cursor still works.
	var page struct {
		NextCursor *string `json:"next_cursor"`
	}
	res := root.Do("GET", "/v1/files?fields=path&limit=1", nil).Expect(t, http.StatusOK)
	res.JSON(t, &page)
	if page.NextCursor == nil {
		t.Fatal("a page of 1 of 2 files has no next cursor")
	}
	next := listKeys(t, root.Do("GET", "/v1/files?fields=path&limit=1&cursor="+*page.NextCursor, nil).Expect(t, http.StatusOK).Body)
	if first := listKeys(t, res.Body); len(next) != 1 || string(next[0]["id"]) == string(first[0]["id"]) {
		t.Fatalf("paging with fields: %v then %v", first, next)
	}

	tok := mint(t, root, map[string]any{"scopes": []string{"read"}, "prefixes": []string{"P"}, "expires_in": 3600})
	child := apitest.NewClient(t, srv.URL, *tok.Token)
	for _, q := range []string{"fields=path", "fields=path&delimiter=/", "fields=path&as_of=now", "fields=path&prefix=Q/"} {
		data := listKeys(t, child.Do("GET", "/v1/files?"+q, nil).Expect(t, http.StatusOK).Body)
		for _, f := range data {
			if string(f["id"]) != `"`+in.ID+`"` {
				t.Fatalf("%s: the token scoped to P/ sees %v", q, f)
			}
		}
	}

	for _, q := range []string{"fields=nope", "fields=", "fields=path,,kind", "fields=path&fields=kind", "fields=blob_key&delimiter=/"} {
		p := root.Do("GET", "/v1/files?"+q, nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != "fields" {
			t.Fatalf("%s: %+v", q, p)
		}
	}
}
