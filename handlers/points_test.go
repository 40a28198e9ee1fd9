package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

func createCheckpointREST(t *testing.T, c *apitest.Client, body string, headers ...string) api.Checkpoint {
	t.Helper()
	return created[api.Checkpoint](t, c, "/v1/checkpoints", body, headers...)
}

// TestPointsREST: a checkpoint, a bad edit across several files, as-of
// reads at the checkpoint, and the diff that shows the edit; with the
// problems of bad points.
func TestPointsREST(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	var a, b api.File
	upload(t, c, "src/a.txt", "alpha\n").Expect(t, http.StatusCreated).JSON(t, &a)
	upload(t, c, "src/b.txt", "beta\n").Expect(t, http.StatusCreated).JSON(t, &b)
	cp := createCheckpointREST(t, c, `{"name":"before-edit","prefix":"src/","note":"risky step"}`, "Idempotency-Key", "ck-1")
	if cp.Name == nil || *cp.Name != "before-edit" || cp.Prefix != "src/" || !strings.HasPrefix(cp.ID, "ckpt_") {
		t.Fatalf("checkpoint %+v", cp)
	}
	// The same key and body replay it; the name again is 409.
	send(c, "POST", "/v1/checkpoints", `{"name":"before-edit","prefix":"src/","note":"risky step"}`, "Idempotency-Key", "ck-1").
		Expect(t, http.StatusCreated)
	send(c, "POST", "/v1/checkpoints", `{"name":"before-edit"}`).ExpectProblem(t, http.StatusConflict, "CHECKPOINT_EXISTS")
	send(c, "POST", "/v1/checkpoints", `{"name":"now"}`).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	// The bad edit.
	c.Do("POST", "/v1/files?if_exists=replace&path=src/a.txt", "broken\n").Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+b.ID, nil).Expect(t, http.StatusOK)
	upload(t, c, "src/c.txt", "new\n").Expect(t, http.StatusCreated)

	var now, then api.FileList
	c.Do("GET", "/v1/files?as_of=now&prefix=src/", nil).Expect(t, http.StatusOK).JSON(t, &now)
	c.Do("GET", "/v1/files?as_of=before-edit&prefix=src/", nil).Expect(t, http.StatusOK).JSON(t, &then)
	if got := pathList(now.Data); got != "src/a.txt src/c.txt" {
		t.Errorf("as of now: %s", got)
	}
	if got := pathList(then.Data); got != "src/a.txt src/b.txt" || then.Data[0].Version != 1 || then.Data[0].SHA256 != sha("alpha\n") {
		t.Errorf("as of the checkpoint: %s %+v", got, then.Data)
	}
	// Pages in path order.
	var page api.FileList
	c.Do("GET", "/v1/files?as_of="+cp.ID+"&limit=1", nil).Expect(t, http.StatusOK).JSON(t, &page)
	if !page.HasMore || page.NextCursor == nil || pathList(page.Data) != "src/a.txt" {
		t.Fatalf("first page %+v", page)
	}
	c.Do("GET", "/v1/files?as_of="+cp.ID+"&limit=1&cursor="+*page.NextCursor, nil).Expect(t, http.StatusOK).JSON(t, &page)
	if page.HasMore || pathList(page.Data) != "src/b.txt" {
		t.Fatalf("second page %+v", page)
	}
	var old api.File
	c.Do("GET", "/v1/files/"+a.ID+"?as_of="+url.QueryEscape(cp.Cursor), nil).Expect(t, http.StatusOK).JSON(t, &old)
	if old.Version != 1 || old.SHA256 != sha("alpha\n") {
		t.Errorf("a.txt as of the checkpoint: %+v", old)
	}
	res := c.Do("GET", "/v1/files/"+b.ID+"/content?as_of=before-edit", nil).Expect(t, http.StatusOK)
	if string(res.Body) != "beta\n" {
		t.Errorf("b.txt's content as of the checkpoint: %q", res.Body)
	}
	c.Do("GET", "/v1/files/"+b.ID+"/content?as_of=now", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")

	var d api.DiffList
	c.Do("GET", "/v1/diff?from=before-edit&prefix=src/", nil).Expect(t, http.StatusOK).JSON(t, &d)
	var got []string
	for _, ch := range d.Data {
		got = append(got, ch.Change+" "+ch.Path)
	}
	if strings.Join(got, ", ") != "modified src/a.txt, deleted src/b.txt, added src/c.txt" {
		t.Errorf("diff: %v", got)
	}

	// Bad points.
	other := srv.Client(t, "bob")
	other.Do("GET", "/v1/files?as_of=before-edit", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	other.Do("GET", "/v1/files?as_of="+url.QueryEscape(cp.Cursor), nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	c.Do("GET", "/v1/files?as_of=2999-01-01T00:00:00Z", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	c.Do("GET", "/v1/files?as_of=2001-01-01T00:00:00Z", nil).ExpectProblem(t, http.StatusGone, "CURSOR_EXPIRED")
	c.Do("GET", "/v1/files?as_of=has%20space", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	c.Do("GET", "/v1/diff", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	var list api.CheckpointList
	c.Do("GET", "/v1/checkpoints", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != cp.ID {
		t.Fatalf("checkpoints %+v", list)
	}
	c.Do("GET", "/v1/checkpoints/before-edit", nil).Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/checkpoints/"+cp.ID, nil).Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/checkpoints/"+cp.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	var events api.EventList
	c.Do("GET", "/v1/events?type=checkpoint.created,checkpoint.deleted", nil).Expect(t, http.StatusOK).JSON(t, &events)
	if len(events.Data) != 2 || events.Data[0].CheckpointID == nil || *events.Data[0].CheckpointID != cp.ID {
		t.Fatalf("checkpoint events %+v", events.Data)
	}
}

// pathList is the files' paths in their order, separated by spaces.
func pathList(files []api.File) string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return strings.Join(out, " ")
}

// TestCheckpointsPage: a listing of checkpoints pages newest first by its
// cursor, each once; a cursor of another kind is refused.
func TestCheckpointsPage(t *testing.T) {
	c, _ := setup(t)
	var want []string
	for _, name := range []string{"one", "two", "three"} {
		want = append([]string{createCheckpointREST(t, c, `{"name":"`+name+`"}`).ID}, want...)
	}
	var got []string
	for q := "limit=2"; ; {
		var page api.CheckpointList
		c.Do("GET", "/v1/checkpoints?"+q, nil).Expect(t, http.StatusOK).JSON(t, &page)
		for _, cp := range page.Data {
			got = append(got, cp.ID)
		}
		if !page.HasMore {
			if page.NextCursor != nil {
				t.Fatalf("the last page names a next cursor %q", *page.NextCursor)
			}
			break
		}
		q = "limit=2&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v, want newest first %v", got, want)
	}
	c.Do("GET", "/v1/checkpoints?cursor=bogus", nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
}
