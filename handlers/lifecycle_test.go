package handlers_test

import (
	"net/http"
	"testing"
	"time"
)

func TestDeleteAndRestore(t *testing.T) {
	t.Run("SoftDeleteFreesPathAndRestoreChecksIt", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "x/y.txt", "v1").Expect(t, 201).File(t)
		del := c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK).File(t)
		if del.DeletedAt == nil || del.PurgeAfter == nil || !del.PurgeAfter.After(del.DeletedAt.Add(24*time.Hour)) {
			t.Fatalf("deleted file: %+v", del)
		}
		again := c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK).File(t)
		if !again.DeletedAt.Equal(*del.DeletedAt) || !again.PurgeAfter.Equal(*del.PurgeAfter) {
			t.Fatalf("repeated delete changed the file: %+v", again)
		}
		meta := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK).File(t)
		if meta.DeletedAt == nil {
			t.Fatal("metadata of a deleted file lost deleted_at")
		}
		c.Do("GET", "/v1/files/"+f.ID+"/content", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")

		taker := upload(t, c, "x/y.txt", "v2").Expect(t, http.StatusCreated).File(t)
		if taker.ID == f.ID {
			t.Fatal("an upload to a freed path reused the deleted file")
		}
		p := c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if p.ExistingFileID != taker.ID {
			t.Fatalf("existing_file_id %q, want %q", p.ExistingFileID, taker.ID)
		}
		c.Do("DELETE", "/v1/files/"+taker.ID, nil).Expect(t, http.StatusOK)
		restored := c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).Expect(t, http.StatusOK).File(t)
		if restored.DeletedAt != nil || restored.PurgeAfter != nil || restored.Version != 1 {
			t.Fatalf("restored: %+v", restored)
		}
		c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).Expect(t, http.StatusOK)
		got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, http.StatusOK)
		if string(got.Body) != "v1" {
			t.Fatalf("restored content %q", got.Body)
		}
	})

	t.Run("DeleteHonoursIfMatch", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "m.txt", "v1").Expect(t, 201).File(t)
		c.Do("DELETE", "/v1/files/"+f.ID, nil, "If-Match", `"`+sha("other")+`"`).
			ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
		c.Do("DELETE", "/v1/files/"+f.ID, nil, "If-Match", f.ETag).Expect(t, http.StatusOK)
	})

	t.Run("UnknownIDsAreNotFound", func(t *testing.T) {
		c, _ := setup(t)
		for _, r := range [][2]string{
			{"GET", "/v1/files/file_nope"}, {"GET", "/v1/files/file_nope/content"},
			{"DELETE", "/v1/files/file_nope"}, {"POST", "/v1/files/file_nope/restore"},
		} {
			c.Do(r[0], r[1], nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		}
	})
}
