package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// send sends body as JSON (a string is sent as it is).
func send(c *apitest.Client, method, path string, body any, headers ...string) *apitest.Response {
	raw, ok := body.(string)
	if !ok {
		b, _ := json.Marshal(body)
		raw = string(b)
	}
	return c.Do(method, path, raw, append([]string{"Content-Type", "application/json"}, headers...)...)
}

// created sends POST path with body (as send does) and decodes the
// resource of its 201.
func created[T any](t *testing.T, c *apitest.Client, path string, body any, headers ...string) T {
	t.Helper()
	var v T
	send(c, "POST", path, body, headers...).Expect(t, http.StatusCreated).JSON(t, &v)
	return v
}

func versionList(t *testing.T, c *apitest.Client, id, query string) api.VersionList {
	t.Helper()
	return apitest.GetJSON[api.VersionList](t, c, "/v1/files/"+id+"/versions?"+query)
}

func versionNumbers(l api.VersionList) []int {
	return pluck(l.Data, func(v api.FileVersion) int { return int(v.Version) })
}

func revert(c *apitest.Client, id string, version int, headers ...string) *apitest.Response {
	return send(c, "POST", "/v1/files/"+id+"/revert", map[string]any{"version": version}, headers...)
}

func move(c *apitest.Client, id, path, ifExists string, headers ...string) *apitest.Response {
	body := map[string]any{"path": path}
	if ifExists != "" {
		body["if_exists"] = ifExists
	}
	return send(c, "POST", "/v1/files/"+id+"/move", body, headers...)
}

func versionContent[N int | int64](id string, n N) string {
	return "/v1/files/" + id + "/versions/" + strconv.FormatInt(int64(n), 10) + "/content"
}

// objectKeys is the sorted set of objects in the test's bucket.
func objectKeys(t *testing.T, b *testBundle) []string {
	t.Helper()
	keys := storagetest.ObjectKeys(t, b.srv.Config)
	slices.Sort(keys)
	return keys
}

func TestVersions(t *testing.T) {
	t.Run("EveryContentChangeMakesOneVersion", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "doc.txt", "one", "Content-Type", "text/plain", "X-Run-ID", "r1").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=doc.txt&if_exists=replace", "two", "Content-Type", "text/plain").Expect(t, 200) // 2
		upload(t, c, "doc.txt", "two", "Content-Type", "text/plain").Expect(t, http.StatusConflict)                  // refused, none
		c.Do("POST", "/v1/files?path=doc.txt&if_exists=replace", "two", "Content-Type", "text/plain").Expect(t, 200) // no-op, none
		c.Do("POST", "/v1/files?path=doc.txt&if_exists=replace", "two", "Content-Type", "text/markdown").Expect(t, 200)
		revert(c, f.ID, 1).Expect(t, http.StatusOK) // 4
		u := createUpload(t, c, map[string]any{"path": "doc.txt", "size_bytes": 4, "if_exists": "replace"}, 201)
		putPart(t, c, u.ID, 1, []byte("five")).Expect(t, 200)
		complete(t, c, u.ID, "").Expect(t, http.StatusOK) // 5
		src := upload(t, c, "src.txt", "seven").Expect(t, 201).File(t)
		bt, _ := runBatch(t, c, "versions-batch", []map[string]any{
			{"op": "put", "path": "doc.txt", "content": "six", "if_exists": "replace"},   // 6
			{"op": "copy", "file_id": src.ID, "path": "doc.txt", "if_exists": "replace"}, // 7
		}, http.StatusAccepted)
		if bt.Status != "succeeded" {
			t.Fatalf("batch: %+v", bt)
		}
		l := versionList(t, c, f.ID, "")
		if got := fmt.Sprint(versionNumbers(l)); got != "[7 6 5 4 3 2 1]" || l.HasMore || l.NextCursor != nil {
			t.Fatalf("versions %s, has_more %v, next_cursor %v", got, l.HasMore, l.NextCursor)
		}
		want := []struct{ body, ct string }{{"seven", "application/octet-stream"}, {"six", "application/octet-stream"},
			{"five", "application/octet-stream"}, {"one", "text/plain"}, {"two", "text/markdown"}, {"two", "text/plain"}, {"one", "text/plain"}}
		for i, v := range l.Data {
			if v.Object != "file_version" || v.FileID != f.ID || v.SHA256 != sha(want[i].body) || v.ContentType != want[i].ct ||
				v.ETag != `"`+v.SHA256+`"` || v.SizeBytes != int64(len(want[i].body)) || v.Current != (i == 0) {
				t.Fatalf("version %d: %+v, want %+v", v.Version, v, want[i])
			}
			got := c.Do("GET", versionContent(f.ID, v.Version), nil).Expect(t, 200)
			if string(got.Body) != want[i].body || got.Header.Get("Content-Type") != want[i].ct {
				t.Fatalf("version %d content %q (%s)", v.Version, got.Body, got.Header.Get("Content-Type"))
			}
			if v.URL != b.srv.URL+versionContent(f.ID, v.Version) {
				t.Fatalf("version url %q", v.URL)
			}
		}
		if l.Data[6].RunID == nil || *l.Data[6].RunID != "r1" || l.Data[5].RunID != nil {
			t.Fatalf("versions carry the run of the write that made them: %+v / %+v", l.Data[6], l.Data[5])
		}
		cur := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t)
		if cur.Version != 7 {
			t.Fatalf("file version %d", cur.Version)
		}
	})

	t.Run("OldBytesServeLikeContent", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "r/data.bin", "0123456789", "Content-Type", "text/plain").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=r/data.bin&if_exists=replace", "abcdef").Expect(t, 200)
		path := versionContent(f.ID, 1)
		whole := c.Do("GET", path, nil).Expect(t, http.StatusOK)
		if string(whole.Body) != "0123456789" || whole.Header.Get("ETag") != f.ETag ||
			whole.Header.Get("Repr-Digest") != digestHeader("0123456789") ||
			whole.Header.Get("Content-Disposition") != `attachment; filename=data.bin` {
			t.Fatalf("version 1: %q %v", whole.Body, whole.Header)
		}
		part := c.Do("GET", path, nil, "Range", "bytes=2-4").Expect(t, http.StatusPartialContent)
		if string(part.Body) != "234" || part.Header.Get("Content-Range") != "bytes 2-4/10" ||
			part.Header.Get("Repr-Digest") != digestHeader("0123456789") {
			t.Fatalf("range: %q %v", part.Body, part.Header)
		}
		c.Do("GET", path, nil, "If-None-Match", f.ETag).Expect(t, http.StatusNotModified)
		c.Do("GET", path, nil, "Range", "bytes=10-").ExpectProblem(t, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE")
		head := c.Do("HEAD", path, nil).Expect(t, http.StatusOK)
		if head.Header.Get("Content-Length") != "10" || len(head.Body) != 0 || head.Header.Get("ETag") != f.ETag {
			t.Fatalf("HEAD: %v", head.Header)
		}
		one := c.Do("GET", "/v1/files/"+f.ID+"/versions/1", nil).Expect(t, http.StatusOK)
		var v api.FileVersion
		one.JSON(t, &v)
		if v.Version != 1 || v.Current || one.Header.Get("ETag") != f.ETag || v.SHA256 != sha("0123456789") {
			t.Fatalf("version 1 metadata: %+v %v", v, one.Header)
		}
		cur := c.Do("GET", versionContent(f.ID, 2), nil).Expect(t, http.StatusOK)
		if string(cur.Body) != "abcdef" || cur.Header.Get("ETag") != `"`+sha("abcdef")+`"` {
			t.Fatalf("version 2: %q", cur.Body)
		}
	})

	t.Run("DeletedFilesKeepTheirVersions", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "gone.txt", "v1").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=gone.txt&if_exists=replace", "v2").Expect(t, 200)
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		c.Do("GET", "/v1/files/"+f.ID+"/content", nil).ExpectProblem(t, 404, "NOT_FOUND")
		if got := fmt.Sprint(versionNumbers(versionList(t, c, f.ID, ""))); got != "[2 1]" {
			t.Fatalf("versions of a deleted file: %s", got)
		}
		for n, want := range map[int]string{1: "v1", 2: "v2"} {
			if got := c.Do("GET", versionContent(f.ID, n), nil).Expect(t, 200); string(got.Body) != want {
				t.Fatalf("version %d of a deleted file: %q", n, got.Body)
			}
		}
	})

	t.Run("PagesNewestFirst", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "p.txt", "1").Expect(t, 201).File(t)
		for i := 2; i <= 5; i++ {
			c.Do("POST", "/v1/files?path=p.txt&if_exists=replace", strconv.Itoa(i)).Expect(t, 200)
		}
		var pages []string
		query := "limit=2"
		for {
			l := versionList(t, c, f.ID, query)
			pages = append(pages, fmt.Sprint(versionNumbers(l)))
			if !l.HasMore {
				if l.NextCursor != nil {
					t.Fatalf("last page has next_cursor %q", *l.NextCursor)
				}
				break
			}
			query = "limit=2&cursor=" + *l.NextCursor
		}
		if got := fmt.Sprint(pages); got != "[[5 4] [3 2] [1]]" {
			t.Fatalf("pages %s", got)
		}
		for _, bad := range []string{"cursor=abc", "cursor=0", "cursor=-3", "limit=x"} {
			c.Do("GET", "/v1/files/"+f.ID+"/versions?"+bad, nil).ExpectProblem(t, 400, "INVALID_REQUEST")
		}
		c.Do("GET", "/v1/files/"+f.ID+"/versions?limit=0", nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
	})

	t.Run("BadVersionNumbers", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "n.txt", "x").Expect(t, 201).File(t)
		for _, n := range []string{"abc", "1.5", "0x1", "1e3", "%20"} {
			c.Do("GET", "/v1/files/"+f.ID+"/versions/"+n, nil).ExpectProblem(t, 400, "INVALID_REQUEST")
			c.Do("GET", "/v1/files/"+f.ID+"/versions/"+n+"/content", nil).ExpectProblem(t, 400, "INVALID_REQUEST")
		}
		for _, n := range []string{"0", "-1", "2147483648", "9223372036854775807", "99999999999999999999999", "-99999999999999999999"} {
			c.Do("GET", "/v1/files/"+f.ID+"/versions/"+n, nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
			c.Do("HEAD", "/v1/files/"+f.ID+"/versions/"+n+"/content", nil).Expect(t, 422)
		}
		for _, n := range []string{"2", "2147483647"} {
			c.Do("GET", "/v1/files/"+f.ID+"/versions/"+n, nil).ExpectProblem(t, 404, "NOT_FOUND")
			c.Do("GET", "/v1/files/"+f.ID+"/versions/"+n+"/content", nil).ExpectProblem(t, 404, "NOT_FOUND")
		}
		c.Do("GET", "/v1/files/file_nope/versions", nil).ExpectProblem(t, 404, "NOT_FOUND")
		c.Do("GET", "/v1/files/file_nope/versions/1", nil).ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("BlockedVersionsAreNotServed", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "b.txt", "x").Expect(t, 201).File(t)
		if _, err := b.srv.Store.BlockFile(context.Background(), f.ID, true, "legal"); err != nil {
			t.Fatal(err)
		}
		c.Do("GET", versionContent(f.ID, 1), nil).ExpectProblem(t, 451, "CONTENT_BLOCKED")
		c.Do("GET", "/v1/files/"+f.ID+"/versions/1", nil).Expect(t, 200) // metadata stays readable
	})

	t.Run("AnotherSubjectsFileIsNotFound", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "mine.txt", "x").Expect(t, 201).File(t)
		bob := b.srv.Client(t, "bob")
		for _, r := range [][2]string{
			{"GET", "/v1/files/" + f.ID + "/versions"}, {"GET", "/v1/files/" + f.ID + "/versions/1"},
			{"GET", versionContent(f.ID, 1)}, {"GET", "/v1/files/" + f.ID + "/links"},
		} {
			bob.Do(r[0], r[1], nil).ExpectProblem(t, 404, "NOT_FOUND")
		}
		revert(bob, f.ID, 1).ExpectProblem(t, 404, "NOT_FOUND")
		move(bob, f.ID, "stolen.txt", "").ExpectProblem(t, 404, "NOT_FOUND")
		send(bob, "PATCH", "/v1/files/"+f.ID, `{"expires_at":null}`).ExpectProblem(t, 404, "NOT_FOUND")
		send(bob, "POST", "/v1/files/"+f.ID+"/links", `{}`).ExpectProblem(t, 404, "NOT_FOUND")
		if got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); got.Path != "mine.txt" || got.Version != 1 {
			t.Fatalf("another subject changed the file: %+v", got)
		}
	})
}

func TestRevert(t *testing.T) {
	t.Run("MakesANewVersionSharingTheOldBlob", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "r.txt", "first", "Content-Type", "text/plain").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=r.txt&if_exists=replace", "second", "Content-Type", "text/csv").Expect(t, 200)
		before := objectKeys(t, b)
		res := revert(c, f.ID, 1, "X-Run-ID", "undo-run").Expect(t, http.StatusOK)
		r := res.File(t)
		if r.ID != f.ID || r.Version != 3 || r.SHA256 != sha("first") || r.ContentType != "text/plain" ||
			res.Header.Get("ETag") != f.ETag || r.LastRunID == nil || *r.LastRunID != "undo-run" || r.URL != f.URL {
			t.Fatalf("reverted file: %+v", r)
		}
		if after := objectKeys(t, b); !slices.Equal(before, after) {
			t.Fatalf("a revert wrote to S3: %v -> %v", before, after)
		}
		ctx := context.Background()
		stored, err := b.srv.Store.File(ctx, "alice", f.ID)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := b.srv.Store.Version(ctx, "alice", f.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if stored.BlobKey != v1.BlobKey {
			t.Fatalf("the revert did not share version 1's blob: %s vs %s", stored.BlobKey, v1.BlobKey)
		}
		if got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200); string(got.Body) != "first" {
			t.Fatalf("content after revert %q", got.Body)
		}
		l := versionList(t, c, f.ID, "")
		if fmt.Sprint(versionNumbers(l)) != "[3 2 1]" || !l.Data[0].Current || *l.Data[0].RunID != "undo-run" {
			t.Fatalf("versions after revert: %+v", l.Data)
		}
	})

	t.Run("IdenticalContentChangesNothing", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "same.txt", "a").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=same.txt&if_exists=replace", "b").Expect(t, 200)
		c.Do("POST", "/v1/files?path=same.txt&if_exists=replace", "a").Expect(t, 200) // v3 holds v1's bytes
		before := eventList(t, b, c, "file_id="+f.ID)
		for _, n := range []int{3, 1} {
			r := revert(c, f.ID, n).Expect(t, http.StatusOK).File(t)
			if r.Version != 3 || r.SHA256 != sha("a") {
				t.Fatalf("revert to identical content %d: %+v", n, r)
			}
		}
		if after := eventList(t, b, c, "file_id="+f.ID); len(after.Data) != len(before.Data) {
			t.Fatalf("a no-op revert made events: %d -> %d", len(before.Data), len(after.Data))
		}
		if n := len(versionList(t, c, f.ID, "").Data); n != 3 {
			t.Fatalf("%d versions after no-op reverts", n)
		}
	})

	t.Run("HonoursIfMatch", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "m.txt", "a").Expect(t, 201).File(t)
		cur := c.Do("POST", "/v1/files?path=m.txt&if_exists=replace", "b").Expect(t, 200).File(t)
		revert(c, f.ID, 1, "If-Match", f.ETag).ExpectProblem(t, 412, "PRECONDITION_FAILED")
		revert(c, f.ID, 1, "If-Match", cur.ETag).Expect(t, 200)
	})

	t.Run("RefusesWhatItCannotRevert", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "d.txt", "a").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=d.txt&if_exists=replace", "b").Expect(t, 200)
		revert(c, f.ID, 7).ExpectProblem(t, 404, "NOT_FOUND")
		revert(c, "file_nope", 1).ExpectProblem(t, 404, "NOT_FOUND")
		if n, err := b.srv.Store.SweepVersions(context.Background(), 0, 100); err != nil || n != 1 {
			t.Fatalf("swept %d versions: %v", n, err)
		}
		revert(c, f.ID, 1).ExpectProblem(t, 404, "NOT_FOUND") // swept
		c.Do("GET", versionContent(f.ID, 1), nil).ExpectProblem(t, 404, "NOT_FOUND")
		if got := fmt.Sprint(versionNumbers(versionList(t, c, f.ID, ""))); got != "[2]" {
			t.Fatalf("versions after a sweep: %s", got)
		}
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		revert(c, f.ID, 2).ExpectProblem(t, 404, "NOT_FOUND") // deleted: restore first

		g := upload(t, c, "blocked.txt", "a").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=blocked.txt&if_exists=replace", "b").Expect(t, 200)
		if _, err := b.srv.Store.BlockFile(context.Background(), g.ID, true, "legal"); err != nil {
			t.Fatal(err)
		}
		revert(c, g.ID, 1).ExpectProblem(t, 451, "CONTENT_BLOCKED")
	})

	t.Run("ValidatesItsBody", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "v.txt", "a").Expect(t, 201).File(t)
		path := "/v1/files/" + f.ID + "/revert"
		for body, code := range map[string]string{
			`{}`: "VALIDATION_FAILED", `{"version":0}`: "VALIDATION_FAILED", `{"version":-2}`: "VALIDATION_FAILED",
			`{"version":"1"}`: "VALIDATION_FAILED", `{"version":1.5}`: "VALIDATION_FAILED", `{"version":null}`: "VALIDATION_FAILED",
			`{"version":1,"force":true}`: "VALIDATION_FAILED", `{"version":99999999999}`: "VALIDATION_FAILED",
			`{"version":`: "INVALID_REQUEST", ``: "INVALID_REQUEST", `[1]`: "VALIDATION_FAILED",
		} {
			res := send(c, "POST", path, body)
			if p := res.Problem(t); p.Code != code {
				t.Fatalf("revert body %q: %d %s, want %s", body, res.Status, p.Code, code)
			}
		}
		c.Do("POST", path, `{"version":1}`, "Content-Type", "text/plain").ExpectProblem(t, 415, "UNSUPPORTED_MEDIA_TYPE")
	})

	t.Run("KeyedRevertReplays", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "k.txt", "a").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=k.txt&if_exists=replace", "b").Expect(t, 200)
		first := revert(c, f.ID, 1, "Idempotency-Key", "rev-1").Expect(t, 200)
		c.Do("POST", "/v1/files?path=k.txt&if_exists=replace", "c").Expect(t, 200) // v4
		again := revert(c, f.ID, 1, "Idempotency-Key", "rev-1").Expect(t, 200)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("replay: %v %s", again.Header, again.Body)
		}
		if got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); got.Version != 4 {
			t.Fatalf("a replayed revert changed the file: %+v", got)
		}
		revert(c, f.ID, 2, "Idempotency-Key", "rev-1").ExpectProblem(t, 409, "IDEMPOTENCY_CONFLICT")
		revert(c, f.ID, 9, "Idempotency-Key", "rev-404").ExpectProblem(t, 404, "NOT_FOUND")
		replayed := revert(c, f.ID, 9, "Idempotency-Key", "rev-404")
		replayed.ExpectProblem(t, 404, "NOT_FOUND")
		if replayed.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("a recorded 404 did not replay")
		}
	})
}

func TestMove(t *testing.T) {
	t.Run("KeepsIdURLVersionAndHistory", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "a/old.txt", "v1").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=a/old.txt&if_exists=replace", "v2").Expect(t, 200)
		keys := objectKeys(t, b)
		res := move(c, f.ID, "b/new name.txt", "", "X-Run-ID", "mover").Expect(t, http.StatusOK)
		m := res.File(t)
		if m.ID != f.ID || m.URL != f.URL || m.Version != 2 || m.Path != "b/new name.txt" || m.SHA256 != sha("v2") ||
			*m.LastRunID != "mover" || res.Header.Get("ETag") != m.ETag {
			t.Fatalf("moved file: %+v", m)
		}
		if got := fmt.Sprint(versionNumbers(versionList(t, c, f.ID, ""))); got != "[2 1]" {
			t.Fatalf("history after move: %s", got)
		}
		if got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200); string(got.Body) != "v2" ||
			got.Header.Get("Content-Disposition") != `attachment; filename="new name.txt"` {
			t.Fatalf("content after move: %q %v", got.Body, got.Header)
		}
		if l := list(t, c, "path=a/old.txt"); len(l.Data) != 0 {
			t.Fatalf("the old path still lists: %v", paths(l.Data))
		}
		if l := list(t, c, "path="+"b/new%20name.txt"); len(l.Data) != 1 || l.Data[0].ID != f.ID {
			t.Fatalf("the new path lists %v", paths(l.Data))
		}
		if after := objectKeys(t, b); !slices.Equal(keys, after) {
			t.Fatalf("a move touched S3: %v -> %v", keys, after)
		}
		upload(t, c, "a/old.txt", "taker").Expect(t, http.StatusCreated) // the old path is free
	})

	t.Run("RefusesATakenPath", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "x.txt", "x").Expect(t, 201).File(t)
		y := upload(t, c, "y.txt", "y").Expect(t, 201).File(t)
		p := move(c, f.ID, "y.txt", "").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if p.ExistingFileID != y.ID {
			t.Fatalf("existing_file_id %q, want %q", p.ExistingFileID, y.ID)
		}
		move(c, f.ID, "y.txt", "error").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); got.Path != "x.txt" {
			t.Fatalf("a refused move moved: %+v", got)
		}
	})

	t.Run("ReplaceSoftDeletesTheDestination", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "src.txt", "src").Expect(t, 201).File(t)
		dest := upload(t, c, "dest.txt", "d1").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=dest.txt&if_exists=replace", "d2").Expect(t, 200)
		m := move(c, f.ID, "dest.txt", "replace", "X-Request-ID", "move-req-1").Expect(t, 200).File(t)
		if m.Path != "dest.txt" || m.ID != f.ID {
			t.Fatalf("moved: %+v", m)
		}
		d := c.Do("GET", "/v1/files/"+dest.ID, nil).Expect(t, 200).File(t)
		if d.DeletedAt == nil || d.Path != "dest.txt" {
			t.Fatalf("destination after move: %+v", d)
		}
		if got := fmt.Sprint(versionNumbers(versionList(t, c, dest.ID, ""))); got != "[2 1]" {
			t.Fatalf("the replaced destination lost its history: %s", got)
		}
		if got := c.Do("GET", versionContent(dest.ID, 1), nil).Expect(t, 200); string(got.Body) != "d1" {
			t.Fatalf("destination version 1: %q", got.Body)
		}
		evs := eventList(t, b, c, "type=file.deleted,file.moved")
		if len(evs.Data) != 2 || evs.Data[0].FileID != dest.ID || evs.Data[1].FileID != f.ID ||
			*evs.Data[0].RequestID != "move-req-1" || *evs.Data[1].RequestID != "move-req-1" ||
			*evs.Data[1].PreviousPath != "src.txt" {
			t.Fatalf("events of a replacing move: %+v", evs.Data)
		}
		// The destination comes back elsewhere with its history.
		move(c, f.ID, "src.txt", "").Expect(t, 200)
		if r := c.Do("POST", "/v1/files/"+dest.ID+"/restore", nil).Expect(t, 200).File(t); r.Version != 2 || r.Path != "dest.txt" {
			t.Fatalf("restored destination: %+v", r)
		}
	})

	t.Run("ReplaceRefusesABlockedDestination", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		d := upload(t, c, "d.txt", "d").Expect(t, 201).File(t)
		if _, err := b.srv.Store.BlockFile(context.Background(), d.ID, true, "legal"); err != nil {
			t.Fatal(err)
		}
		move(c, f.ID, "d.txt", "replace").ExpectProblem(t, 451, "CONTENT_BLOCKED")
		if got := c.Do("GET", "/v1/files/"+d.ID, nil).Expect(t, 200).File(t); got.DeletedAt != nil {
			t.Fatal("the blocked destination was deleted")
		}
	})

	t.Run("ToItsOwnPathChangesNothing", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "same.txt", "s").Expect(t, 201).File(t)
		n := len(eventList(t, b, c, "").Data)
		for _, ifExists := range []string{"", "replace"} {
			m := move(c, f.ID, "same.txt", ifExists).Expect(t, 200).File(t)
			if m.Path != f.Path || m.Version != 1 || !m.UpdatedAt.Equal(f.UpdatedAt) || m.DeletedAt != nil {
				t.Fatalf("move to its own path: %+v", m)
			}
		}
		if got := len(eventList(t, b, c, "").Data); got != n {
			t.Fatalf("a no-op move made %d events", got-n)
		}
	})

	t.Run("HonoursIfMatchAndValidates", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "i.txt", "i").Expect(t, 201).File(t)
		move(c, f.ID, "j.txt", "", "If-Match", `"`+sha("other")+`"`).ExpectProblem(t, 412, "PRECONDITION_FAILED")
		move(c, f.ID, "../j.txt", "").ExpectProblem(t, 422, "INVALID_PATH")
		move(c, f.ID, "", "").ExpectProblem(t, 422, "INVALID_PATH")
		move(c, f.ID, "j.txt", "sometimes").ExpectProblem(t, 422, "VALIDATION_FAILED")
		send(c, "POST", "/v1/files/"+f.ID+"/move", `{"if_exists":"replace"}`).ExpectProblem(t, 422, "VALIDATION_FAILED")
		send(c, "POST", "/v1/files/"+f.ID+"/move", `{"path":"j.txt","mode":"x"}`).ExpectProblem(t, 422, "VALIDATION_FAILED")
		send(c, "POST", "/v1/files/"+f.ID+"/move", `{"path":`).ExpectProblem(t, 400, "INVALID_REQUEST")
		move(c, f.ID, "j.txt", "", "If-Match", f.ETag).Expect(t, 200)
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		move(c, f.ID, "k.txt", "").ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("KeyedMoveReplays", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "k1.txt", "k").Expect(t, 201).File(t)
		first := move(c, f.ID, "k2.txt", "", "Idempotency-Key", "mv-1").Expect(t, 200)
		move(c, f.ID, "k3.txt", "").Expect(t, 200)
		again := move(c, f.ID, "k2.txt", "", "Idempotency-Key", "mv-1").Expect(t, 200)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("replay: %s", again.Body)
		}
		if got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); got.Path != "k3.txt" {
			t.Fatalf("a replayed move moved: %+v", got)
		}
		move(c, f.ID, "k4.txt", "", "Idempotency-Key", "mv-1").ExpectProblem(t, 409, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("NamespacesAreTheSubjects", func(t *testing.T) {
		c, b := setup(t)
		bob := b.srv.Client(t, "bob")
		mine := upload(t, c, "notes.txt", "alice").Expect(t, 201).File(t)
		theirs := upload(t, bob, "taken.txt", "bob").Expect(t, 201).File(t)
		m := move(c, mine.ID, "taken.txt", "").Expect(t, 200).File(t) // bob's path is not alice's
		if m.Path != "taken.txt" {
			t.Fatalf("moved: %+v", m)
		}
		if got := bob.Do("GET", "/v1/files/"+theirs.ID, nil).Expect(t, 200).File(t); got.DeletedAt != nil || got.Path != "taken.txt" {
			t.Fatalf("bob's file changed: %+v", got)
		}
	})
}
