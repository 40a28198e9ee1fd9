package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
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

// quotaServer is an API with a byte quota of quota bytes per hour, and a
// client of subject alice.
func quotaServer(t *testing.T, quota int64) (*apitest.Server, *apitest.Client) {
	t.Helper()
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{QuotaBytes: quota, QuotaWindow: time.Hour}})
	return srv, srv.Client(t, "alice")
}

// quotaHeld is what the subject's quota holds, reserved or used, in all
// windows.
func quotaHeld(t *testing.T, srv *apitest.Server, subject string) int64 {
	t.Helper()
	var n int64
	if err := srv.Store.Pool().QueryRow(context.Background(),
		`SELECT coalesce(sum(bytes), 0) FROM quota_usage WHERE subject = $1`, subject).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// chunked is a body of unknown length: the client sends it without
// Content-Length.
func chunked(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }

func expectQuotaExceeded(t *testing.T, res *apitest.Response) {
	t.Helper()
	res.ExpectProblem(t, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	if s, _ := strconv.Atoi(res.Header.Get("Retry-After")); s < 1 || s > 3600 {
		t.Fatalf("Retry-After %q, want the rest of the window", res.Header.Get("Retry-After"))
	}
}

// TestByteQuotaCutsOffABodyOfUnknownLength sends a chunked upload five
// times the quota: it is cut off once it outgrows the quota, answers 429
// QUOTA_EXCEEDED, stores nothing and releases its key; a body that ends
// exactly at the quota passes.
func TestByteQuotaCutsOffABodyOfUnknownLength(t *testing.T) {
	srv, c := quotaServer(t, 1<<20)
	big := bytes.Repeat([]byte("q"), 5<<20)
	expectQuotaExceeded(t, c.Do("POST", "/v1/files?path=big.bin", chunked(big), "Idempotency-Key", "big-1"))
	if n := fileCount(t, c); n != 0 {
		t.Fatalf("a cut-off upload stored %d files", n)
	}
	if keys := storagetest.ObjectKeys(t, srv.Config); len(keys) != 0 {
		t.Fatalf("a cut-off upload left objects: %v", keys)
	}
	c.Do("GET", "/v1/operations/big-1", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND") // released
	if n := quotaHeld(t, srv, "alice"); n != 0 {
		t.Fatalf("a cut-off upload still holds %d bytes of the quota", n)
	}
	c.Do("POST", "/v1/files?path=exact.bin", chunked(big[:1<<20])).Expect(t, http.StatusCreated)
	expectQuotaExceeded(t, c.Do("POST", "/v1/files?path=one.bin", chunked([]byte("1"))))
	expectQuotaExceeded(t, c.Do("POST", "/v1/files?path=one.bin", "1"))
	if n := quotaHeld(t, srv, "alice"); n != 1<<20 {
		t.Fatalf("the quota holds %d bytes, want the 1 MiB stored", n)
	}
}

// TestByteQuotaHoldsUnderConcurrency races 16 uploads of 900 KiB each
// against a quota of 1 MiB, with and without Content-Length: what is
// stored never exceeds the quota, and the rest are refused.
func TestByteQuotaHoldsUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func([]byte) any
	}{
		{"DeclaredLength", func(b []byte) any { return b }},
		{"Chunked", func(b []byte) any { return chunked(b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const quota = 1 << 20
			srv, c := quotaServer(t, quota)
			statuses := concurrently(16, func(i int) int {
				body := bytes.Repeat([]byte{byte('a' + i)}, 900<<10)
				return c.Do("POST", fmt.Sprintf("/v1/files?path=c%d.bin", i), tc.body(body)).Status
			})
			var stored int64
			for _, f := range list(t, c, "limit=100").Data {
				stored += f.SizeBytes
			}
			created := countCreated(t, statuses, http.StatusTooManyRequests)
			if stored > quota || int64(created)*(900<<10) != stored {
				t.Fatalf("%d uploads of 900 KiB stored %d bytes against a quota of %d: %v", created, stored, quota, statuses)
			}
			if created != 1 {
				t.Fatalf("%d uploads passed, want the one that fits: %v", created, statuses)
			}
			if n := quotaHeld(t, srv, "alice"); n != stored {
				t.Fatalf("the quota holds %d bytes, %d are stored", n, stored)
			}
		})
	}
}

// TestByteQuotaFailedWritesGiveTheirReservationBack fails writes after
// their bytes were reserved (a checksum mismatch after the whole body, a
// path taken before any of it): the next write that fits only with their
// bytes given back passes.
func TestByteQuotaFailedWritesGiveTheirReservationBack(t *testing.T) {
	srv, c := quotaServer(t, 10)
	upload(t, c, "a.txt", "12345678", "Content-Digest", digestHeader("other")).
		ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
	c.Do("POST", "/v1/files?path=b.txt", chunked([]byte("12345678")), "Content-Digest", digestHeader("other")).
		ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
	upload(t, c, "a.txt", "12345678").Expect(t, http.StatusCreated)
	upload(t, c, "a.txt", "12").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
	upload(t, c, "../bad", "12").ExpectProblem(t, http.StatusUnprocessableEntity, "INVALID_PATH")
	upload(t, c, "b.txt", "12").Expect(t, http.StatusCreated)
	expectQuotaExceeded(t, upload(t, c, "c.txt", "1"))
	if n := quotaHeld(t, srv, "alice"); n != 10 {
		t.Fatalf("the quota holds %d bytes, want the 10 stored", n)
	}
}

// TestByteQuotaNeverRefusesAReplay fills the quota with a keyed upload,
// then repeats it with and without Content-Length: a replay writes nothing,
// so it is answered, and costs nothing.
func TestByteQuotaNeverRefusesAReplay(t *testing.T) {
	srv, c := quotaServer(t, 10)
	keyed(t, c, "full", "a.txt", "0123456789").Expect(t, http.StatusCreated)
	for _, body := range []any{"0123456789", chunked([]byte("0123456789"))} {
		res := c.Do("POST", "/v1/files?path=a.txt", body, "Idempotency-Key", "full").Expect(t, http.StatusCreated)
		if res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("not a replay")
		}
	}
	expectQuotaExceeded(t, keyed(t, c, "other", "b.txt", "x"))
	if n := quotaHeld(t, srv, "alice"); n != 10 {
		t.Fatalf("the quota holds %d bytes, want the 10 stored once", n)
	}
}

// TestByteQuotaCountsParts sends the parts of an upload session: they
// count against the quota like any upload.
func TestByteQuotaCountsParts(t *testing.T) {
	srv, c := quotaServer(t, 5<<20+1<<19)
	data := bytes.Repeat([]byte("p"), 6<<20)
	u := createUpload(t, c, map[string]any{"path": "s.bin", "size_bytes": len(data)}, http.StatusCreated)
	putPart(t, c, u.ID, 1, data[:5<<20]).Expect(t, http.StatusOK)
	expectQuotaExceeded(t, putPart(t, c, u.ID, 2, data[5<<20:]))
	expectQuotaExceeded(t, putPart(t, c, u.ID, 1, data[:5<<20])) // sending a part again is a new write
	if n := quotaHeld(t, srv, "alice"); n <= 5<<20 || n > 5<<20+1<<19 {
		t.Fatalf("the quota holds %d bytes, want the part and the session's JSON", n)
	}
}

// TestByteQuotaHoldsForBatchCopies copies a file ten times in one batch:
// a copy shares its source's blob, so the bytes stored in S3 never exceed
// what the quota counted (the file, and the batch's JSON), and purging the
// source keeps every copy readable.
func TestByteQuotaHoldsForBatchCopies(t *testing.T) {
	const size = 300 << 10
	srv, c := quotaServer(t, size+64<<10)
	data := bytes.Repeat([]byte("c"), size)
	src := upload(t, c, "src.bin", string(data)).Expect(t, http.StatusCreated).File(t)
	ops := make([]map[string]any, 10)
	for i := range ops {
		ops[i] = map[string]any{"op": "copy", "file_id": src.ID, "path": fmt.Sprintf("copy-%d.bin", i)}
	}
	b, _ := runBatch(t, c, "copies", ops, http.StatusAccepted)
	if b.Status != "succeeded" {
		t.Fatalf("batch of copies: %+v", b)
	}
	if stored, held := bucketBytes(t, srv), quotaHeld(t, srv, "alice"); stored > held || stored != size {
		t.Fatalf("the bucket holds %d bytes, the quota counted %d: ten copies of %d bytes must store nothing more", stored, held, size)
	}
	for _, it := range b.Items {
		f := it.File
		if f.SHA256 != src.SHA256 || f.SizeBytes != size || f.ID == src.ID {
			t.Fatalf("copy %+v of %+v", f, src)
		}
		res := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		if !bytes.Equal(res.Body, data) || f.ETag != `"`+src.SHA256+`"` || res.Header.Get("ETag") != f.ETag {
			t.Fatalf("copy %s: %d bytes, ETag %q", f.Path, len(res.Body), res.Header.Get("ETag"))
		}
	}
	c.Do("DELETE", "/v1/files/"+src.ID, nil).Expect(t, http.StatusOK)
	storagetest.Exec(t, srv.Config, `UPDATE files SET purge_after = now() - interval '1 second' WHERE id = $1`, src.ID)
	srv.Sweep()
	c.Do("GET", "/v1/files/"+src.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	for _, it := range b.Items {
		if res := c.Do("GET", "/v1/files/"+it.File.ID+"/content", nil).Expect(t, http.StatusOK); !bytes.Equal(res.Body, data) {
			t.Fatalf("copy %s lost its bytes with its source's purge", it.File.Path)
		}
	}
}

// bucketBytes is the size of every object in the server's bucket.
func bucketBytes(t *testing.T, srv *apitest.Server) int64 {
	t.Helper()
	var n int64
	for obj := range storagetest.S3(t, srv.Config).ListObjects(context.Background(), srv.Config.S3Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list objects: %v", obj.Err)
		}
		n += obj.Size
	}
	return n
}
