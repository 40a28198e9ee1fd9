package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// expiresAfter checks that f expires d after its latest write.
func expiresAfter(t *testing.T, f apitest.File, d time.Duration) {
	t.Helper()
	if f.ExpiresAt == nil || !f.ExpiresAt.Equal(f.UpdatedAt.Add(d)) {
		t.Fatalf("expires_at %v, want updated_at %v + %v", f.ExpiresAt, f.UpdatedAt, d)
	}
}

// expireNow moves a file's expires_at into the past, as if it had been
// reached.
func expireNow(t *testing.T, b *testBundle, id string) {
	t.Helper()
	if n := exec(t, b, `UPDATE files SET expires_at = now() - interval '1 minute' WHERE id = $1`, id); n != 1 {
		t.Fatalf("seeded %d files", n)
	}
}

func patchExpiry(c *apitest.Client, id string, body string, headers ...string) *apitest.Response {
	return send(c, "PATCH", "/v1/files/"+id, body, headers...)
}

func TestExpiry(t *testing.T) {
	t.Run("ExpiresInOnEveryWayIn", func(t *testing.T) {
		c, _ := setup(t)
		f := c.Do("POST", "/v1/files?path=e.txt&expires_in=3600", "x").Expect(t, 201).File(t)
		expiresAfter(t, f, time.Hour)
		kept := c.Do("POST", "/v1/files?path=e.txt&if_exists=replace", "y").Expect(t, 200).File(t)
		if kept.Version != 2 || !kept.ExpiresAt.Equal(*f.ExpiresAt) {
			t.Fatalf("a replace without expires_in changed the expiry: %+v", kept)
		}
		moved := c.Do("POST", "/v1/files?path=e.txt&if_exists=replace&expires_in=60", "z").Expect(t, 200).File(t)
		expiresAfter(t, moved, time.Minute)
		if plain := upload(t, c, "never.txt", "n").Expect(t, 201).File(t); plain.ExpiresAt != nil {
			t.Fatalf("a file without expires_in expires: %+v", plain)
		}

		var u struct {
			session
			ExpiresIn *int64 `json:"expires_in"`
		}
		raw := `{"path":"big.bin","size_bytes":3,"expires_in":600}`
		c.Do("POST", "/v1/uploads", raw, "Content-Type", "application/json").Expect(t, 201).JSON(t, &u)
		if u.ExpiresIn == nil || *u.ExpiresIn != 600 {
			t.Fatalf("session expires_in %v", u.ExpiresIn)
		}
		putPart(t, c, u.ID, 1, []byte("abc")).Expect(t, 200)
		expiresAfter(t, complete(t, c, u.ID, "").Expect(t, 201).File(t), 10*time.Minute)

		bt, _ := runBatch(t, c, "exp-batch", []map[string]any{
			{"op": "put", "path": "b.txt", "content": "b", "expires_in": 120},
			{"op": "put", "path": "c.txt", "content": "c"},
		}, http.StatusAccepted)
		if bt.Status != "succeeded" {
			t.Fatalf("batch %+v", bt)
		}
		expiresAfter(t, *bt.Items[0].File, 2*time.Minute)
		if bt.Items[1].File.ExpiresAt != nil {
			t.Fatalf("a put without expires_in expires: %+v", bt.Items[1].File)
		}
	})

	t.Run("RejectsExpiresInOutOfRange", func(t *testing.T) {
		c, b := setup(t)
		for q, code := range map[string]string{
			"59": "VALIDATION_FAILED", "0": "VALIDATION_FAILED", "-60": "VALIDATION_FAILED", "31536001": "VALIDATION_FAILED",
			"99999999999999999999": "VALIDATION_FAILED", "-99999999999999999999": "VALIDATION_FAILED", "abc": "INVALID_REQUEST", "1.5": "INVALID_REQUEST", "60s": "INVALID_REQUEST",
		} {
			res := c.Do("POST", "/v1/files?path=x.txt&expires_in="+q, "x")
			if p := res.Problem(t); p.Code != code {
				t.Fatalf("expires_in=%s: %d %s, want %s", q, res.Status, p.Code, code)
			}
		}
		for _, body := range []string{
			`{"path":"s","size_bytes":1,"expires_in":10}`, `{"path":"s","size_bytes":1,"expires_in":31536001}`,
			`{"path":"s","size_bytes":1,"expires_in":"600"}`, `{"path":"s","size_bytes":1,"expires_in":6.5}`,
		} {
			send(c, "POST", "/v1/uploads", body).ExpectProblem(t, 422, "VALIDATION_FAILED")
		}
		raw := `{"operations":[{"op":"put","path":"p","content":"x","expires_in":59}]}`
		p := send(c, "POST", "/v1/batch", raw, "Idempotency-Key", "exp-bad").ExpectProblem(t, 422, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != "operations[0].expires_in" {
			t.Fatalf("batch errors: %+v", p.Errors)
		}
		c.Do("POST", "/v1/files?path=edge.txt&expires_in=31536000", "x").Expect(t, 201)
		if n := objectCount(t, b); n != 1 {
			t.Fatalf("%d objects: a refused upload stored bytes", n)
		}
	})

	t.Run("PatchSetsAndClears", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "p.txt", "p").Expect(t, 201).File(t)
		at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		set := patchExpiry(c, f.ID, `{"expires_at":"`+at.Format(time.RFC3339)+`"}`).Expect(t, 200)
		got := set.File(t)
		if got.ExpiresAt == nil || !got.ExpiresAt.Equal(at) || got.Version != 1 || set.Header.Get("ETag") != f.ETag {
			t.Fatalf("after PATCH: %+v", got)
		}
		same := patchExpiry(c, f.ID, `{"expires_at":"`+at.Format(time.RFC3339)+`"}`).Expect(t, 200).File(t)
		if !same.UpdatedAt.Equal(got.UpdatedAt) {
			t.Fatal("setting the same expiry changed the file")
		}
		cleared := patchExpiry(c, f.ID, `{"expires_at":null}`).Expect(t, 200).File(t)
		if cleared.ExpiresAt != nil {
			t.Fatalf("not cleared: %+v", cleared)
		}
		nanos := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
		patchExpiry(c, f.ID, `{"expires_at":"`+nanos+`"}`).Expect(t, 200)
		offset := time.Now().Add(2 * time.Hour).In(time.FixedZone("x", 5*3600)).Format(time.RFC3339)
		if o := patchExpiry(c, f.ID, `{"expires_at":"`+offset+`"}`).Expect(t, 200).File(t); o.ExpiresAt.Location() != time.UTC {
			t.Fatalf("expires_at is not shown in UTC: %v", o.ExpiresAt)
		}
	})

	t.Run("PatchTakesOnlyExpiresAt", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "o.txt", "o").Expect(t, 201).File(t)
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for body, want := range map[string]string{
			`{"path":"other.txt"}`:                            "path",
			`{"expires_at":null,"content_type":"text/plain"}`: "content_type",
			`{}`:                                    "expires_at",
			`{"expires_at":"tomorrow"}`:             "expires_at",
			`{"expires_at":5}`:                      "expires_at",
			`{"expires_at":"2020-01-01T00:00:00Z"}`: "expires_at",
			`{"expires_at":"` + time.Now().UTC().Format(time.RFC3339) + `"}`: "expires_at",
			`{"expires_at":"9999-01-01T00:00:00Z"}`:                          "expires_at",
			`[]`:                                                             "body",
			`"x"`:                                                            "body",
		} {
			p := patchExpiry(c, f.ID, body).ExpectProblem(t, 422, "VALIDATION_FAILED")
			if len(p.Errors) != 1 || p.Errors[0].Field != want {
				t.Fatalf("PATCH %s: errors %+v, want field %s", body, p.Errors, want)
			}
		}
		patchExpiry(c, f.ID, `{"expires_at":`).ExpectProblem(t, 400, "INVALID_REQUEST")
		patchExpiry(c, f.ID, ``).ExpectProblem(t, 400, "INVALID_REQUEST")
		c.Do("PATCH", "/v1/files/"+f.ID, `{"expires_at":null}`, "Content-Type", "text/plain").ExpectProblem(t, 415, "UNSUPPORTED_MEDIA_TYPE")
		patchExpiry(c, f.ID, `{"expires_at":"`+future+`"}`, "If-Match", `"`+sha("nope")+`"`).ExpectProblem(t, 412, "PRECONDITION_FAILED")
		patchExpiry(c, f.ID, `{"expires_at":"`+future+`"}`, "If-Match", f.ETag).Expect(t, 200)
		if got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t); got.Path != "o.txt" || got.ContentType != f.ContentType {
			t.Fatalf("a refused PATCH changed the file: %+v", got)
		}
	})

	t.Run("PatchIsAKeyedWrite", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "k.txt", "k").Expect(t, 201).File(t)
		first := patchExpiry(c, f.ID, `{"expires_at":null}`, "Idempotency-Key", "patch-1").Expect(t, 200)
		again := patchExpiry(c, f.ID, `{ "expires_at" : null }`, "Idempotency-Key", "patch-1").Expect(t, 200)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("replay %v", again.Header)
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		patchExpiry(c, f.ID, `{"expires_at":"`+future+`"}`, "Idempotency-Key", "patch-1").ExpectProblem(t, 409, "IDEMPOTENCY_CONFLICT")
		reader := b.srv.Client(t, "alice", "read")
		patchExpiry(reader, f.ID, `{"expires_at":null}`).ExpectProblem(t, 403, "FORBIDDEN")
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		patchExpiry(c, f.ID, `{"expires_at":null}`).ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("AnExpiredFileCountsAsDeleted", func(t *testing.T) {
		c, b := setup(t)
		f := c.Do("POST", "/v1/files?path=tmp/e.txt&expires_in=600", "old").Expect(t, 201).File(t)
		expireNow(t, b, f.ID)
		c.Do("GET", "/v1/files/"+f.ID+"/content", nil).ExpectProblem(t, 404, "NOT_FOUND")
		c.Do("HEAD", "/v1/files/"+f.ID+"/content", nil).Expect(t, 404)
		meta := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t)
		if meta.DeletedAt == nil || !meta.DeletedAt.Equal(*meta.ExpiresAt) ||
			!meta.PurgeAfter.Equal(meta.ExpiresAt.Add(7*24*time.Hour)) {
			t.Fatalf("expired file: %+v", meta)
		}
		if l := list(t, c, "prefix=tmp/"); len(l.Data) != 0 {
			t.Fatalf("an expired file lists: %v", paths(l.Data))
		}
		if l := list(t, c, "prefix=tmp/&include_deleted=true"); len(l.Data) != 1 {
			t.Fatalf("include_deleted: %v", paths(l.Data))
		}
		if got := c.Do("GET", versionContent(f.ID, 1), nil).Expect(t, 200); string(got.Body) != "old" {
			t.Fatalf("version of an expired file: %q", got.Body)
		}
		revert(c, f.ID, 1).ExpectProblem(t, 404, "NOT_FOUND")
		move(c, f.ID, "tmp/moved.txt", "").ExpectProblem(t, 404, "NOT_FOUND")
		send(c, "POST", "/v1/files/"+f.ID+"/links", `{}`).ExpectProblem(t, 404, "NOT_FOUND")
		patchExpiry(c, f.ID, `{"expires_at":null}`).ExpectProblem(t, 404, "NOT_FOUND")

		// Its path is free: a new upload there is a new file, and the
		// expiry is recorded as the delete it was.
		n := c.Do("POST", "/v1/files?path=tmp/e.txt&if_exists=replace", "new").Expect(t, http.StatusCreated).File(t)
		if n.ID == f.ID || n.Version != 1 || n.ExpiresAt != nil {
			t.Fatalf("upload at an expired path: %+v", n)
		}
		var deletedAt, expiresAt time.Time
		err := b.srv.Store.Pool().QueryRow(context.Background(), `SELECT deleted_at, expires_at FROM files WHERE id = $1`, f.ID).
			Scan(&deletedAt, &expiresAt)
		if err != nil || !deletedAt.Equal(expiresAt) {
			t.Fatalf("the expiry was not recorded: deleted_at %v expires_at %v (%v)", deletedAt, expiresAt, err)
		}
		if got := fmt.Sprint(eventTypes(eventList(t, b, c, "prefix=tmp/").Data)); got != "[file.created file.expired file.created]" {
			t.Fatalf("events: %s", got)
		}
	})

	t.Run("TheSweeperRecordsExpiry", func(t *testing.T) {
		c, b := setup(t)
		f := c.Do("POST", "/v1/files?path=s.txt&expires_in=600", "s").Expect(t, 201).File(t)
		keep := c.Do("POST", "/v1/files?path=k.txt&expires_in=600", "k").Expect(t, 201).File(t)
		expireNow(t, b, f.ID)
		ctx := context.Background()
		if n, err := b.srv.Store.ExpireFiles(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireFiles: %d, %v", n, err)
		}
		if n, err := b.srv.Store.ExpireFiles(ctx); err != nil || n != 0 {
			t.Fatalf("ExpireFiles again: %d, %v", n, err)
		}
		var deletedAt, expiresAt, purgeAfter time.Time
		err := b.srv.Store.Pool().QueryRow(ctx, `SELECT deleted_at, expires_at, purge_after FROM files WHERE id = $1`, f.ID).
			Scan(&deletedAt, &expiresAt, &purgeAfter)
		if err != nil || !deletedAt.Equal(expiresAt) || !purgeAfter.Equal(expiresAt.Add(7*24*time.Hour)) {
			t.Fatalf("recorded: deleted_at %v expires_at %v purge_after %v (%v)", deletedAt, expiresAt, purgeAfter, err)
		}
		meta := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t)
		if !meta.DeletedAt.Equal(deletedAt) {
			t.Fatalf("the API and the row disagree: %+v", meta)
		}
		if got := c.Do("GET", "/v1/files/"+keep.ID, nil).Expect(t, 200).File(t); got.DeletedAt != nil {
			t.Fatalf("a file not yet expired was recorded: %+v", got)
		}
		expired := eventList(t, b, c, "type=file.expired").Data
		if len(expired) != 1 || expired[0].FileID != f.ID {
			t.Fatalf("file.expired events: %+v", expired)
		}
	})

	t.Run("RestoreClearsExpiry", func(t *testing.T) {
		c, b := setup(t)
		for i, record := range []bool{false, true} {
			f := c.Do("POST", fmt.Sprintf("/v1/files?path=r%d.txt&expires_in=600", i), "r").Expect(t, 201).File(t)
			expireNow(t, b, f.ID)
			if record {
				if _, err := b.srv.Store.ExpireFiles(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			r := c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).Expect(t, 200).File(t)
			if r.DeletedAt != nil || r.PurgeAfter != nil || r.ExpiresAt != nil {
				t.Fatalf("restored (recorded %v): %+v", record, r)
			}
			if got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200); string(got.Body) != "r" {
				t.Fatalf("content after restore: %q", got.Body)
			}
		}
	})
}
