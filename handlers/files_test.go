package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

type testBundle struct {
	srv *apitest.Server
	api *apitest.Client
}

func setup(t *testing.T) (*apitest.Client, *testBundle) {
	t.Helper()
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	return c, &testBundle{srv: srv, api: c}
}

func upload(t *testing.T, c *apitest.Client, path, body string, headers ...string) *apitest.Response {
	t.Helper()
	return c.Do("POST", "/v1/files?path="+url.QueryEscape(path), body, headers...)
}

// concurrently calls do(0) to do(n-1) all at once and returns what each
// returned, in order: the racing requests of a race test.
func concurrently[T any](n int, do func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = do(i) })
	}
	wg.Wait()
	return out
}

// readUntilStopped starts n readers that each call read(0), read(1), and
// so on while a test writes, until read returns false or the test calls
// stop, which waits for them.
func readUntilStopped(n int, read func(i int) bool) (stop func()) {
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range n {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if !read(i) {
					return
				}
			}
		})
	}
	return func() {
		close(done)
		readers.Wait()
	}
}

// countCreated counts the 201s among the statuses of racing requests and
// fails the test on any status other than 201 and refused, the one a
// request that lost the race answers.
func countCreated(t *testing.T, statuses []int, refused int) int {
	t.Helper()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case refused:
		default:
			t.Fatalf("status %d among %v", s, statuses)
		}
	}
	return created
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func digestHeader(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
}

func objectCount(t *testing.T, b *testBundle) int {
	t.Helper()
	return len(storagetest.ObjectKeys(t, b.srv.Config))
}

func TestUpload(t *testing.T) {
	t.Run("CreatesFileWithAttribution", func(t *testing.T) {
		c, b := setup(t)
		res := upload(t, c, "reports/q1.txt", "hello world",
			"Content-Type", "text/plain", "X-Agent-ID", "agent-7", "X-Run-ID", "run:2026/11@a")
		res.Expect(t, http.StatusCreated)
		f := res.File(t)
		if f.Object != "file" || f.Path != "reports/q1.txt" || f.SizeBytes != 11 || f.Version != 1 {
			t.Fatalf("unexpected file: %+v", f)
		}
		if f.SHA256 != sha("hello world") || f.ETag != `"`+f.SHA256+`"` || res.Header.Get("ETag") != f.ETag {
			t.Fatalf("sha256/etag wrong: %+v, ETag header %q", f, res.Header.Get("ETag"))
		}
		if f.ContentType != "text/plain" || *f.AgentID != "agent-7" || *f.RunID != "run:2026/11@a" || *f.LastRunID != "run:2026/11@a" {
			t.Fatalf("content type or attribution wrong: %+v", f)
		}
		if f.URL != b.srv.URL+"/v1/files/"+f.ID+"/content" || res.Header.Get("Location") != "/v1/files/"+f.ID {
			t.Fatalf("url %q, Location %q", f.URL, res.Header.Get("Location"))
		}
		stored, err := b.srv.Store.File(context.Background(), "alice", f.ID)
		if err != nil {
			t.Fatal(err)
		}
		tags, err := b.srv.Store.BlobTags(context.Background(), stored.BlobKey)
		if err != nil {
			t.Fatal(err)
		}
		if tags["agent-id"] != "agent-7" || tags["run-id"] != "run:2026/11@a" || tags["file-id"] != f.ID {
			t.Fatalf("blob tags %v", tags)
		}
		if strings.Contains(stored.BlobKey, "reports") {
			t.Fatalf("blob key %q is derived from the path", stored.BlobKey)
		}
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		if string(got.Body) != "hello world" {
			t.Fatalf("content %q", got.Body)
		}
	})

	t.Run("StreamsChunkedBody", func(t *testing.T) {
		c, _ := setup(t)
		data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, size unknown to the server
		res := c.Do("POST", "/v1/files?path=big.bin", io.MultiReader(bytes.NewReader(data)))
		res.Expect(t, http.StatusCreated)
		f := res.File(t)
		if f.SizeBytes != int64(len(data)) || f.SHA256 != sha(string(data)) || f.ContentType != "application/octet-stream" {
			t.Fatalf("unexpected file: %+v", f)
		}
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		if !bytes.Equal(got.Body, data) {
			t.Fatal("content differs")
		}
	})

	t.Run("StoresEmptyFile", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "empty", "").Expect(t, http.StatusCreated).File(t)
		if f.SizeBytes != 0 || f.SHA256 != sha("") {
			t.Fatalf("unexpected file: %+v", f)
		}
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		if len(got.Body) != 0 || got.Header.Get("Content-Length") != "0" {
			t.Fatalf("body %q, Content-Length %q", got.Body, got.Header.Get("Content-Length"))
		}
	})

	t.Run("RejectsTakenPathWithoutStoring", func(t *testing.T) {
		c, b := setup(t)
		first := upload(t, c, "a.txt", "one").Expect(t, http.StatusCreated).File(t)
		p := upload(t, c, "a.txt", "two").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if p.ExistingFileID != first.ID {
			t.Fatalf("existing_file_id %q, want %q", p.ExistingFileID, first.ID)
		}
		if n := objectCount(t, b); n != 1 {
			t.Fatalf("%d objects in the bucket, want 1", n)
		}
	})

	t.Run("VerifiesContentDigest", func(t *testing.T) {
		c, b := setup(t)
		upload(t, c, "ok.txt", "payload", "Content-Digest", digestHeader("payload")).Expect(t, http.StatusCreated)
		upload(t, c, "bad.txt", "payload", "Content-Digest", digestHeader("other")).
			ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
		upload(t, c, "bad.txt", "payload", "Content-Digest", "sha-256=:nope:").
			ExpectProblem(t, http.StatusBadRequest, "INVALID_HEADER")
		c.Do("GET", "/v1/files?path=bad.txt&include_deleted=true", nil).Expect(t, http.StatusOK)
		var list apitest.FileList
		c.Do("GET", "/v1/files?path=bad.txt&include_deleted=true", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("a mismatched upload left a file: %+v", list.Data)
		}
		if n := objectCount(t, b); n != 1 {
			t.Fatalf("%d objects in the bucket, want 1", n)
		}
	})

	t.Run("RejectsOversizedBodies", func(t *testing.T) {
		t.Parallel()
		srv := apitest.NewServer(t, apitest.Options{Limits: limits(1024)})
		c := srv.Client(t, "alice")
		upload(t, c, "big", strings.Repeat("x", 1025)).ExpectProblem(t, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
		chunked := io.MultiReader(strings.NewReader(strings.Repeat("x", 4096)))
		c.Do("POST", "/v1/files?path=big", chunked).ExpectProblem(t, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
		upload(t, c, "fits", strings.Repeat("x", 1024)).Expect(t, http.StatusCreated)
		if n := len(storagetest.ObjectKeys(t, srv.Config)); n != 1 {
			t.Fatalf("%d objects in the bucket, want 1", n)
		}
	})
}

func TestUploadValidation(t *testing.T) {
	c, b := setup(t)
	long := strings.Repeat("a", 1025)
	for _, tc := range []struct {
		name, query string
		headers     []string
		status      int
		code        string
	}{
		{"MissingPath", "", nil, 422, "VALIDATION_FAILED"},
		{"DotDot", "path=a/../b", nil, 422, "INVALID_PATH"},
		{"Absolute", "path=/abs", nil, 422, "INVALID_PATH"},
		{"EmptySegment", "path=a//b", nil, 422, "INVALID_PATH"},
		{"ControlChar", "path=a%01b", nil, 422, "INVALID_PATH"},
		{"Backslash", "path=a%5Cb", nil, 422, "INVALID_PATH"},
		{"TooLong", "path=" + long, nil, 422, "INVALID_PATH"},
		{"BadIfExists", "path=x&if_exists=sometimes", nil, 422, "VALIDATION_FAILED"},
		{"IfMatchWithoutReplace", "path=x", []string{"If-Match", `"abc"`}, 422, "VALIDATION_FAILED"},
		{"IfNoneMatchEtag", "path=x", []string{"If-None-Match", `"abc"`}, 422, "VALIDATION_FAILED"},
		{"AgentIDWithSpace", "path=x", []string{"X-Agent-ID", "agent 1"}, 400, "INVALID_HEADER"},
		{"RunIDBadStart", "path=x", []string{"X-Run-ID", "-run"}, 400, "INVALID_HEADER"},
		{"RunIDTooLong", "path=x", []string{"X-Run-ID", strings.Repeat("r", 129)}, 400, "INVALID_HEADER"},
		{"BadContentType", "path=x", []string{"Content-Type", "text/"}, 400, "INVALID_HEADER"},
		{"BadIdempotencyKey", "path=x", []string{"Idempotency-Key", "has space"}, 400, "INVALID_IDEMPOTENCY_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Do("POST", "/v1/files?"+tc.query, "data", tc.headers...).ExpectProblem(t, tc.status, tc.code)
		})
	}
	var list apitest.FileList
	c.Do("GET", "/v1/files?include_deleted=true", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || objectCount(t, b) != 0 {
		t.Fatalf("rejected uploads changed state: %d files, %d objects", len(list.Data), objectCount(t, b))
	}
}

func TestReplace(t *testing.T) {
	t.Run("KeepsIDAndURL", func(t *testing.T) {
		c, _ := setup(t)
		v1 := upload(t, c, "r.txt", "one", "X-Run-ID", "run-1").Expect(t, http.StatusCreated).File(t)
		res := c.Do("POST", "/v1/files?path=r.txt&if_exists=replace", "two", "X-Run-ID", "run-2").Expect(t, http.StatusOK)
		v2 := res.File(t)
		if v2.ID != v1.ID || v2.URL != v1.URL || v2.Version != 2 || v2.ETag == v1.ETag || v2.SHA256 != sha("two") {
			t.Fatalf("replace: %+v after %+v", v2, v1)
		}
		if *v2.RunID != "run-1" || *v2.LastRunID != "run-2" {
			t.Fatalf("run ids: run_id %v last_run_id %v", *v2.RunID, *v2.LastRunID)
		}
		got := c.Do("GET", "/v1/files/"+v1.ID+"/content", nil).Expect(t, http.StatusOK)
		if string(got.Body) != "two" {
			t.Fatalf("content %q", got.Body)
		}
	})

	t.Run("IdenticalBytesChangeNothing", func(t *testing.T) {
		c, b := setup(t)
		v1 := upload(t, c, "same.txt", "same").Expect(t, http.StatusCreated).File(t)
		v2 := c.Do("POST", "/v1/files?path=same.txt&if_exists=replace", "same").Expect(t, http.StatusOK).File(t)
		if v2.Version != 1 || v2.ETag != v1.ETag || !v2.UpdatedAt.Equal(v1.UpdatedAt) {
			t.Fatalf("identical replace changed the file: %+v -> %+v", v1, v2)
		}
		if n := objectCount(t, b); n != 1 {
			t.Fatalf("%d objects, want 1: the identical upload's blob should be gone", n)
		}
		v3 := c.Do("POST", "/v1/files?path=same.txt&if_exists=replace", "same", "Content-Type", "text/plain").Expect(t, http.StatusOK).File(t)
		if v3.Version != 2 || v3.ContentType != "text/plain" {
			t.Fatalf("a new content type is a new version: %+v", v3)
		}
	})

	t.Run("CreatesWhenPathIsFree", func(t *testing.T) {
		c, _ := setup(t)
		c.Do("POST", "/v1/files?path=new.txt&if_exists=replace", "x").Expect(t, http.StatusCreated)
	})

	t.Run("ChecksPreconditionsFirst", func(t *testing.T) {
		c, _ := setup(t)
		v1 := upload(t, c, "p.txt", "one").Expect(t, http.StatusCreated).File(t)
		upload(t, c, "p.txt", "x", "If-None-Match", "*").ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		upload(t, c, "q.txt", "x", "If-None-Match", "*").Expect(t, http.StatusCreated)
		replace := "/v1/files?path=p.txt&if_exists=replace"
		c.Do("POST", replace, "two", "If-Match", `"`+sha("nope")+`"`).ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		// If-Match compares strongly (RFC 9110 §13.1.1): a weak etag never matches.
		c.Do("POST", replace, "two", "If-Match", "W/"+v1.ETag).ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		c.Do("POST", "/v1/files?path=none.txt&if_exists=replace", "two", "If-Match", v1.ETag).ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		v2 := c.Do("POST", replace, "two", "If-Match", v1.ETag).Expect(t, http.StatusOK).File(t)
		if v2.Version != 2 {
			t.Fatalf("conditional replace: %+v", v2)
		}
		c.Do("POST", replace, "three", "If-Match", v1.ETag).ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
	})

	t.Run("ConcurrentCreatesMakeOneFile", func(t *testing.T) {
		c, _ := setup(t)
		statuses := concurrently(12, func(i int) int {
			return upload(t, c, "race.txt", fmt.Sprintf("body %d", i)).Status
		})
		if created := countCreated(t, statuses, http.StatusConflict); created != 1 {
			t.Fatalf("%d creates succeeded, want 1: %v", created, statuses)
		}
	})
}

func TestMultipartUpload(t *testing.T) {
	c, _ := setup(t)
	form := func(fields [][2]string, withFile bool) (*bytes.Buffer, string) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, f := range fields {
			_ = w.WriteField(f[0], f[1])
		}
		if withFile {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="file"; filename="data.csv"`)
			h.Set("Content-Type", "text/csv")
			part, _ := w.CreatePart(h)
			_, _ = part.Write([]byte("a,b\n1,2\n"))
		}
		_ = w.Close()
		return &buf, w.FormDataContentType()
	}
	t.Run("FieldsBeforeFile", func(t *testing.T) {
		body, ct := form([][2]string{{"path", "tables/data.csv"}, {"if_exists", "error"}}, true)
		f := c.Do("POST", "/v1/files", body, "Content-Type", ct).Expect(t, http.StatusCreated).File(t)
		if f.Path != "tables/data.csv" || f.ContentType != "text/csv" || f.SHA256 != sha("a,b\n1,2\n") {
			t.Fatalf("unexpected file: %+v", f)
		}
		body, ct = form([][2]string{{"path", "tables/data.csv"}, {"if_exists", "replace"}}, true)
		c.Do("POST", "/v1/files", body, "Content-Type", ct).Expect(t, http.StatusOK)
	})
	t.Run("NoFilePart", func(t *testing.T) {
		body, ct := form([][2]string{{"path", "x.csv"}}, false)
		c.Do("POST", "/v1/files", body, "Content-Type", ct).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	})
	t.Run("PathAfterFile", func(t *testing.T) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		fw, _ := w.CreateFormFile("file", "x")
		_, _ = fw.Write([]byte("x"))
		_ = w.WriteField("path", "late.txt")
		_ = w.Close()
		p := c.Do("POST", "/v1/files", &buf, "Content-Type", w.FormDataContentType()).
			ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != "path" {
			t.Fatalf("errors %+v", p.Errors)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		c.Do("POST", "/v1/files", "--zzz\r\nContent-Disposition: form-data; name=\"path\"\r\n", "Content-Type", "multipart/form-data; boundary=zzz").
			ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
		c.Do("POST", "/v1/files", "x", "Content-Type", "multipart/form-data").
			ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	})
}

func limits(maxUpload int64) handlers.Limits {
	return handlers.Limits{MaxUploadBytes: maxUpload}
}
