package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

const partSize = 5 << 20 // the test servers' preferred part size

type session struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	PartSize  int64  `json:"part_size"`
	PartCount int    `json:"part_count"`
	Parts     []struct {
		PartNumber int    `json:"part_number"`
		SizeBytes  int64  `json:"size_bytes"`
		SHA256     string `json:"sha256"`
	} `json:"parts"`
	File  *apitest.File    `json:"file"`
	Error *apitest.Problem `json:"error"`
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func createUpload(t *testing.T, c *apitest.Client, body map[string]any, status int, headers ...string) session {
	t.Helper()
	raw, _ := json.Marshal(body)
	var u session
	c.Do("POST", "/v1/uploads", raw, append([]string{"Content-Type", "application/json"}, headers...)...).Expect(t, status).JSON(t, &u)
	return u
}

func putPart(t *testing.T, c *apitest.Client, id string, n int, data []byte, headers ...string) *apitest.Response {
	t.Helper()
	return c.Do("PUT", fmt.Sprintf("/v1/uploads/%s/parts/%d", id, n), data, headers...)
}

func partOf(data []byte, n int) []byte {
	end := min(n*partSize, len(data))
	return data[(n-1)*partSize : end]
}

func complete(t *testing.T, c *apitest.Client, id string, body string, headers ...string) *apitest.Response {
	t.Helper()
	var b any
	if body != "" {
		b = body
		headers = append(headers, "Content-Type", "application/json")
	}
	return c.Do("POST", "/v1/uploads/"+id+"/complete", b, headers...)
}

func TestUploadSessions(t *testing.T) {
	data := randomBytes(21<<20, 1) // 5 parts: four of 5 MiB and one of 1 MiB

	t.Run("PartsOutOfOrderWithARepeat", func(t *testing.T) {
		c, b := setup(t)
		u := createUpload(t, c, map[string]any{"path": "big/data.bin", "size_bytes": len(data),
			"content_type": "application/x-tar", "sha256": sha(string(data))}, http.StatusCreated, "X-Run-ID", "run-u")
		if u.PartSize != partSize || u.PartCount != 5 || u.Status != "pending" {
			t.Fatalf("session: %+v", u)
		}
		for _, n := range []int{3, 1, 5, 2, 3, 4} {
			putPart(t, c, u.ID, n, partOf(data, n)).Expect(t, http.StatusOK)
		}
		var got session
		c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, 200).JSON(t, &got)
		if len(got.Parts) != 5 || got.Parts[4].SizeBytes != 1<<20 || got.Parts[0].SHA256 != sha(string(partOf(data, 1))) {
			t.Fatalf("parts: %+v", got.Parts)
		}
		res := complete(t, c, u.ID, "").Expect(t, http.StatusCreated)
		f := res.File(t)
		if f.SHA256 != sha(string(data)) || f.SizeBytes != int64(len(data)) || f.ContentType != "application/x-tar" || *f.RunID != "run-u" {
			t.Fatalf("file: %+v", f)
		}
		content := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
		if !bytes.Equal(content.Body, data) {
			t.Fatal("assembled content differs")
		}
		stored, _ := b.srv.Store.File(context.Background(), "alice", f.ID)
		tags, err := b.srv.Store.BlobTags(context.Background(), stored.BlobKey)
		if err != nil || tags["file-id"] != f.ID || tags["run-id"] != "run-u" {
			t.Fatalf("tags %v %v", tags, err)
		}
		again := complete(t, c, u.ID, "").Expect(t, http.StatusOK).File(t)
		if again.ID != f.ID || again.Version != f.Version {
			t.Fatalf("repeated complete: %+v", again)
		}
		c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, 200).JSON(t, &got)
		if got.Status != "completed" || got.File == nil || got.File.ID != f.ID {
			t.Fatalf("completed session: %+v", got)
		}
		putPart(t, c, u.ID, 1, partOf(data, 1)).ExpectProblem(t, http.StatusConflict, "UPLOAD_COMPLETED")
	})

	t.Run("InOrderPartsKeepARunningHash", func(t *testing.T) {
		c, b := setup(t)
		u := createUpload(t, c, map[string]any{"path": "inorder.bin", "size_bytes": len(data)}, http.StatusCreated)
		for n := 1; n <= 5; n++ {
			putPart(t, c, u.ID, n, partOf(data, n)).Expect(t, http.StatusOK)
		}
		stored, err := b.srv.Store.Upload(context.Background(), "alice", u.ID)
		if err != nil || stored.HashedParts != 5 {
			t.Fatalf("running hash covers %d parts, want 5 (%v)", stored.HashedParts, err)
		}
		f := complete(t, c, u.ID, `{"sha256":"`+sha(string(data))+`"}`).Expect(t, http.StatusCreated).File(t)
		if f.SHA256 != sha(string(data)) {
			t.Fatalf("sha256 %s", f.SHA256)
		}
	})

	t.Run("ResumesALostSession", func(t *testing.T) {
		c, _ := setup(t)
		body := map[string]any{"path": "resume.bin", "size_bytes": len(data), "content_type": "application/octet-stream"}
		u := createUpload(t, c, body, http.StatusCreated)
		putPart(t, c, u.ID, 2, partOf(data, 2)).Expect(t, 200)
		again := createUpload(t, c, body, http.StatusOK)
		if again.ID != u.ID || len(again.Parts) != 1 || again.Parts[0].PartNumber != 2 {
			t.Fatalf("resume: %+v", again)
		}
		other := createUpload(t, c, map[string]any{"path": "resume.bin", "size_bytes": len(data) - 1}, http.StatusCreated)
		if other.ID == u.ID {
			t.Fatal("a different size resumed the same session")
		}
	})

	t.Run("EnforcesPartNumbersAndSizes", func(t *testing.T) {
		c, _ := setup(t)
		u := createUpload(t, c, map[string]any{"path": "sizes.bin", "size_bytes": len(data)}, http.StatusCreated)
		putPart(t, c, u.ID, 1, []byte("short")).ExpectProblem(t, http.StatusUnprocessableEntity, "SIZE_MISMATCH")
		putPart(t, c, u.ID, 5, partOf(data, 1)).ExpectProblem(t, http.StatusUnprocessableEntity, "SIZE_MISMATCH")
		putPart(t, c, u.ID, 0, []byte("x")).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		putPart(t, c, u.ID, 6, []byte("x")).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		c.Do("PUT", "/v1/uploads/"+u.ID+"/parts/one", "x").ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
		c.Do("PUT", "/v1/uploads/"+u.ID+"/parts/1", io.MultiReader(bytes.NewReader(partOf(data, 1)))).
			ExpectProblem(t, http.StatusLengthRequired, "LENGTH_REQUIRED")
		p := complete(t, c, u.ID, "").ExpectProblem(t, http.StatusUnprocessableEntity, "PARTS_MISSING")
		var missing struct {
			MissingParts []int `json:"missing_parts"`
		}
		complete(t, c, u.ID, "").JSON(t, &missing)
		if fmt.Sprint(missing.MissingParts) != "[1 2 3 4 5]" {
			t.Fatalf("missing_parts %v (%+v)", missing.MissingParts, p)
		}
	})

	t.Run("PartDigestIsCheckedBeforeTheStoredPartIsTouched", func(t *testing.T) {
		c, _ := setup(t)
		small := randomBytes(6<<20, 2) // parts of 5 MiB and 1 MiB
		u := createUpload(t, c, map[string]any{"path": "digest.bin", "size_bytes": len(small)}, http.StatusCreated)
		putPart(t, c, u.ID, 1, partOf(small, 1), "Content-Digest", digestHeader(string(partOf(small, 1)))).Expect(t, 200)
		bad := randomBytes(partSize, 3)
		putPart(t, c, u.ID, 1, bad, "Content-Digest", digestHeader(string(partOf(small, 1)))).
			ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
		putPart(t, c, u.ID, 2, partOf(small, 2)).Expect(t, 200)
		// Whether or not the S3 server kept the earlier part, the session
		// never assembles the rejected bytes: either the part is intact or
		// it is reported missing and sent again.
		res := complete(t, c, u.ID, "")
		if res.Status == http.StatusUnprocessableEntity {
			var m struct {
				Code         string `json:"code"`
				MissingParts []int  `json:"missing_parts"`
			}
			res.JSON(t, &m)
			if m.Code != "PARTS_MISSING" || fmt.Sprint(m.MissingParts) != "[1]" {
				t.Fatalf("after a rejected part: %s", res.Body)
			}
			putPart(t, c, u.ID, 1, partOf(small, 1)).Expect(t, 200)
			res = complete(t, c, u.ID, "")
		}
		f := res.Expect(t, http.StatusCreated).File(t)
		if f.SHA256 != sha(string(small)) {
			t.Fatal("the rejected part's bytes were assembled")
		}
	})

	t.Run("WholeFileChecksumMismatchFailsTheSession", func(t *testing.T) {
		c, b := setup(t)
		small := randomBytes(6<<20, 4)
		u := createUpload(t, c, map[string]any{"path": "wrong.bin", "size_bytes": len(small), "sha256": sha("something else")}, 201)
		putPart(t, c, u.ID, 1, partOf(small, 1)).Expect(t, 200)
		putPart(t, c, u.ID, 2, partOf(small, 2)).Expect(t, 200)
		complete(t, c, u.ID, "").ExpectProblem(t, http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH")
		var got session
		c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, 200).JSON(t, &got)
		if got.Status != "failed" || got.Error == nil || got.Error.Code != "CHECKSUM_MISMATCH" || got.File != nil {
			t.Fatalf("failed session: %+v", got)
		}
		if l := list(t, c, "path=wrong.bin&include_deleted=true"); len(l.Data) != 0 || objectCount(t, b) != 0 {
			t.Fatalf("a failed session left %d files, %d objects", len(l.Data), objectCount(t, b))
		}
		putPart(t, c, u.ID, 1, partOf(small, 1)).ExpectProblem(t, http.StatusConflict, "UPLOAD_ABORTED")
	})

	t.Run("PathTakenMeanwhile", func(t *testing.T) {
		c, _ := setup(t)
		small := randomBytes(6<<20, 5)
		u := createUpload(t, c, map[string]any{"path": "taken.bin", "size_bytes": len(small)}, 201)
		putPart(t, c, u.ID, 1, partOf(small, 1)).Expect(t, 200)
		putPart(t, c, u.ID, 2, partOf(small, 2)).Expect(t, 200)
		holder := upload(t, c, "taken.bin", "first").Expect(t, 201).File(t)
		p := complete(t, c, u.ID, "").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if p.ExistingFileID != holder.ID {
			t.Fatalf("existing_file_id %s", p.ExistingFileID)
		}
		complete(t, c, u.ID, `{"if_exists":"replace"}`, "If-Match", `"`+sha("nope")+`"`).
			ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		f := complete(t, c, u.ID, `{"if_exists":"replace"}`).Expect(t, http.StatusOK).File(t)
		if f.ID != holder.ID || f.Version != 2 || f.SHA256 != sha(string(small)) {
			t.Fatalf("replace by complete: %+v", f)
		}
	})

	t.Run("ConcurrentCompletesMakeOneFile", func(t *testing.T) {
		c, _ := setup(t)
		small := randomBytes(6<<20, 6)
		u := createUpload(t, c, map[string]any{"path": "race.bin", "size_bytes": len(small)}, 201)
		putPart(t, c, u.ID, 2, partOf(small, 2)).Expect(t, 200) // out of order: complete reads back
		putPart(t, c, u.ID, 1, partOf(small, 1)).Expect(t, 200)
		var wg sync.WaitGroup
		res := make([]*apitest.Response, 4)
		for i := range res {
			wg.Add(1)
			go func() { defer wg.Done(); res[i] = complete(t, c, u.ID, "") }()
		}
		wg.Wait()
		ids := map[string]bool{}
		for _, r := range res {
			switch r.Status {
			case 200, 201:
				ids[r.File(t).ID] = true
			case 409:
				if code := r.Problem(t).Code; code != "OPERATION_IN_PROGRESS" {
					t.Fatalf("409 %s", code)
				}
			default:
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		}
		if len(ids) != 1 || len(list(t, c, "path=race.bin&include_deleted=true").Data) != 1 {
			t.Fatalf("files: %v", ids)
		}
	})

	t.Run("AbortLeavesNoParts", func(t *testing.T) {
		c, b := setup(t)
		u := createUpload(t, c, map[string]any{"path": "abort.bin", "size_bytes": len(data)}, 201)
		putPart(t, c, u.ID, 1, partOf(data, 1)).Expect(t, 200)
		stored, _ := b.srv.Store.Upload(context.Background(), "alice", u.ID)
		var got session
		c.Do("DELETE", "/v1/uploads/"+u.ID, nil).Expect(t, 200).JSON(t, &got)
		if got.Status != "aborted" {
			t.Fatalf("abort: %+v", got)
		}
		c.Do("DELETE", "/v1/uploads/"+u.ID, nil).Expect(t, 200)
		putPart(t, c, u.ID, 2, partOf(data, 2)).ExpectProblem(t, http.StatusConflict, "UPLOAD_ABORTED")
		complete(t, c, u.ID, "").ExpectProblem(t, http.StatusConflict, "UPLOAD_ABORTED")
		core := minio.Core{Client: storagetest.S3(t, b.srv.Config)}
		if _, err := core.ListObjectParts(context.Background(), b.srv.Config.S3Bucket, stored.BlobKey, stored.S3UploadID, 0, 100); err == nil {
			t.Fatal("the S3 multipart upload survived the abort")
		}
		if objectCount(t, b) != 0 {
			t.Fatal("an aborted session left objects")
		}
	})

	t.Run("OtherSubjectsSessionsAreNotFound", func(t *testing.T) {
		c, b := setup(t)
		u := createUpload(t, c, map[string]any{"path": "mine.bin", "size_bytes": 10}, 201)
		bob := b.srv.Client(t, "bob")
		bob.Do("GET", "/v1/uploads/"+u.ID, nil).ExpectProblem(t, 404, "NOT_FOUND")
		putPart(t, bob, u.ID, 1, []byte("0123456789")).ExpectProblem(t, 404, "NOT_FOUND")
		complete(t, bob, u.ID, "").ExpectProblem(t, 404, "NOT_FOUND")
		bob.Do("DELETE", "/v1/uploads/"+u.ID, nil).ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("RejectsBadSessions", func(t *testing.T) {
		c, _ := setup(t)
		for _, tc := range []struct {
			body, ct string
			status   int
			code     string
		}{
			{`{"size_bytes":10}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":"a","size_bytes":0}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":"../a","size_bytes":1}`, "application/json", 422, "INVALID_PATH"},
			{`{"path":"a","size_bytes":1,"sha256":"XYZ"}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":"a","size_bytes":1,"if_exists":"maybe"}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":"a","size_bytes":1,"colour":"red"}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":"a","size_bytes":"ten"}`, "application/json", 422, "VALIDATION_FAILED"},
			{`{"path":`, "application/json", 400, "INVALID_REQUEST"},
			{`{"path":"a","size_bytes":1}`, "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"},
		} {
			c.Do("POST", "/v1/uploads", tc.body, "Content-Type", tc.ct).ExpectProblem(t, tc.status, tc.code)
		}
	})

	t.Run("KeyedCreateReplaysCurrentState", func(t *testing.T) {
		c, _ := setup(t)
		body := map[string]any{"path": "k.bin", "size_bytes": 10}
		u := createUpload(t, c, body, 201, "Idempotency-Key", "upl-1")
		putPart(t, c, u.ID, 1, []byte("0123456789")).Expect(t, 200)
		raw, _ := json.Marshal(map[string]any{"size_bytes": 10, "path": "k.bin", "if_exists": "error"})
		res := c.Do("POST", "/v1/uploads", raw, "Content-Type", "application/json", "Idempotency-Key", "upl-1").Expect(t, 200)
		var again session
		res.JSON(t, &again)
		if res.Header.Get("Idempotent-Replayed") != "true" || again.ID != u.ID || len(again.Parts) != 1 {
			t.Fatalf("keyed replay: %s", res.Body)
		}
		c.Do("POST", "/v1/uploads", `{"path":"k.bin","size_bytes":11}`, "Content-Type", "application/json", "Idempotency-Key", "upl-1").
			ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	})
}

func TestUploadExpiry(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 1 << 20}})
	c := srv.Client(t, "alice")
	u := createUpload(t, c, map[string]any{"path": "exp.bin", "size_bytes": 10}, 201)
	if _, err := srv.Store.Pool().Exec(context.Background(),
		`UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	putPart(t, c, u.ID, 1, []byte("0123456789")).ExpectProblem(t, http.StatusConflict, "UPLOAD_EXPIRED")
	n, err := srv.Store.ExpireUploads(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("expired %d, err %v", n, err)
	}
	var got session
	c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, 200).JSON(t, &got)
	if got.Status != "expired" {
		t.Fatalf("status %s", got.Status)
	}
	complete(t, c, u.ID, "").ExpectProblem(t, http.StatusConflict, "UPLOAD_EXPIRED")
	if n, _ := srv.Store.ExpireUploads(context.Background()); n != 0 {
		t.Fatalf("expired again: %d", n)
	}
}
