package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/telemetry/logtest"
)

// by is the attribution of every batch request in these tests.
var by = agentfs.Attribution{AgentID: "agent-1", RunID: "run-1"}

// caller is who asks for the batches: subject s, request req_x.
var caller = agentfs.Caller{Subject: "s", Grant: agentfs.Grant{Scopes: agentfs.AllScopes}, By: by, RequestID: "req_x"}

// instance is one AgentFS process: its own store (pools), core and runner.
type instance struct {
	store  *storage.Store
	core   *admission.Core
	runner *batch.Runner
}

type testBundle struct {
	cfg  storage.Config
	logs *logtest.Buffer
}

// setup opens a fresh schema and bucket and one instance on it, whose
// runner is not started yet (start it with start).
func setup(t *testing.T) (*instance, *testBundle) {
	t.Helper()
	t.Parallel()
	b := &testBundle{cfg: storagetest.Config(t), logs: &logtest.Buffer{}}
	b.logs.ShowOnFailure(t, "")
	return newInstance(t, b), b
}

// newInstance opens another process's worth of AgentFS on the bundle's
// schema and bucket.
func newInstance(t *testing.T, b *testBundle) *instance {
	t.Helper()
	store := storagetest.OpenConfig(t, b.cfg)
	log := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	enqueuer, err := batch.NewEnqueuer(store.QueuePool(), log)
	if err != nil {
		t.Fatal(err)
	}
	core, err := admission.New(admission.Config{Store: store, Queue: enqueuer, PublicURL: "http://agentfs.test", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := batch.NewRunner(store, core, batch.Config{Workers: 2, RescueAfter: 30 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{store: store, core: core, runner: runner}
}

// start runs the instance's workers until the test ends.
func (in *instance) start(t *testing.T) {
	t.Helper()
	if err := in.runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.runner.Stop(context.Background()) })
}

// createBatch admits items as one batch request of caller and returns its id.
func (in *instance) createBatch(t *testing.T, who agentfs.Caller, items ...agentfs.BatchItem) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"operations": items})
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.core.CreateBatch(context.Background(), who, &agentfs.Batch{Items: items}, raw, 0)
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	if res.Status != 202 || res.Resource.Object != "batch" {
		t.Fatalf("create batch answered %d %+v: %s", res.Status, res.Resource, res.Body)
	}
	return res.Resource.ID
}

// await waits for the batch to end and returns it.
func (in *instance) await(t *testing.T, id string) *agentfs.Batch {
	t.Helper()
	b, err := in.store.AwaitBatch(context.Background(), "s", id, 2*time.Minute)
	if err != nil {
		t.Fatalf("await batch: %v", err)
	}
	if !b.Terminal() {
		t.Fatalf("batch %s still %s: %s", id, b.Status, describe(b))
	}
	return b
}

func describe(b *agentfs.Batch) string {
	var s strings.Builder
	for _, it := range b.Items {
		fmt.Fprintf(&s, "\n  %d %s %s %s replayed=%v result=%s error=%s", it.Index, it.Op, it.Path, it.Status, it.Replayed, it.ResultID, it.Error)
	}
	return s.String()
}

// put stores content at path as a standalone request of who.
func (in *instance) put(t *testing.T, who agentfs.Caller, path, content string) (idempotency.Result, error) {
	t.Helper()
	return in.core.Put(context.Background(), who, agentfs.Put{Subject: who.Subject, Path: path, ContentType: "text/plain",
		Size: int64(len(content)), MaxBytes: 1 << 20, By: who.By}, strings.NewReader(content))
}

func (in *instance) mustPut(t *testing.T, path, content string) string {
	t.Helper()
	res, err := in.put(t, caller, path, content)
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return res.Resource.ID
}

func (in *instance) file(t *testing.T, id string) *agentfs.File {
	t.Helper()
	f, err := in.store.File(context.Background(), "s", id)
	if err != nil {
		t.Fatalf("file %s: %v", id, err)
	}
	return f
}

// filesAt lists every file that ever held path.
func (in *instance) filesAt(t *testing.T, path string) []*agentfs.File {
	t.Helper()
	files, err := in.store.ListFiles(context.Background(), "s", agentfs.FileFilter{Path: path, IncludeDeleted: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func (in *instance) content(t *testing.T, f *agentfs.File) string {
	t.Helper()
	r, err := in.store.OpenBlob(context.Background(), f.BlobKey, 0, f.SizeBytes)
	return string(testkit.ReadAll(t, r, err))
}

func putItem(path, content string) agentfs.BatchItem {
	return agentfs.BatchItem{Op: agentfs.OpPut, Path: path, Content: []byte(content), ContentType: "text/plain"}
}

func itemProblem(t *testing.T, it agentfs.BatchItem) problem.Problem {
	t.Helper()
	var p problem.Problem
	if err := json.Unmarshal(it.Error, &p); err != nil {
		t.Fatalf("item %d error %q: %v", it.Index, it.Error, err)
	}
	return p
}

func TestRunner(t *testing.T) {
	t.Run("RunsEveryKindOfItemToSucceeded", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		a := in.mustPut(t, "a.txt", "alpha")
		gone := in.mustPut(t, "gone.txt", "gone")
		if _, err := in.core.Delete(context.Background(), caller, gone, ""); err != nil {
			t.Fatal(err)
		}
		id := in.createBatch(t, caller,
			putItem("new.txt", "hello"),
			agentfs.BatchItem{Op: agentfs.OpCopy, FileID: a, Path: "copy.txt"},
			agentfs.BatchItem{Op: agentfs.OpDelete, FileID: a},
			agentfs.BatchItem{Op: agentfs.OpRestore, FileID: gone},
		)
		b := in.await(t, id)
		if b.Status != agentfs.BatchSucceeded || b.StartedAt == nil || b.CompletedAt == nil {
			t.Fatalf("batch %s (started %v, completed %v): %s", b.Status, b.StartedAt, b.CompletedAt, describe(b))
		}
		for _, it := range b.Items {
			if it.Status != agentfs.ItemSucceeded || it.Replayed || it.ResultID == "" {
				t.Fatalf("item %d: %s", it.Index, describe(b))
			}
		}
		created := in.file(t, b.Items[0].ResultID)
		if created.Path != "new.txt" || in.content(t, created) != "hello" || created.Version != 1 ||
			created.AgentID != by.AgentID || created.RunID != by.RunID {
			t.Fatalf("put item left %+v", created)
		}
		copied := in.file(t, b.Items[1].ResultID)
		if copied.Path != "copy.txt" || copied.ID == a || in.content(t, copied) != "alpha" || copied.ContentType != "text/plain" {
			t.Fatalf("copy item left %+v", copied)
		}
		if f := in.file(t, a); f.Live() || b.Items[2].ResultID != a {
			t.Fatalf("delete item: %s is live=%v, item result %s", a, f.Live(), b.Items[2].ResultID)
		}
		if f := in.file(t, gone); !f.Live() || b.Items[3].ResultID != gone {
			t.Fatalf("restore item: %s is live=%v, item result %s", gone, f.Live(), b.Items[3].ResultID)
		}
	})

	t.Run("EndsPartiallySucceededWithTheProblemAStandaloneRequestWouldGet", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		holder := in.mustPut(t, "taken.txt", "first")
		id := in.createBatch(t, caller, putItem("taken.txt", "second"), putItem("free.txt", "free"))
		b := in.await(t, id)
		if b.Status != agentfs.BatchPartiallySucceeded {
			t.Fatalf("batch %s: %s", b.Status, describe(b))
		}
		failed, ok := b.Items[0], b.Items[1]
		p := itemProblem(t, failed)
		if failed.Status != agentfs.ItemFailed || failed.ResultID != "" || p.Code != problem.PathExists ||
			p.Status != 409 || p.ExistingFileID != holder {
			t.Fatalf("item 0: %s %+v, want PATH_EXISTS naming %s", failed.Status, p, holder)
		}
		if p.RequestID != "req_x" || p.Instance != "/v1/batch/"+id+"/items/0" {
			t.Fatalf("item 0's problem names request %q and instance %q, want req_x and /v1/batch/%s/items/0", p.RequestID, p.Instance, id)
		}
		if ok.Status != agentfs.ItemSucceeded || len(ok.Error) != 0 {
			t.Fatalf("item 1: %s", describe(b))
		}
		if f := in.file(t, holder); f.Version != 1 || in.content(t, f) != "first" {
			t.Fatalf("the failed item touched the holder: %+v", f)
		}
	})

	t.Run("EndsFailedWhenNoItemSucceeds", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		missing := storage.NewID("file")
		id := in.createBatch(t, caller,
			agentfs.BatchItem{Op: agentfs.OpDelete, FileID: missing},
			agentfs.BatchItem{Op: agentfs.OpRestore, FileID: missing},
			agentfs.BatchItem{Op: agentfs.OpCopy, FileID: missing, Path: "copy.txt"},
		)
		b := in.await(t, id)
		if b.Status != agentfs.BatchFailed {
			t.Fatalf("batch %s: %s", b.Status, describe(b))
		}
		for _, it := range b.Items {
			p := itemProblem(t, it)
			if it.Status != agentfs.ItemFailed || p.Code != problem.NotFound ||
				p.Instance != fmt.Sprintf("/v1/batch/%s/items/%d", id, it.Index) || p.RequestID != "req_x" {
				t.Fatalf("item %d: %s %+v, want NOT_FOUND", it.Index, it.Status, p)
			}
		}
		if files := in.filesAt(t, "copy.txt"); len(files) != 0 {
			t.Fatalf("a failed copy left %d files", len(files))
		}
	})

	t.Run("ResumesAtTheFirstPendingItem", func(t *testing.T) {
		in, _ := setup(t)
		id := in.createBatch(t, caller, putItem("p0", "0"), putItem("p1", "1"), putItem("p2", "2"), putItem("p3", "3"))
		// A worker died after items 0 and 1 were done. Their effects are not
		// here, so applying them again would show.
		seed(t, in.store, `UPDATE batches SET status = 'running', started_at = now() - interval '1 minute' WHERE id = $1`, id)
		seed(t, in.store, `UPDATE batch_items SET status = 'succeeded' WHERE batch_id = $1 AND idx < 2`, id)
		in.start(t)
		b := in.await(t, id)
		if b.Status != agentfs.BatchSucceeded {
			t.Fatalf("batch %s: %s", b.Status, describe(b))
		}
		for i, want := range []int{0, 0, 1, 1} {
			if files := in.filesAt(t, fmt.Sprintf("p%d", i)); len(files) != want {
				t.Fatalf("p%d has %d files, want %d: %s", i, len(files), want, describe(b))
			}
		}
		for _, it := range b.Items[2:] {
			if f := in.file(t, it.ResultID); f.Version != 1 || f.Path != it.Path {
				t.Fatalf("item %d left %+v", it.Index, f)
			}
		}
	})

	t.Run("TwoRunnersApplyEachItemOnce", func(t *testing.T) {
		one, b := setup(t)
		two := newInstance(t, b)
		one.start(t)
		two.start(t)
		const items = 200
		var batches []string
		big := make([]agentfs.BatchItem, items)
		for i := range big {
			big[i] = putItem(fmt.Sprintf("big/%03d", i), fmt.Sprintf("content %d", i))
		}
		batches = append(batches, one.createBatch(t, caller, big...))
		for k := range 4 { // more batches, so that both runners have work
			small := make([]agentfs.BatchItem, 10)
			for i := range small {
				small[i] = putItem(fmt.Sprintf("small/%d/%d", k, i), "x")
			}
			in := []*instance{one, two}[k%2]
			batches = append(batches, in.createBatch(t, caller, small...))
		}
		for _, id := range batches {
			if got := two.await(t, id); got.Status != agentfs.BatchSucceeded {
				t.Fatalf("batch %s %s: %s", id, got.Status, describe(got))
			}
		}
		var files, maxVersion, paths int
		err := one.store.Pool().QueryRow(context.Background(),
			`SELECT count(*), max(version), count(DISTINCT path) FROM files WHERE subject = 's'`).Scan(&files, &maxVersion, &paths)
		if err != nil {
			t.Fatal(err)
		}
		if want := items + 4*10; files != want || paths != want || maxVersion != 1 {
			t.Fatalf("%d files at %d paths, highest version %d; want %d files each at version 1", files, paths, maxVersion, want)
		}
		var done int
		err = one.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM batch_items WHERE status = 'succeeded' AND NOT replayed AND result_id IS NOT NULL`).Scan(&done)
		if err != nil || done != files {
			t.Fatalf("%d items succeeded with a file (%v), want %d", done, err, files)
		}
	})

	t.Run("AnItemKeySharedWithAStandalonePutReplays", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		keyed := caller
		keyed.Key = "shared-1"
		first, err := in.put(t, keyed, "k.txt", "same")
		if err != nil {
			t.Fatal(err)
		}
		keyed.Key = "shared-2"
		if _, err := in.put(t, keyed, "x.txt", "one"); err != nil {
			t.Fatal(err)
		}
		same, other := putItem("k.txt", "same"), putItem("x.txt", "two")
		same.Key, other.Key = "shared-1", "shared-2"
		id := in.createBatch(t, caller, same, other)
		b := in.await(t, id)
		if b.Status != agentfs.BatchPartiallySucceeded {
			t.Fatalf("batch %s: %s", b.Status, describe(b))
		}
		if it := b.Items[0]; it.Status != agentfs.ItemSucceeded || !it.Replayed || it.ResultID != first.Resource.ID {
			t.Fatalf("item with the standalone put's key and content: %s, want replayed naming %s", describe(b), first.Resource.ID)
		}
		it := b.Items[1]
		p := itemProblem(t, it)
		if it.Status != agentfs.ItemFailed || it.Replayed || p.Code != problem.IdempotencyConflict || p.RequestID != "req_x" ||
			p.Instance != "/v1/batch/"+id+"/items/1" {
			t.Fatalf("item with the key of other content: %s %+v, want IDEMPOTENCY_CONFLICT", it.Status, p)
		}
		for path, want := range map[string]string{"k.txt": "same", "x.txt": "one"} {
			files := in.filesAt(t, path)
			if len(files) != 1 || files[0].Version != 1 || in.content(t, files[0]) != want {
				t.Fatalf("%s: %d files, want one at version 1 holding %q", path, len(files), want)
			}
		}
	})

	t.Run("AKeyRecordedByAnItemReplaysForAStandalonePut", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		item := putItem("i.txt", "from the batch")
		item.Key = "item-key"
		b := in.await(t, in.createBatch(t, caller, item))
		if b.Items[0].Status != agentfs.ItemSucceeded || b.Items[0].Replayed {
			t.Fatalf("batch: %s", describe(b))
		}
		keyed := caller
		keyed.Key = "item-key"
		res, err := in.put(t, keyed, "i.txt", "from the batch")
		if err != nil || !res.Replayed || res.Status != 201 || res.Resource.ID != b.Items[0].ResultID {
			t.Fatalf("standalone put with the item's key: %+v %v, want a replayed 201 naming %s", res, err, b.Items[0].ResultID)
		}
	})

	t.Run("AnItemKeyInProgressElsewhereIsWaitedFor", func(t *testing.T) {
		in, b := setup(t)
		item, claim := in.heldItem(t, "busy.txt")
		id := in.createBatch(t, caller, item)
		in.start(t)
		b.awaitKeyWait(t)
		got, err := in.store.Batch(context.Background(), "s", id)
		if err != nil || got.Status != agentfs.BatchRunning || got.Items[0].Status != agentfs.ItemPending {
			t.Fatalf("while the key is held elsewhere: %v %s %s", err, got.Status, describe(got))
		}
		if err := claim.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := in.await(t, id)
		if it := done.Items[0]; done.Status != agentfs.BatchSucceeded || it.Replayed || in.file(t, it.ResultID).Version != 1 {
			t.Fatalf("after the key was released: %s %s", done.Status, describe(done))
		}
	})
}

// seed runs one statement against the store's rows, to place them as a
// crash would have left them.
func seed(t *testing.T, store *storage.Store, sql string, args ...any) {
	t.Helper()
	if _, err := store.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("seed %q: %v", sql, err)
	}
}

// heldItem is a keyed put of path (key "busy") whose key a standalone
// request holds, in progress, until the test releases the claim.
func (in *instance) heldItem(t *testing.T, path string) (agentfs.BatchItem, *storage.Claim) {
	t.Helper()
	item := putItem(path, "content")
	item.Key = "busy"
	request := idempotency.PutRequest(agentfs.Put{Path: path, ContentType: "text/plain", By: by}).Sum()
	claim, _, err := in.store.BeginKey(context.Background(), "s", item.Key, "POST", "/v1/files", request, storage.KeyOrigin{})
	if err != nil || claim == nil {
		t.Fatalf("hold the key: %v", err)
	}
	return item, claim
}

// awaitKeyWait waits until a runner met an item's key in progress and
// put the item off for a retry.
func (b *testBundle) awaitKeyWait(t *testing.T) {
	t.Helper()
	storagetest.Eventually(t, time.Minute, "the runner to meet the key in progress", func() bool {
		return strings.Contains(b.logs.String(), "batch item will be retried")
	})
}

func replaceItem(path, content string) agentfs.BatchItem {
	it := putItem(path, content)
	it.Replace = true
	return it
}

// events lists the file's events in the feed's order, read from the rows
// (the feed may hold back events while another test's transaction runs).
func (in *instance) events(t *testing.T, fileID string) []string {
	t.Helper()
	rows, err := in.store.Pool().Query(context.Background(),
		`SELECT type, version FROM events WHERE file_id = $1 ORDER BY pos`, fileID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ string
		var version int
		if err := rows.Scan(&typ, &version); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s v%d", typ, version))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// versionContents lists what each version of the file held, oldest first.
func (in *instance) versionContents(t *testing.T, fileID string) []string {
	t.Helper()
	versions, err := in.store.Versions(context.Background(), "s", fileID, agentfs.VersionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(versions))
	for i, v := range versions {
		out[len(versions)-1-i] = fmt.Sprintf("v%d:%s", v.Version, in.content(t, &agentfs.File{BlobKey: v.BlobKey, SizeBytes: v.SizeBytes}))
	}
	return out
}

func TestRunnerOrder(t *testing.T) {
	t.Run("ItemsOnOnePathKeepTheirOrder", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		var items []agentfs.BatchItem
		for i := 1; i <= 50; i++ { // other paths in between, so that there is something to run at once
			items = append(items, replaceItem("same.txt", fmt.Sprintf("content %d", i)), putItem(fmt.Sprintf("other/%02d", i), "x"))
		}
		b := in.await(t, in.createBatch(t, caller, items...))
		if b.Status != agentfs.BatchSucceeded {
			t.Fatalf("batch %s: %s", b.Status, describe(b))
		}
		files := in.filesAt(t, "same.txt")
		if len(files) != 1 || files[0].Version != 50 || in.content(t, files[0]) != "content 50" {
			t.Fatalf("same.txt: %d files, want one at version 50 holding the last content", len(files))
		}
		var wantVersions, wantEvents []string
		for i := 1; i <= 50; i++ {
			wantVersions = append(wantVersions, fmt.Sprintf("v%d:content %d", i, i))
			typ := agentfs.EventReplaced
			if i == 1 {
				typ = agentfs.EventCreated
			}
			wantEvents = append(wantEvents, fmt.Sprintf("%s v%d", typ, i))
			if it := b.Items[2*(i-1)]; it.ResultID != files[0].ID {
				t.Fatalf("item %d names %s, want %s", it.Index, it.ResultID, files[0].ID)
			}
		}
		if got := in.versionContents(t, files[0].ID); !slices.Equal(got, wantVersions) {
			t.Fatalf("versions %v,\nwant %v", got, wantVersions)
		}
		if got := in.events(t, files[0].ID); !slices.Equal(got, wantEvents) {
			t.Fatalf("events %v,\nwant %v", got, wantEvents)
		}
		for i := 1; i <= 50; i++ {
			if f := in.filesAt(t, fmt.Sprintf("other/%02d", i)); len(f) != 1 || f[0].Version != 1 {
				t.Fatalf("other/%02d: %d files", i, len(f))
			}
		}
	})

	t.Run("CopiesDeletesAndRestoresSeeTheItemsBeforeThem", func(t *testing.T) {
		in, _ := setup(t)
		in.start(t)
		a := in.mustPut(t, "a.txt", "one")
		var items []agentfs.BatchItem
		filler := func() {
			for range 5 {
				items = append(items, putItem(fmt.Sprintf("filler/%03d", len(items)), "f"))
			}
		}
		filler()
		items = append(items, replaceItem("a.txt", "two"))
		filler()
		items = append(items, agentfs.BatchItem{Op: agentfs.OpCopy, FileID: a, Path: "copy-of-two.txt"})
		filler()
		items = append(items, replaceItem("a.txt", "three"), agentfs.BatchItem{Op: agentfs.OpDelete, FileID: a})
		filler()
		items = append(items, agentfs.BatchItem{Op: agentfs.OpRestore, FileID: a},
			agentfs.BatchItem{Op: agentfs.OpCopy, FileID: a, Path: "copy-of-three.txt"})
		filler()
		items = append(items, agentfs.BatchItem{Op: agentfs.OpDelete, FileID: a}, putItem("a.txt", "another file"),
			agentfs.BatchItem{Op: agentfs.OpRestore, FileID: a})
		b := in.await(t, in.createBatch(t, caller, items...))
		var failed []string
		for _, it := range b.Items {
			if it.Status != agentfs.ItemSucceeded {
				failed = append(failed, fmt.Sprintf("%d %s %s", it.Index, it.Op, itemProblem(t, it).Code))
			}
		}
		// The last restore finds a.txt taken by another file, as a standalone
		// restore would; everything else succeeds.
		last := len(items) - 1
		if len(failed) != 1 || itemProblem(t, b.Items[last]).Code != problem.PathExists {
			t.Fatalf("failed items %v, want only the last restore, with PATH_EXISTS: %s", failed, describe(b))
		}
		for path, want := range map[string]string{"copy-of-two.txt": "two", "copy-of-three.txt": "three", "a.txt": "another file"} {
			var live []*agentfs.File
			for _, f := range in.filesAt(t, path) {
				if f.Live() {
					live = append(live, f)
				}
			}
			if len(live) != 1 || in.content(t, live[0]) != want {
				t.Fatalf("%s: %d live files, want one holding %q", path, len(live), want)
			}
		}
		f := in.file(t, a)
		want := []string{"file.created v1", "file.replaced v2", "file.replaced v3", "file.deleted v3", "file.restored v3", "file.deleted v3"}
		if got := in.events(t, a); f.Live() || f.Version != 3 || !slices.Equal(got, want) {
			t.Fatalf("a.txt's first file: live=%v version %d, events %v, want deleted at version 3 after %v", f.Live(), f.Version, got, want)
		}
	})

	t.Run("AnItemThatMustWaitHoldsBackTheItemsAfterIt", func(t *testing.T) {
		in, b := setup(t)
		held, claim := in.heldItem(t, "held.txt")
		items := []agentfs.BatchItem{putItem("first.txt", "runs")}
		items = append(items, held)
		for i := range 20 {
			items = append(items, putItem(fmt.Sprintf("after/%02d", i), "waits"))
		}
		id := in.createBatch(t, caller, items...)
		in.start(t)
		b.awaitKeyWait(t)
		// The item before the one that waits commits (it was under way).
		var got *agentfs.Batch
		storagetest.Eventually(t, time.Minute, "the first item to commit", func() bool {
			var err error
			got, err = in.store.Batch(context.Background(), "s", id)
			return err == nil && got.Items[0].Status == agentfs.ItemSucceeded
		})
		if got.Status != agentfs.BatchRunning {
			t.Fatalf("while the key is held elsewhere: %s", got.Status)
		}
		for _, it := range got.Items {
			if want := agentfs.ItemPending; it.Index == 0 && it.Status != agentfs.ItemSucceeded || it.Index > 0 && it.Status != want {
				t.Fatalf("while the key is held elsewhere: %s", describe(got))
			}
		}
		if n := len(in.filesAt(t, "after/00")) + len(in.filesAt(t, "after/19")); n != 0 {
			t.Fatalf("an item after the one that waits wrote a file")
		}
		if err := claim.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := in.await(t, id)
		if done.Status != agentfs.BatchSucceeded {
			t.Fatalf("after the key was released: %s %s", done.Status, describe(done))
		}
		if n := len(storagetest.ObjectKeys(t, b.cfg)); n != len(items) {
			t.Fatalf("%d objects, want %d: the blobs of the items held back are removed", n, len(items))
		}
	})

	t.Run("ACancelWhileAnItemWaitsCancelsTheItemsAfterIt", func(t *testing.T) {
		in, b := setup(t)
		held, claim := in.heldItem(t, "held.txt")
		items := []agentfs.BatchItem{held}
		for i := range 20 {
			items = append(items, putItem(fmt.Sprintf("after/%02d", i), "never"))
		}
		id := in.createBatch(t, caller, items...)
		in.start(t)
		b.awaitKeyWait(t)
		if _, err := in.core.CancelBatch(context.Background(), caller, id); err != nil {
			t.Fatal(err)
		}
		if err := claim.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := in.await(t, id)
		if done.Status != agentfs.BatchCanceled {
			t.Fatalf("batch %s: %s", done.Status, describe(done))
		}
		for _, it := range done.Items {
			if it.Status != agentfs.ItemCanceled || it.ResultID != "" {
				t.Fatalf("item %d: %s", it.Index, describe(done))
			}
		}
		if files, err := in.store.ListFiles(context.Background(), "s", agentfs.FileFilter{IncludeDeleted: true, Limit: 100}); err != nil || len(files) != 0 {
			t.Fatalf("a canceled batch left %d files (%v)", len(files), err)
		}
		// The runner stops when it next meets the batch; what it had
		// prepared meanwhile is dropped, blobs included.
		storagetest.Eventually(t, time.Minute, "the canceled batch's blobs to be gone", func() bool {
			return len(storagetest.ObjectKeys(t, b.cfg)) == 0
		})
	})

	t.Run("TwoRunnersAtOnceApplyEachItemOnce", func(t *testing.T) {
		one, b := setup(t)
		two := newInstance(t, b)
		var items []agentfs.BatchItem
		for i := range 150 {
			items = append(items, putItem(fmt.Sprintf("p/%03d", i), fmt.Sprintf("content %d", i)))
			if i%10 == 0 {
				items = append(items, replaceItem("same.txt", fmt.Sprintf("version %d", i/10+1)))
			}
		}
		id := one.createBatch(t, caller, items...)
		// Without the batch's lock, as if a rescue handed the job to a second
		// worker while the first still ran it.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, in := range []*instance{one, two} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = in.runner.RunUnlocked(context.Background(), id)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		got := one.await(t, id)
		if got.Status != agentfs.BatchSucceeded {
			t.Fatalf("batch %s: %s", got.Status, describe(got))
		}
		for _, it := range got.Items {
			if it.Replayed || it.ResultID == "" {
				t.Fatalf("item %d: %s", it.Index, describe(got))
			}
		}
		var files, maxVersion int
		err := one.store.Pool().QueryRow(context.Background(),
			`SELECT count(*), max(version) FROM files WHERE subject = 's' AND path LIKE 'p/%'`).Scan(&files, &maxVersion)
		if err != nil || files != 150 || maxVersion != 1 {
			t.Fatalf("%d files under p/, highest version %d (%v); want 150 at version 1", files, maxVersion, err)
		}
		same := one.filesAt(t, "same.txt")
		if len(same) != 1 || same[0].Version != 15 || one.content(t, same[0]) != "version 15" {
			t.Fatalf("same.txt: %d files, want one at version 15", len(same))
		}
		if n := len(storagetest.ObjectKeys(t, b.cfg)); n != 150+15 {
			t.Fatalf("%d objects, want %d: every losing attempt's blob removed", n, 150+15)
		}
	})
}
