package handlers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// setupRaces is a server whose upload leases are short (a complete's 3 s, a
// part's 1 s), so that a request told to retry while another holds a
// session does not wait long.
func setupRaces(t *testing.T) (*apitest.Client, *apitest.Server) {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.UploadCompleteLease = 3 * time.Second
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	return srv.Client(t, "alice"), srv
}

// busy reports whether r is the retryable OPERATION_IN_PROGRESS, and checks
// that its Retry-After is a whole number of seconds from 1 to the lease.
func busy(t *testing.T, r *apitest.Response, lease time.Duration) bool {
	t.Helper()
	if r.Status != http.StatusConflict || r.Problem(t).Code != "OPERATION_IN_PROGRESS" {
		return false
	}
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > lease {
		t.Errorf("OPERATION_IN_PROGRESS with Retry-After %q, want 1 to %v", r.Header.Get("Retry-After"), lease)
	}
	return true
}

// completeSettled completes a session, repeating the complete while another
// request holds it (OPERATION_IN_PROGRESS), as a client does.
func completeSettled(t *testing.T, c *apitest.Client, id string) *apitest.Response {
	t.Helper()
	var res *apitest.Response
	storagetest.Eventually(t, time.Minute, "complete of "+id+" to settle", func() bool {
		res = complete(t, c, id, "")
		return !busy(t, res, 3*time.Second)
	})
	return res
}

// reverseSession creates a two-part session for data at path (declaring its
// sha256, so sessions of other bytes at one path are distinct) and sends its
// parts last first, so that complete reads the content back (slow enough
// for the races below to meet it).
func reverseSession(t *testing.T, c *apitest.Client, path string, data []byte) session {
	t.Helper()
	u := createUpload(t, c, map[string]any{"path": path, "size_bytes": len(data), "sha256": sha(string(data))},
		http.StatusCreated)
	putPart(t, c, u.ID, 2, partOf(data, 2)).Expect(t, http.StatusOK)
	putPart(t, c, u.ID, 1, partOf(data, 1)).Expect(t, http.StatusOK)
	return u
}

func TestUploadRaces(t *testing.T) {
	t.Run("CompletesOfOnePathTakeTurnsAndTheLosersStayPending", func(t *testing.T) {
		c, srv := setupRaces(t)
		const n = 4
		data := make([][]byte, n)
		ids := make([]string, n)
		for i := range n {
			data[i] = randomBytes(partSize+64<<10, int64(100+i))
			ids[i] = reverseSession(t, c, "contested.bin", data[i]).ID
		}
		res := concurrently(n, func(i int) *apitest.Response { return completeSettled(t, c, ids[i]) })
		winner := -1
		for i, r := range res {
			switch r.Status {
			case http.StatusCreated:
				if winner >= 0 {
					t.Fatalf("sessions %d and %d both created the file", winner, i)
				}
				winner = i
			default:
				r.ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
			}
		}
		if winner < 0 {
			t.Fatal("no complete won")
		}
		f := res[winner].File(t)
		if f.SHA256 != sha(string(data[winner])) {
			t.Fatalf("the file holds other bytes than the winner's")
		}
		for i := range n {
			if i == winner {
				continue
			}
			// A loser is decided before its parts are assembled, like a
			// sequential one: it stays pending and takes parts.
			var got session
			c.Do("GET", "/v1/uploads/"+ids[i], nil).Expect(t, http.StatusOK).JSON(t, &got)
			if got.Status != "pending" {
				t.Fatalf("loser %d is %s", i, got.Status)
			}
			stored, err := srv.Store.Upload(context.Background(), "alice", ids[i])
			if err != nil || stored.Assembled {
				t.Fatalf("loser %d was assembled before it lost (%v)", i, err)
			}
			putPart(t, c, ids[i], 1, partOf(data[i], 1)).Expect(t, http.StatusOK)
		}
		if l := list(t, c, "path=contested.bin&include_deleted=true"); len(l.Data) != 1 {
			t.Fatalf("%d files at the path", len(l.Data))
		}
	})

	t.Run("PartsResentWhileCompleteRunsAreNeverDropped", func(t *testing.T) {
		c, _ := setupRaces(t)
		for round := range 3 {
			data := randomBytes(partSize+64<<10, int64(200+round))
			path := "resent-" + strconv.Itoa(round) + ".bin"
			u := reverseSession(t, c, path, data)
			done := make(chan struct{})
			var (
				wg        sync.WaitGroup
				completed *apitest.Response
			)
			wg.Go(func() {
				defer close(done)
				completed = completeSettled(t, c, u.ID)
			})
			// Parts 1 and 2 in turn, the same bytes each time, until the
			// complete has answered.
			answers := map[string]int{}
			for n := 1; ; n = 3 - n {
				select {
				case <-done:
				default:
					res := putPart(t, c, u.ID, n, partOf(data, n))
					switch {
					case res.Status == http.StatusOK:
						answers["200"]++
					case busy(t, res, 3*time.Second):
						answers["OPERATION_IN_PROGRESS"]++
					default:
						// Only a session that is completed may say so.
						res.ExpectProblem(t, http.StatusConflict, "UPLOAD_COMPLETED")
						var got session
						c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, http.StatusOK).JSON(t, &got)
						if got.Status != "completed" {
							t.Fatalf("round %d: part %d was answered UPLOAD_COMPLETED while the session is %s", round, n, got.Status)
						}
						answers["UPLOAD_COMPLETED"]++
					}
					continue
				}
				break
			}
			wg.Wait()
			t.Logf("round %d: parts sent while the complete ran were answered %v", round, answers)
			f := completed.Expect(t, http.StatusCreated).File(t)
			// After the complete, a part is truthfully UPLOAD_COMPLETED.
			putPart(t, c, u.ID, 1, partOf(data, 1)).ExpectProblem(t, http.StatusConflict, "UPLOAD_COMPLETED")
			if f.SHA256 != sha(string(data)) {
				t.Fatalf("round %d: sha256 %s", round, f.SHA256)
			}
			content := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
			if sha(string(content.Body)) != f.SHA256 {
				t.Fatalf("round %d: the content does not match its sha256", round)
			}
		}
	})
}

// TestUploadAssembledByADeadComplete: a complete that died after S3
// assembled the parts, before it could record so, leaves the session
// pending with its multipart upload gone. A part sent to it is told to
// retry, then taken again only with the same bytes (other bytes are told
// why not), and the session completes with the assembled content.
func TestUploadAssembledByADeadComplete(t *testing.T) {
	c, srv := setupRaces(t)
	ctx := context.Background()
	data := randomBytes(partSize+1024, 300)
	u := reverseSession(t, c, "dead.bin", data)
	stored, err := srv.Store.Upload(ctx, "alice", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]minio.CompletePart, len(stored.Parts))
	for i, p := range stored.Parts {
		parts[i] = minio.CompletePart{PartNumber: p.Number, ETag: p.ETag}
	}
	core := minio.Core{Client: storagetest.S3(t, srv.Config)}
	if _, err := core.CompleteMultipartUpload(ctx, srv.Config.S3Bucket, stored.BlobKey, stored.S3UploadID, parts, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if !busy(t, putPart(t, c, u.ID, 1, partOf(data, 1)), time.Second) {
		t.Fatal("a part to a session assembled behind its back was not told to retry")
	}
	var got session
	c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, http.StatusOK).JSON(t, &got)
	if got.Status != "pending" {
		t.Fatalf("session %s", got.Status)
	}
	putPart(t, c, u.ID, 1, partOf(data, 1)).Expect(t, http.StatusOK)
	p := putPart(t, c, u.ID, 2, randomBytes(1024, 301)).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	if !strings.Contains(p.Detail, "already assembled") || len(p.Errors) != 1 {
		t.Fatalf("the refusal does not say why: %+v", p)
	}
	f := complete(t, c, u.ID, "").Expect(t, http.StatusCreated).File(t)
	if f.SHA256 != sha(string(data)) {
		t.Fatalf("sha256 %s", f.SHA256)
	}
}
