package admission_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

var by = agentfs.Attribution{AgentID: "agent-1", RunID: "run-1"}

type testBundle struct {
	cfg   storage.Config
	store *storage.Store
}

// setup returns a core on a fresh schema and bucket; adjust, when given,
// changes its configuration first.
func setup(t *testing.T, adjust ...func(*admission.Config)) (*admission.Core, *testBundle) {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	// Long enough that no renewal runs during a test: a test lapses a
	// claim by seeding its lease in the past.
	cfg.IdempotencyLease = 10 * time.Minute
	store := storagetest.OpenConfig(t, cfg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	enqueuer, err := batch.NewEnqueuer(store.QueuePool(), log)
	if err != nil {
		t.Fatal(err)
	}
	c := admission.Config{Store: store, Queue: enqueuer, PublicURL: "http://agentfs.test", Log: log}
	for _, a := range adjust {
		a(&c)
	}
	core, err := admission.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return core, &testBundle{cfg: cfg, store: store}
}

// everything is what a token made with both scopes may do.
var everything = agentfs.AllScopes

func keyed(key string) agentfs.Caller {
	return agentfs.Caller{Subject: "s", Grant: agentfs.Grant{Scopes: everything}, Key: key, By: by, RequestID: "req_" + key}
}

var unkeyed = agentfs.Caller{Subject: "s", Grant: agentfs.Grant{Scopes: everything}, By: by, RequestID: "req_unkeyed"}

// newPut is a put of content at path as the HTTP door builds it.
func newPut(path, content string, replace bool) agentfs.Put {
	return agentfs.Put{Subject: "s", Path: path, ContentType: "text/plain", Replace: replace,
		Size: int64(len(content)), MaxBytes: 1 << 20, By: by}
}

func sum(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func putContent(ctx context.Context, core *admission.Core, who agentfs.Caller, path, content string, replace bool) (idempotency.Result, error) {
	return core.Put(ctx, who, newPut(path, content, replace), strings.NewReader(content))
}

// seedFile puts path unkeyed, as another writer would before the test
// begins, and returns the file's id.
func seedFile(t *testing.T, core *admission.Core, path, content string) string {
	t.Helper()
	return mustPutContent(t, core, unkeyed, path, content, false).Resource.ID
}

// mustPutContent is putContent that fails the test when the put fails.
func mustPutContent(t *testing.T, core *admission.Core, who agentfs.Caller, path, content string, replace bool) idempotency.Result {
	t.Helper()
	res, err := putContent(context.Background(), core, who, path, content, replace)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func fileOf(t *testing.T, res idempotency.Result) api.File {
	t.Helper()
	var f api.File
	if err := json.Unmarshal(res.Body, &f); err != nil || f.Object != "file" {
		t.Fatalf("not a file (%v): %d %s", err, res.Status, res.Body)
	}
	return f
}

func problemOf(t *testing.T, body []byte) problem.Problem {
	t.Helper()
	var p problem.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		t.Fatalf("not a problem (%v): %s", err, body)
	}
	return p
}

func (b *testBundle) objects(t *testing.T) int { return len(storagetest.ObjectKeys(t, b.cfg)) }

// wantObjects fails the test unless the bucket holds want objects; what
// follows the count in the message says why.
func (b *testBundle) wantObjects(t *testing.T, want int, why string) {
	t.Helper()
	if n := b.objects(t); n != want {
		t.Fatalf("%d objects%s", n, why)
	}
}

// wantOneVersion fails the test unless path was only ever held by one
// file, at version 1.
func (b *testBundle) wantOneVersion(t *testing.T, path string) {
	t.Helper()
	if v := b.versions(t, path); fmt.Sprint(v) != "[1]" {
		t.Fatalf("%s: versions %v, want one file at version 1", path, v)
	}
}

// versions lists every file that ever held path, with its version.
func (b *testBundle) versions(t *testing.T, path string) []int {
	t.Helper()
	files, err := b.store.ListFiles(context.Background(), "s", agentfs.FileFilter{Path: path, IncludeDeleted: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var v []int
	for _, f := range files {
		v = append(v, f.Version)
	}
	return v
}

func (b *testBundle) content(t *testing.T, id string) string {
	t.Helper()
	f, err := b.store.File(context.Background(), "s", id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.store.OpenBlob(context.Background(), f.BlobKey, 0, f.SizeBytes)
	return string(testkit.ReadAll(t, r, err))
}

// failingBody fails the test's expectation if anything reads it.
type failingBody struct{ read bool }

func (b *failingBody) Read([]byte) (int, error) {
	b.read = true
	return 0, errors.New("this body must not be read")
}

func TestPut(t *testing.T) {
	ctx := context.Background()

	t.Run("UnkeyedCreatesThenRefusesThePath", func(t *testing.T) {
		core, b := setup(t)
		res, err := putContent(ctx, core, unkeyed, "a.txt", "one", false)
		if err != nil || res.Status != 201 || res.Replayed {
			t.Fatalf("first put: %d replayed=%v %v", res.Status, res.Replayed, err)
		}
		f := fileOf(t, res)
		if res.Header["Location"] != "/v1/files/"+f.ID || res.Header["ETag"] != f.ETag || f.Version != 1 ||
			f.URL != "http://agentfs.test/v1/files/"+f.ID+"/content" || *f.RunID != by.RunID {
			t.Fatalf("first put answered %v %s", res.Header, res.Body)
		}
		_, err = putContent(ctx, core, unkeyed, "a.txt", "two", false)
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) || exists.ExistingFileID != f.ID {
			t.Fatalf("a second create: %v, want PathExistsError naming %s", err, f.ID)
		}
		res, err = putContent(ctx, core, unkeyed, "a.txt", "two", true)
		if err != nil || res.Status != 200 || fileOf(t, res).Version != 2 || res.Header["Location"] != "" {
			t.Fatalf("replace: %d %s %v", res.Status, res.Body, err)
		}
		res, err = putContent(ctx, core, unkeyed, "a.txt", "two", true)
		if err != nil || res.Status != 200 || fileOf(t, res).Version != 2 {
			t.Fatalf("replace with identical bytes: %d %s %v, want version 2 unchanged", res.Status, res.Body, err)
		}
		b.wantObjects(t, 2, ", want 2 (the identical replace's blob removed)")
	})

	t.Run("KeyedRepeatReplaysWithoutASecondBlob", func(t *testing.T) {
		core, b := setup(t)
		first, err := putContent(ctx, core, keyed("k1"), "k.txt", "content", false)
		if err != nil || first.Status != 201 || first.Replayed {
			t.Fatalf("first: %d %v", first.Status, err)
		}
		again, err := putContent(ctx, core, keyed("k1"), "k.txt", "content", false)
		if err != nil || !again.Replayed || !reflect.DeepEqual(again.Outcome, first.Outcome) {
			t.Fatalf("repeat: replayed=%v %v\n got %+v\nwant %+v", again.Replayed, err, again.Outcome, first.Outcome)
		}
		b.wantObjects(t, 1, " after a replay, want 1")
		b.wantOneVersion(t, "k.txt")
	})

	t.Run("ADigestAnswersARepeatBeforeTheBody", func(t *testing.T) {
		core, b := setup(t)
		p := newPut("d.txt", "content", false)
		p.Digest = sum("content")
		first, err := core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		if err != nil {
			t.Fatal(err)
		}
		body := &failingBody{}
		again, err := core.Put(ctx, keyed("k1"), p, body)
		if err != nil || !again.Replayed || again.Resource != first.Resource || body.read {
			t.Fatalf("repeat: replayed=%v %v, body read=%v", again.Replayed, err, body.read)
		}
		other := p
		other.Digest = sum("other")
		body = &failingBody{}
		var conflict *agentfs.ConflictError
		if _, err := core.Put(ctx, keyed("k1"), other, body); !errors.As(err, &conflict) || body.read {
			t.Fatalf("other digest: %v, body read=%v; want a conflict before the body", err, body.read)
		}
		b.wantObjects(t, 1, ", want 1")
	})

	t.Run("SameKeyOtherContentIsAConflict", func(t *testing.T) {
		core, b := setup(t)
		first := mustPutContent(t, core, keyed("k1"), "c.txt", "one", true)
		_, err := putContent(ctx, core, keyed("k1"), "c.txt", "two", true)
		var conflict *agentfs.ConflictError
		if !errors.As(err, &conflict) || conflict.Key != "k1" {
			t.Fatalf("other content: %v, want ConflictError for k1", err)
		}
		_, err = putContent(ctx, core, keyed("k1"), "elsewhere.txt", "one", true)
		if !errors.As(err, &conflict) {
			t.Fatalf("other path: %v, want ConflictError", err)
		}
		if got := b.content(t, first.Resource.ID); got != "one" || b.objects(t) != 1 {
			t.Fatalf("after conflicts: content %q, %d objects", got, b.objects(t))
		}
	})

	t.Run("AKeyInProgressIsRefused", func(t *testing.T) {
		core, b := setup(t)
		p := newPut("busy.txt", "content", false)
		claim, _, err := b.store.BeginKey(ctx, "s", "k1", "POST", "/v1/files", idempotency.PutRequest(p).Sum(), storage.KeyOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		defer claim.Close()
		_, err = core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		var busy *agentfs.InProgressError
		if !errors.As(err, &busy) || busy.Key != "k1" || busy.RetryAfter <= 0 {
			t.Fatalf("put while the key is held: %v, want InProgressError with a Retry-After", err)
		}
		if n := b.objects(t); n != 0 || len(b.versions(t, "busy.txt")) != 0 {
			t.Fatalf("a refused put left %d objects, files %v", n, b.versions(t, "busy.txt"))
		}
	})

	t.Run("ARecordedFailureReplaysAsTheSameProblem", func(t *testing.T) {
		core, b := setup(t)
		holderID := seedFile(t, core, "taken.txt", "first")
		_, err := putContent(ctx, core, keyed("k1"), "taken.txt", "second", false)
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) {
			t.Fatalf("put onto a live path: %v", err)
		}
		rec, err := b.store.Operation(ctx, "s", "k1")
		if err != nil || !rec.Completed || rec.Outcome.Status != 409 {
			t.Fatalf("the key holds %+v (%v), want the recorded 409", rec, err)
		}
		p := problemOf(t, rec.Outcome.Body)
		if p.Code != problem.PathExists || p.ExistingFileID != holderID || p.RequestID != "req_k1" {
			t.Fatalf("recorded problem %+v", p)
		}
		// Freeing the path does not change the answer: the key replays.
		if _, err := core.Delete(ctx, unkeyed, holderID, ""); err != nil {
			t.Fatal(err)
		}
		again, err := putContent(ctx, core, keyed("k1"), "taken.txt", "second", false)
		if err != nil || !again.Replayed || again.Status != 409 || !bytes.Equal(again.Body, rec.Outcome.Body) {
			t.Fatalf("repeat: %d replayed=%v %v %s, want the recorded 409", again.Status, again.Replayed, err, again.Body)
		}
		if v := b.versions(t, "taken.txt"); len(v) != 1 {
			t.Fatalf("files at the path %v, want only the deleted holder", v)
		}
	})

	t.Run("AReleasedFailureFreesTheKey", func(t *testing.T) {
		core, b := setup(t)
		p := newPut("r.txt", "content", false)
		p.Digest = sum("something else")
		_, err := core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		if !errors.Is(err, agentfs.ErrChecksumMismatch) {
			t.Fatalf("mismatched digest: %v", err)
		}
		if _, err := b.store.Operation(ctx, "s", "k1"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("the key holds something after a released failure: %v", err)
		}
		b.wantObjects(t, 0, " after a refused body")
		p.Digest = sum("content")
		res, err := core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		if err != nil || res.Replayed || res.Status != 201 {
			t.Fatalf("the same key again: %d replayed=%v %v, want it to run", res.Status, res.Replayed, err)
		}
	})

	t.Run("ALapsedClaimTakenOverLeavesTheLateOwnerNothing", func(t *testing.T) {
		core, b := setup(t)
		var taker idempotency.Result
		late := storagetest.OnFirstRead(strings.NewReader("late"), func() {
			// The owner pauses while its body streams; its lease lapses and
			// a repeat of the request takes the key over and commits.
			if _, err := b.store.Pool().Exec(ctx, `UPDATE idempotency_keys
				SET lease_expires_at = now() - interval '1 second' WHERE key = 'k1'`); err != nil {
				t.Error(err)
			}
			var err error
			if taker, err = putContent(ctx, core, keyed("k1"), "l.txt", "taker", true); err != nil {
				t.Errorf("takeover: %v", err)
			}
		})
		_, err := core.Put(ctx, keyed("k1"), newPut("l.txt", "late", true), late)
		var busy *agentfs.InProgressError
		if !errors.As(err, &busy) {
			t.Fatalf("the late owner: %v, want InProgressError", err)
		}
		if taker.Status != 201 || taker.Replayed {
			t.Fatalf("the taker: %d replayed=%v", taker.Status, taker.Replayed)
		}
		if v := b.versions(t, "l.txt"); fmt.Sprint(v) != "[1]" || b.content(t, taker.Resource.ID) != "taker" {
			t.Fatalf("versions %v holding %q, want version 1 holding the taker's bytes", v, b.content(t, taker.Resource.ID))
		}
		rec, err := b.store.Operation(ctx, "s", "k1")
		if err != nil || !bytes.Equal(rec.ContentHash, sum("taker")) || rec.Outcome.Resource != taker.Resource {
			t.Fatalf("the key records %+v (%v), want the taker's outcome", rec, err)
		}
		b.wantObjects(t, 1, ", want 1: the late owner's blob must go")
	})

	t.Run("AfterCommitSeesTheEffectAndItsRecord", func(t *testing.T) {
		var (
			store *storage.Store
			seen  []string
		)
		core, b := setup(t, func(c *admission.Config) {
			store = c.Store
			c.AfterCommit = func() {
				rec, err := store.Operation(ctx, "s", "k1")
				seen = append(seen, fmt.Sprintf("completed=%v err=%v", rec != nil && rec.Completed, err))
			}
		})
		mustPutContent(t, core, unkeyed, "free.txt", "x", false)
		res := mustPutContent(t, core, keyed("k1"), "a.txt", "x", false)
		mustPutContent(t, core, keyed("k1"), "a.txt", "x", false)
		if fmt.Sprint(seen) != "[completed=true err=<nil>]" || len(b.versions(t, "a.txt")) != 1 {
			t.Fatalf("AfterCommit saw %v for %s, want one call, after the record committed", seen, res.Resource.ID)
		}
	})

	t.Run("AKeyedPutWithoutALimitReplays", func(t *testing.T) {
		core, b := setup(t)
		p := newPut("nolimit.txt", "content", false)
		p.MaxBytes = 0 // no cap, as storage reads it
		first, err := core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := core.Put(ctx, keyed("k1"), p, strings.NewReader("content"))
		if err != nil || !again.Replayed || again.Resource != first.Resource {
			t.Fatalf("repeat of an uncapped keyed put: replayed=%v %v", again.Replayed, err)
		}
		b.wantObjects(t, 1, ", want 1")
	})
}

func TestDeleteAndRestore(t *testing.T) {
	ctx := context.Background()

	t.Run("AKeyedDeleteReplaysWithoutDeletingAgain", func(t *testing.T) {
		core, b := setup(t)
		id := seedFile(t, core, "d.txt", "x")
		first, err := core.Delete(ctx, keyed("del"), id, "")
		if err != nil || first.Status != 200 || fileOf(t, first).DeletedAt == nil {
			t.Fatalf("delete: %d %s %v", first.Status, first.Body, err)
		}
		if _, err := core.Restore(ctx, unkeyed, id); err != nil {
			t.Fatal(err)
		}
		again, err := core.Delete(ctx, keyed("del"), id, "")
		if err != nil || !again.Replayed || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("repeat: replayed=%v %v %s, want the recorded answer", again.Replayed, err, again.Body)
		}
		if f, err := b.store.File(ctx, "s", id); err != nil || !f.Live() {
			t.Fatalf("the replay deleted the restored file again: %+v %v", f, err)
		}
		if _, err := core.Delete(ctx, keyed("del"), storage.NewID("file"), ""); !errors.As(err, new(*agentfs.ConflictError)) {
			t.Fatalf("the key for another file: %v, want a conflict", err)
		}
	})

	t.Run("AKeyedRestoreReplays", func(t *testing.T) {
		core, b := setup(t)
		id := seedFile(t, core, "r.txt", "x")
		if _, err := core.Delete(ctx, unkeyed, id, ""); err != nil {
			t.Fatal(err)
		}
		first, err := core.Restore(ctx, keyed("res"), id)
		if err != nil || first.Status != 200 || fileOf(t, first).DeletedAt != nil {
			t.Fatalf("restore: %d %s %v", first.Status, first.Body, err)
		}
		if _, err := core.Delete(ctx, unkeyed, id, ""); err != nil {
			t.Fatal(err)
		}
		again, err := core.Restore(ctx, keyed("res"), id)
		if err != nil || !again.Replayed || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("repeat: replayed=%v %v", again.Replayed, err)
		}
		if f, _ := b.store.File(ctx, "s", id); f.Live() {
			t.Fatal("the replay restored the file again")
		}
	})

	t.Run("RecordedRefusalsReplay", func(t *testing.T) {
		core, _ := setup(t)
		createdID := seedFile(t, core, "m.txt", "x")
		for _, tc := range []struct {
			name, key, id, ifMatch, code string
		}{
			{"UnknownFile", "gone", storage.NewID("file"), "", problem.NotFound},
			{"IfMatchOfAnotherETag", "stale", createdID, `"` + strings.Repeat("0", 64) + `"`, problem.PreconditionFailed},
		} {
			if _, err := core.Delete(ctx, keyed(tc.key), tc.id, tc.ifMatch); err == nil {
				t.Fatalf("%s: the delete succeeded", tc.name)
			}
			again, err := core.Delete(ctx, keyed(tc.key), tc.id, tc.ifMatch)
			if err != nil || !again.Replayed || problemOf(t, again.Body).Code != tc.code {
				t.Fatalf("%s: repeat %d replayed=%v %v %s, want the recorded %s", tc.name, again.Status, again.Replayed, err, again.Body, tc.code)
			}
		}
	})
}

func TestCreateUpload(t *testing.T) {
	ctx := context.Background()
	req := agentfs.NewUpload{Subject: "s", Path: "u.bin", SizeBytes: 10, ContentType: "application/octet-stream",
		PartSize: agentfs.MinPartSize, TTL: time.Hour, By: by}

	t.Run("AReplayAnswersTheSessionsCurrentState", func(t *testing.T) {
		core, _ := setup(t)
		first, err := core.CreateUpload(ctx, keyed("u1"), req)
		if err != nil || first.Status != 201 || first.Header["Location"] == "" {
			t.Fatalf("create: %d %v %v", first.Status, first.Header, err)
		}
		if _, err := core.PutPart(ctx, unkeyed, first.Resource.ID, 1, strings.NewReader("0123456789"), 10, nil); err != nil {
			t.Fatal(err)
		}
		again, err := core.CreateUpload(ctx, keyed("u1"), req)
		if err != nil || !again.Replayed || again.Status != 200 {
			t.Fatalf("repeat: %d replayed=%v %v", again.Status, again.Replayed, err)
		}
		var u api.Upload
		if err := json.Unmarshal(again.Body, &u); err != nil || u.ID != first.Resource.ID || len(u.Parts) != 1 || u.Parts[0].PartNumber != 1 {
			t.Fatalf("repeat shows %s (%v), want the session with part 1", again.Body, err)
		}
		other := req
		other.SizeBytes = 11
		if _, err := core.CreateUpload(ctx, keyed("u1"), other); !errors.As(err, new(*agentfs.ConflictError)) {
			t.Fatalf("the key for another session: %v, want a conflict", err)
		}
	})

	t.Run("AnUnkeyedRepeatResumesTheSession", func(t *testing.T) {
		core, _ := setup(t)
		first, err := core.CreateUpload(ctx, unkeyed, req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := core.CreateUpload(ctx, unkeyed, req)
		if err != nil || again.Replayed || again.Status != 200 || again.Resource.ID != first.Resource.ID {
			t.Fatalf("repeat: %d %+v replayed=%v %v, want 200 with session %s", again.Status, again.Resource, again.Replayed, err, first.Resource.ID)
		}
	})

	t.Run("AKeyedCompleteReplaysTheFile", func(t *testing.T) {
		core, _ := setup(t)
		created, err := core.CreateUpload(ctx, unkeyed, req)
		if err != nil {
			t.Fatal(err)
		}
		id := created.Resource.ID
		if _, err := core.PutPart(ctx, unkeyed, id, 1, strings.NewReader("0123456789"), 10, nil); err != nil {
			t.Fatal(err)
		}
		first, err := core.CompleteUpload(ctx, keyed("c1"), id, agentfs.CompleteRequest{})
		if err != nil || first.Status != 201 || fileOf(t, first).SHA256 != fmt.Sprintf("%x", sum("0123456789")) {
			t.Fatalf("complete: %d %s %v", first.Status, first.Body, err)
		}
		again, err := core.CompleteUpload(ctx, keyed("c1"), id, agentfs.CompleteRequest{})
		if err != nil || !again.Replayed || !reflect.DeepEqual(again.Outcome, first.Outcome) {
			t.Fatalf("repeat: replayed=%v %v", again.Replayed, err)
		}
		plain, err := core.CompleteUpload(ctx, unkeyed, id, agentfs.CompleteRequest{})
		if err != nil || plain.Status != 200 || plain.Resource != first.Resource {
			t.Fatalf("unkeyed repeat: %d %+v %v, want 200 with the same file", plain.Status, plain.Resource, err)
		}
	})
}

func TestCreateBatch(t *testing.T) {
	ctx := context.Background()
	newBatch := func() *agentfs.Batch {
		return &agentfs.Batch{Items: []agentfs.BatchItem{{Op: agentfs.OpPut, Path: "b.txt", Content: []byte("x"), ContentType: "text/plain"}}}
	}
	raw := []byte(`{"operations":[{"op":"put","path":"b.txt","content":"x"}]}`)

	t.Run("AReplayAnswers200WithTheBatch", func(t *testing.T) {
		core, _ := setup(t)
		first, err := core.CreateBatch(ctx, keyed("b1"), newBatch(), raw, 0)
		if err != nil || first.Status != 202 || first.Header["Location"] != "/v1/batch/"+first.Resource.ID {
			t.Fatalf("create: %d %v %v", first.Status, first.Header, err)
		}
		// Key order and whitespace do not make another request.
		same := []byte(`{ "operations": [ {"content":"x", "path":"b.txt", "op":"put"} ] }`)
		again, err := core.CreateBatch(ctx, keyed("b1"), newBatch(), same, 0)
		if err != nil || !again.Replayed || again.Status != 200 || again.Resource != first.Resource {
			t.Fatalf("repeat: %d %+v replayed=%v %v", again.Status, again.Resource, again.Replayed, err)
		}
		var b api.Batch
		if err := json.Unmarshal(again.Body, &b); err != nil || b.ID != first.Resource.ID || b.Status != agentfs.BatchQueued ||
			b.Counts.Total != 1 || b.Counts.Pending != 1 {
			t.Fatalf("repeat shows %s (%v)", again.Body, err)
		}
		other := []byte(`{"operations":[{"op":"put","path":"b.txt","content":"y"}]}`)
		if _, err := core.CreateBatch(ctx, keyed("b1"), newBatch(), other, 0); !errors.As(err, new(*agentfs.ConflictError)) {
			t.Fatalf("the key with another body: %v, want a conflict", err)
		}
	})

	t.Run("RefusesABodyThatIsNotJSON", func(t *testing.T) {
		core, b := setup(t)
		_, err := core.CreateBatch(ctx, keyed("b1"), newBatch(), []byte(`{"operations":`), 0)
		p, _ := problem.From(err)
		if p.Code != problem.InvalidRequest {
			t.Fatalf("malformed body: %v", err)
		}
		if _, err := b.store.Operation(ctx, "s", "b1"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("a refused batch claimed its key: %v", err)
		}
	})
}

// TestRunItem drives items the way two workers that both hold a batch
// would: each item still commits once.
func TestRunItem(t *testing.T) {
	ctx := context.Background()

	t.Run("AnItemRunByTwoWorkersAtOnceAppliesOnce", func(t *testing.T) {
		core, b := setup(t)
		existingID := seedFile(t, core, "doomed.txt", "x")
		items := []agentfs.BatchItem{{Op: agentfs.OpDelete, FileID: existingID}}
		for i := range 20 {
			items = append(items, agentfs.BatchItem{Op: agentfs.OpPut, Path: fmt.Sprintf("p%02d", i),
				Content: []byte(fmt.Sprint(i)), ContentType: "text/plain"})
		}
		bt := startBatch(t, core, b, items...)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, it := range bt.Items {
					if err := core.RunItem(ctx, bt, it); err != nil {
						t.Errorf("item %d: %v", it.Index, err)
					}
				}
			}()
		}
		wg.Wait()
		got := b.batch(t, bt.ID)
		for _, it := range got.Items {
			if it.Status != agentfs.ItemSucceeded || it.Replayed || it.ResultID == "" {
				t.Fatalf("item %d: %s replayed=%v result %q error %s", it.Index, it.Status, it.Replayed, it.ResultID, it.Error)
			}
			if it.Op == agentfs.OpPut {
				b.wantOneVersion(t, it.Path)
			}
		}
		b.wantObjects(t, 21, ", want 21: every losing attempt's blob removed")
	})

	t.Run("AFailedItemCarriesTheBatchRequestAndItsIndex", func(t *testing.T) {
		core, b := setup(t)
		who := unkeyed
		who.RequestID = "req_x"
		bt := startBatchAs(t, core, b, who, agentfs.BatchItem{Op: agentfs.OpRestore, FileID: storage.NewID("file")})
		got := runFirstItem(t, core, b, bt)
		p := problemOf(t, got.Items[0].Error)
		if got.Items[0].Status != agentfs.ItemFailed || p.Code != problem.NotFound || p.RequestID != "req_x" ||
			p.Instance != "/v1/batch/"+bt.ID+"/items/0" {
			t.Fatalf("item: %s %+v", got.Items[0].Status, p)
		}
	})

	t.Run("AnUnknownOpFailsTheItem", func(t *testing.T) {
		core, b := setup(t)
		got := runFirstItem(t, core, b, startBatch(t, core, b, agentfs.BatchItem{Op: "rename"}))
		if p := problemOf(t, got.Items[0].Error); got.Items[0].Status != agentfs.ItemFailed || p.Code != problem.ValidationFailed {
			t.Fatalf("item: %s %+v", got.Items[0].Status, p)
		}
	})
}

// startBatch admits items as a batch of unkeyed and returns it started,
// as a runner sees it (its put items' contents not loaded).
func startBatch(t *testing.T, core *admission.Core, b *testBundle, items ...agentfs.BatchItem) *agentfs.Batch {
	t.Helper()
	return startBatchAs(t, core, b, unkeyed, items...)
}

// startBatchAs is startBatch for the caller who.
func startBatchAs(t *testing.T, core *admission.Core, b *testBundle, who agentfs.Caller, items ...agentfs.BatchItem) *agentfs.Batch {
	t.Helper()
	created, err := core.CreateBatch(context.Background(), who, &agentfs.Batch{Items: items}, []byte(`{}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := b.store.StartBatch(context.Background(), created.Resource.ID)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// runFirstItem runs the first item of a started batch and returns the
// batch as it then stands.
func runFirstItem(t *testing.T, core *admission.Core, b *testBundle, bt *agentfs.Batch) *agentfs.Batch {
	t.Helper()
	if err := core.RunItem(context.Background(), bt, bt.Items[0]); err != nil {
		t.Fatal(err)
	}
	return b.batch(t, bt.ID)
}

// batch reads the batch id back as the store has it.
func (b *testBundle) batch(t *testing.T, id string) *agentfs.Batch {
	t.Helper()
	got, err := b.store.Batch(context.Background(), "s", id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// commitAll commits prepared items as one group, each of which must
// commit.
func commitAll(t *testing.T, core *admission.Core, prepared []*admission.PreparedItem) {
	t.Helper()
	for i, err := range core.CommitItems(context.Background(), prepared) {
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
}

func textItem(path, content string) agentfs.BatchItem {
	return agentfs.BatchItem{Op: agentfs.OpPut, Path: path, Content: []byte(content), ContentType: "text/plain"}
}

// prepareAll prepares every item of bt, each of which must reach its
// transaction.
func prepareAll(t *testing.T, core *admission.Core, bt *agentfs.Batch) []*admission.PreparedItem {
	t.Helper()
	out := make([]*admission.PreparedItem, len(bt.Items))
	for i, it := range bt.Items {
		p, err := core.PrepareItem(context.Background(), bt, it, admission.ItemHint{})
		if err != nil || p == nil {
			t.Fatalf("prepare item %d: %v", i, err)
		}
		out[i] = p
	}
	return out
}

// eventXids maps each of these files to the transactions its events
// committed in (the xmin of their rows).
func (b *testBundle) eventXids(t *testing.T, ids ...string) map[string][]string {
	t.Helper()
	rows, err := b.store.Pool().Query(context.Background(),
		`SELECT file_id, xmin::text FROM events WHERE file_id = ANY($1) ORDER BY pos`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, xid string
		if err := rows.Scan(&id, &xid); err != nil {
			t.Fatal(err)
		}
		out[id] = append(out[id], xid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCommitItems commits prepared batch items as a runner does, several at
// a time.
func TestCommitItems(t *testing.T) {
	ctx := context.Background()

	t.Run("AGroupCommitsInOneTransactionWithItsKeysRecords", func(t *testing.T) {
		core, b := setup(t)
		k := textItem("k.txt", "keyed")
		k.Key = "item-k"
		bt := startBatch(t, core, b, textItem("a.txt", "a"), k, textItem("b.txt", "b"), textItem("c.txt", "c"))
		commitAll(t, core, prepareAll(t, core, bt))
		got := b.batch(t, bt.ID)
		var ids []string
		for _, it := range got.Items {
			if it.Status != agentfs.ItemSucceeded || it.Replayed || it.ResultID == "" {
				t.Fatalf("item %d: %s replayed=%v result %q error %s", it.Index, it.Status, it.Replayed, it.ResultID, it.Error)
			}
			if c := b.content(t, it.ResultID); c != []string{"a", "keyed", "b", "c"}[it.Index] {
				t.Fatalf("item %d left %q", it.Index, c)
			}
			ids = append(ids, it.ResultID)
		}
		xids := b.eventXids(t, ids...)
		for _, id := range ids {
			if len(xids[id]) != 1 || xids[id][0] != xids[ids[0]][0] {
				t.Fatalf("events by file %v: want one event each, all in one transaction", xids)
			}
		}
		rec, err := b.store.Operation(ctx, "s", "item-k")
		if err != nil || !rec.Completed || rec.Outcome.Status != 201 || rec.Outcome.Resource.ID != got.Items[1].ResultID {
			t.Fatalf("the keyed item's record: %+v %v, want a completed 201 naming %s", rec, err, got.Items[1].ResultID)
		}
		res, err := putContent(ctx, core, keyed("item-k"), "k.txt", "keyed", false)
		if err != nil || !res.Replayed || res.Resource.ID != got.Items[1].ResultID {
			t.Fatalf("a standalone put with the item's key: %+v %v, want a replay", res, err)
		}
		b.wantObjects(t, 4, ", want 4")
	})

	t.Run("AnItemThatFailsInTheGroupCostsTheOthersNothing", func(t *testing.T) {
		core, b := setup(t)
		k := textItem("k.txt", "keyed")
		k.Key = "item-k"
		bt := startBatch(t, core, b, textItem("a.txt", "a"), textItem("taken.txt", "mine"), k, textItem("c.txt", "c"))
		prepared := prepareAll(t, core, bt)
		// The path is taken after the item was decided and before it commits:
		// its effect fails in the group's transaction.
		holderID := seedFile(t, core, "taken.txt", "theirs")
		commitAll(t, core, prepared)
		got := b.batch(t, bt.ID)
		var ids []string
		for _, i := range []int{0, 2, 3} {
			it := got.Items[i]
			if it.Status != agentfs.ItemSucceeded || it.ResultID == "" || b.content(t, it.ResultID) != []string{"a", "", "keyed", "c"}[i] {
				t.Fatalf("item %d: %s result %q error %s", i, it.Status, it.ResultID, it.Error)
			}
			ids = append(ids, it.ResultID)
		}
		failed := got.Items[1]
		if p := problemOf(t, failed.Error); failed.Status != agentfs.ItemFailed || p.Code != problem.PathExists ||
			p.ExistingFileID != holderID || p.Instance != "/v1/batch/"+bt.ID+"/items/1" {
			t.Fatalf("item 1: %s %+v, want PATH_EXISTS naming %s", failed.Status, p, holderID)
		}
		if c := b.content(t, holderID); c != "theirs" {
			t.Fatalf("the holder holds %q", c)
		}
		xids := b.eventXids(t, ids...)
		if xids[ids[0]][0] == xids[ids[1]][0] || xids[ids[1]][0] == xids[ids[2]][0] {
			t.Fatalf("events by file %v: after the failure each item commits in a transaction of its own", xids)
		}
		if rec, err := b.store.Operation(ctx, "s", "item-k"); err != nil || rec.Outcome.Resource.ID != got.Items[2].ResultID {
			t.Fatalf("the keyed item's record: %+v %v", rec, err)
		}
		b.wantObjects(t, 4, ", want 4: the failed item's blob removed")
	})

	t.Run("AnItemRunElsewhereEndsAsNoLongerPending", func(t *testing.T) {
		core, b := setup(t)
		bt := startBatch(t, core, b, textItem("a.txt", "a"), textItem("b.txt", "b"), textItem("c.txt", "c"))
		prepared := prepareAll(t, core, bt)
		if err := core.RunItem(ctx, bt, bt.Items[1]); err != nil { // another worker
			t.Fatal(err)
		}
		errs := core.CommitItems(ctx, prepared)
		if errs[0] != nil || !errors.Is(errs[1], storage.ErrItemDone) || errs[2] != nil {
			t.Fatalf("results %v, want item 1 no longer pending and the others committed", errs)
		}
		got := b.batch(t, bt.ID)
		for _, it := range got.Items {
			if it.Status != agentfs.ItemSucceeded || b.content(t, it.ResultID) != []string{"a", "b", "c"}[it.Index] {
				t.Fatalf("item %d: %s %q", it.Index, it.Status, it.ResultID)
			}
			b.wantOneVersion(t, it.Path)
		}
		b.wantObjects(t, 3, ", want 3: the losing attempt's blob removed")
	})

	t.Run("FailuresAndReplaysBeforeTheTransactionAreRecordedWhenTheyCommit", func(t *testing.T) {
		core, b := setup(t)
		first := mustPutContent(t, core, keyed("seen"), "seen.txt", "same", false)
		mustPutContent(t, core, unkeyed, "taken.txt", "theirs", false)
		replay := textItem("seen.txt", "same")
		replay.Key = "seen"
		bt := startBatch(t, core, b, replay, textItem("taken.txt", "mine"), textItem("new.txt", "new"))
		prepared := prepareAll(t, core, bt)
		before := b.batch(t, bt.ID)
		for _, it := range before.Items {
			if it.Status != agentfs.ItemPending {
				t.Fatalf("item %d is %s before it commits", it.Index, it.Status)
			}
		}
		commitAll(t, core, prepared)
		got := b.batch(t, bt.ID)
		if it := got.Items[0]; it.Status != agentfs.ItemSucceeded || !it.Replayed || it.ResultID != first.Resource.ID {
			t.Fatalf("item 0: %s replayed=%v %q, want a replay naming %s", it.Status, it.Replayed, it.ResultID, first.Resource.ID)
		}
		if it := got.Items[1]; it.Status != agentfs.ItemFailed || problemOf(t, it.Error).Code != problem.PathExists {
			t.Fatalf("item 1: %s %s, want PATH_EXISTS", it.Status, it.Error)
		}
		if it := got.Items[2]; it.Status != agentfs.ItemSucceeded || b.content(t, it.ResultID) != "new" {
			t.Fatalf("item 2: %s %q", it.Status, it.ResultID)
		}
	})

	// A keyed put that fails before its bytes are read (the path is taken)
	// records its failure under the key with the hash of its content, as a
	// standalone upload would: the same key and bytes sent standalone later
	// replay that failure, other bytes conflict. Both ways an item is
	// prepared: told the live file at its path (as the runner does), or not.
	t.Run("AKeyedItemThatFailsRecordsItsWholeContent", func(t *testing.T) {
		for _, known := range []bool{true, false} {
			t.Run(fmt.Sprintf("LiveFileKnown=%v", known), func(t *testing.T) { keyedItemFails(t, known) })
		}
	})

	// A group whose COMMIT fails (here a deferred trigger raises for one of
	// its files) leaves every item pending, none recorded as failed: the
	// commit's outcome is not known to the items, and the batch's retry
	// runs each again.
	t.Run("AGroupWhoseCommitFailsLeavesEveryItemPending", func(t *testing.T) {
		core, b := setup(t)
		for _, stmt := range []string{
			`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom at commit'; END $$`,
			`CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON files DEFERRABLE INITIALLY DEFERRED
			 FOR EACH ROW WHEN (NEW.path = 'boom.txt') EXECUTE FUNCTION boom()`,
		} {
			if _, err := b.store.Pool().Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		k := textItem("a.txt", "a")
		k.Key = "group-a"
		bt := startBatch(t, core, b, k, textItem("boom.txt", "b"), textItem("c.txt", "c"))
		errs := core.CommitItems(ctx, prepareAll(t, core, bt))
		for i, err := range errs {
			if !errors.Is(err, agentfs.ErrUnavailable) {
				t.Fatalf("item %d: %v, want a failure the retry may pass", i, err)
			}
		}
		got := b.batch(t, bt.ID)
		for _, it := range got.Items {
			if it.Status != agentfs.ItemPending {
				t.Fatalf("item %d is %s after a commit that failed, want pending", it.Index, it.Status)
			}
		}
		if _, err := b.store.Operation(ctx, "s", "group-a"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("the key of item 0: %v, want released", err)
		}
	})

	// Items grouped as independent that are not (another request moved a
	// file since the batch was planned) still take effect in index order:
	// a put at x before the delete of the file now at x fails as it would
	// have alone, and is not let through by the delete after it.
	t.Run("AGroupAppliesItsItemsInIndexOrder", func(t *testing.T) {
		core, b := setup(t)
		res := mustPutContent(t, core, unkeyed, "y.txt", "moved", false)
		f := fileOf(t, res)
		bt := startBatch(t, core, b, textItem("x.txt", "new"), agentfs.BatchItem{Op: agentfs.OpDelete, FileID: f.ID})
		prepared := prepareAll(t, core, bt)
		if _, err := core.Move(ctx, unkeyed, agentfs.Move{FileID: f.ID, Path: "x.txt"}); err != nil {
			t.Fatal(err)
		}
		commitAll(t, core, prepared)
		got := b.batch(t, bt.ID)
		if it := got.Items[0]; it.Status != agentfs.ItemFailed || problemOf(t, it.Error).Code != problem.PathExists {
			t.Fatalf("item 0 (put x.txt): %s %s, want PATH_EXISTS: the moved file was there", it.Status, it.Error)
		}
		if it := got.Items[1]; it.Status != agentfs.ItemSucceeded {
			t.Fatalf("item 1 (delete): %s %s", it.Status, it.Error)
		}
	})

	t.Run("AnAbandonedItemStaysPendingAndLeavesNothing", func(t *testing.T) {
		core, b := setup(t)
		k := textItem("k.txt", "keyed")
		k.Key = "item-k"
		bt := startBatch(t, core, b, k)
		p := prepareAll(t, core, bt)[0]
		core.AbandonItem(ctx, p)
		b.wantObjects(t, 0, " after the abandon, want 0")
		if _, err := b.store.Operation(ctx, "s", "item-k"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("the item's key after the abandon: %v, want released", err)
		}
		if err := core.RunItem(ctx, bt, bt.Items[0]); err != nil {
			t.Fatal(err)
		}
		got, err := b.store.Batch(ctx, "s", bt.ID)
		if err != nil || got.Items[0].Status != agentfs.ItemSucceeded || b.content(t, got.Items[0].ResultID) != "keyed" {
			t.Fatalf("the item run again: %+v %v", got, err)
		}
	})
}

// keyedItemFails is AKeyedItemThatFailsRecordsItsWholeContent, the item
// prepared knowing the live file at its path or not.
func keyedItemFails(t *testing.T, known bool) {
	ctx := context.Background()
	core, b := setup(t)
	takenID := seedFile(t, core, "taken.txt", "theirs")
	it := textItem("taken.txt", "mine")
	it.Key = "item-taken"
	bt := startBatch(t, core, b, it)
	hint := admission.ItemHint{}
	if known {
		live, err := b.store.File(ctx, "s", takenID)
		if err != nil {
			t.Fatal(err)
		}
		hint = admission.ItemHint{Known: true, Live: live}
	}
	p, err := core.PrepareItem(ctx, bt, bt.Items[0], hint)
	if err != nil || p == nil {
		t.Fatalf("prepare (known %v): %v", known, err)
	}
	if err := core.CommitItems(ctx, []*admission.PreparedItem{p})[0]; err != nil {
		t.Fatalf("commit (known %v): %v", known, err)
	}
	got, err := b.store.Batch(ctx, "s", bt.ID)
	if err != nil || got.Items[0].Status != agentfs.ItemFailed || problemOf(t, got.Items[0].Error).Code != problem.PathExists {
		t.Fatalf("item (known %v): %+v %v, want PATH_EXISTS", known, got.Items[0], err)
	}
	res, err := putContent(ctx, core, keyed("item-taken"), "taken.txt", "mine", false)
	if err != nil || !res.Replayed || res.Status != http.StatusConflict {
		t.Fatalf("the same key and bytes standalone (known %v): %+v %v, want the recorded PATH_EXISTS replayed", known, res, err)
	}
	var conflict *agentfs.ConflictError
	if _, err := putContent(ctx, core, keyed("item-taken"), "taken.txt", "", false); !errors.As(err, &conflict) {
		t.Fatalf("the same key with no bytes (known %v): %v, want IDEMPOTENCY_CONFLICT", known, err)
	}
}

// TestPutAgainst: a put decided against the live file its caller already
// knows (MCP edit_file's read; nil for write_file's create) skips the
// lookup, and its commit decides again: a stale file or a wrong "none"
// ends as Put would have ended, leaving no blob behind.
func TestPutAgainst(t *testing.T) {
	ctx := context.Background()
	core, b := setup(t)
	putAgainst := func(path, content string, replace bool, ifMatch string, live *agentfs.File) (idempotency.Result, error) {
		put := newPut(path, content, replace)
		put.IfMatch = ifMatch
		return core.PutAgainst(ctx, unkeyed, put, strings.NewReader(content), live)
	}

	t.Run("CreateAgainstNone", func(t *testing.T) {
		res, err := putAgainst("new.txt", "fresh", false, "", nil)
		if err != nil || res.Status != http.StatusCreated {
			t.Fatalf("create: %v %d %s", err, res.Status, res.Body)
		}
		if got := b.content(t, fileOf(t, res).ID); got != "fresh" {
			t.Fatalf("content %q", got)
		}
	})

	t.Run("NoneButAFileIsThere", func(t *testing.T) {
		id := seedFile(t, core, "taken.txt", "first")
		before := b.objects(t)
		res, err := putAgainst("taken.txt", "second", false, "", nil)
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) || exists.ExistingFileID != id {
			t.Fatalf("a create against none where a file is: %v (%d %s), want PathExistsError naming %s", err, res.Status, res.Body, id)
		}
		b.wantObjects(t, before, " after a refused create: its blob stays behind")
		b.wantOneVersion(t, "taken.txt")
		if got := b.content(t, id); got != "first" {
			t.Fatalf("content %q", got)
		}
		// Replacing against none finds the file at commit and replaces it.
		res, err = putAgainst("taken.txt", "third", true, "", nil)
		if err != nil || res.Status != http.StatusOK || fileOf(t, res).ID != id {
			t.Fatalf("replace against none: %v %d %s", err, res.Status, res.Body)
		}
		if got := b.content(t, id); got != "third" {
			t.Fatalf("content %q", got)
		}
	})

	t.Run("AgainstTheFileRead", func(t *testing.T) {
		id := seedFile(t, core, "edit.txt", "v1")
		read, err := b.store.File(ctx, "s", id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := putAgainst("edit.txt", "v2", true, read.ETag(), read)
		if err != nil || res.Status != http.StatusOK || fileOf(t, res).ID != id || fileOf(t, res).Version != 2 {
			t.Fatalf("replace against the read: %v %d %s", err, res.Status, res.Body)
		}
		// The file read is stale now: a conditional replace against it is
		// refused, whatever the caller believed, and leaves no blob.
		before := b.objects(t)
		res, err = putAgainst("edit.txt", "v3", true, read.ETag(), read)
		if err == nil {
			t.Fatalf("a replace against a stale read was answered %d %s", res.Status, res.Body)
		}
		if !errors.Is(err, agentfs.ErrPreconditionFailed) {
			t.Fatalf("want a failed precondition, got %v", err)
		}
		b.wantObjects(t, before, " after a refused replace: its blob stays behind")
		if got := b.content(t, id); got != "v2" {
			t.Fatalf("content %q, want v2", got)
		}
		// Unconditional, it replaces what is there now.
		res, err = putAgainst("edit.txt", "v4", true, "", read)
		if err != nil || res.Status != http.StatusOK || fileOf(t, res).Version != 3 {
			t.Fatalf("unconditional replace against a stale read: %v %d %s", err, res.Status, res.Body)
		}
	})
}
