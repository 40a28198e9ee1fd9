package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func uploadList(t *testing.T, c *apitest.Client, query string) api.UploadList {
	t.Helper()
	return apitest.GetJSON[api.UploadList](t, c, "/v1/uploads?"+query)
}

func uploadIDs(l api.UploadList) string {
	return fmt.Sprint(pluck(l.Data, func(u api.Upload) string { return u.ID }))
}

func batchList(t *testing.T, c *apitest.Client, query string) (api.BatchList, []byte) {
	t.Helper()
	var l api.BatchList
	res := c.Do("GET", "/v1/batch?"+query, nil).Expect(t, http.StatusOK)
	res.JSON(t, &l)
	return l, res.Body
}

func batchIDs(l api.BatchList) string {
	return fmt.Sprint(pluck(l.Data, func(b api.Batch) string { return b.ID }))
}

// pageThrough follows next_cursor from query's first page and returns
// every page's ids.
func pageThrough(t *testing.T, next func(query string) (ids string, cursor *string), query string) []string {
	t.Helper()
	var pages []string
	q := query
	for i := 0; i < 10; i++ {
		ids, cursor := next(q)
		pages = append(pages, ids)
		if cursor == nil {
			return pages
		}
		q = query + "&cursor=" + url.QueryEscape(*cursor)
	}
	t.Fatalf("more than 10 pages: %v", pages)
	return nil
}

func joined(ids ...string) string { return fmt.Sprint(ids) }

func TestListUploads(t *testing.T) {
	t.Run("FiltersAndPages", func(t *testing.T) {
		c, b := setup(t)
		s1 := createUpload(t, c, map[string]any{"path": "a.bin", "size_bytes": 1}, 201)
		s2 := createUpload(t, c, map[string]any{"path": "b.bin", "size_bytes": 3}, 201)
		putPart(t, c, s2.ID, 1, []byte("abc")).Expect(t, 200)
		complete(t, c, s2.ID, "").Expect(t, 201)
		s3 := createUpload(t, c, map[string]any{"path": "a.bin", "size_bytes": 2}, 201)
		c.Do("DELETE", "/v1/uploads/"+s3.ID, nil).Expect(t, 200)
		s4 := createUpload(t, c, map[string]any{"path": "c.bin", "size_bytes": 4}, 201)
		exec(t, b, `UPDATE uploads SET expires_at = now() - interval '1 minute' WHERE id = $1`, s4.ID)
		s5 := createUpload(t, c, map[string]any{"path": "a.bin", "size_bytes": 5}, 201)

		all := uploadList(t, c, "")
		if got := uploadIDs(all); got != joined(s5.ID, s4.ID, s3.ID, s2.ID, s1.ID) || all.HasMore || all.NextCursor != nil {
			t.Fatalf("all sessions: %s", got)
		}
		if all.Data[1].Status != "expired" || all.Data[2].Status != "aborted" || all.Data[3].Status != "completed" {
			t.Fatalf("statuses: %+v", all.Data)
		}
		for q, want := range map[string]string{
			"status=pending":            joined(s5.ID, s1.ID),
			"status=completed":          joined(s2.ID),
			"status=aborted":            joined(s3.ID),
			"status=expired":            joined(s4.ID),
			"status=failed":             joined(),
			"path=a.bin":                joined(s5.ID, s3.ID, s1.ID),
			"path=a.bin&status=pending": joined(s5.ID, s1.ID),
			"path=nothing.bin":          joined(),
		} {
			if got := uploadIDs(uploadList(t, c, q)); got != want {
				t.Fatalf("%s: %s, want %s", q, got, want)
			}
		}
		pages := pageThrough(t, func(q string) (string, *string) {
			l := uploadList(t, c, q)
			if l.HasMore != (l.NextCursor != nil) {
				t.Fatalf("has_more %v with next_cursor %v", l.HasMore, l.NextCursor)
			}
			return uploadIDs(l), l.NextCursor
		}, "limit=2")
		if fmt.Sprint(pages) != fmt.Sprint([]string{joined(s5.ID, s4.ID), joined(s3.ID, s2.ID), joined(s1.ID)}) {
			t.Fatalf("pages %v", pages)
		}
		if got := uploadIDs(uploadList(t, b.srv.Client(t, "bob"), "")); got != joined() {
			t.Fatalf("bob sees alice's sessions: %s", got)
		}
	})

	t.Run("RejectsBadFilters", func(t *testing.T) {
		c, _ := setup(t)
		runBatch(t, c, "for-a-cursor-1", []map[string]any{{"op": "put", "path": "x", "content": "x"}}, 202)
		runBatch(t, c, "for-a-cursor-2", []map[string]any{{"op": "put", "path": "y", "content": "y"}}, 202)
		bl, _ := batchList(t, c, "limit=1")
		for q, code := range map[string]string{
			"status=done": "VALIDATION_FAILED", "status=PENDING": "VALIDATION_FAILED", "path=../x": "INVALID_PATH",
			"path=%2Fabs": "INVALID_PATH", "limit=0": "VALIDATION_FAILED", "limit=x": "INVALID_REQUEST",
			"cursor=garbage": "INVALID_REQUEST", "cursor=" + url.QueryEscape(*bl.NextCursor): "INVALID_REQUEST",
		} {
			res := c.Do("GET", "/v1/uploads?"+q, nil)
			if p := res.Problem(t); p.Code != code {
				t.Fatalf("%s: %d %s, want %s", q, res.Status, p.Code, code)
			}
		}
	})
}

func TestListBatches(t *testing.T) {
	t.Run("FiltersAndPagesWithoutItems", func(t *testing.T) {
		c, b := setup(t)
		ok, _ := runBatch(t, c, "lb-1", []map[string]any{{"op": "put", "path": "a", "content": "a"}}, 202)
		failed, _ := runBatch(t, c, "lb-2", []map[string]any{{"op": "delete", "file_id": "file_" + strings.Repeat("0", 26)}}, 202)
		partly, _ := runBatch(t, c, "lb-3", []map[string]any{
			{"op": "put", "path": "b", "content": "b"}, {"op": "put", "path": "a", "content": "again"},
		}, 202)
		if ok.Status != "succeeded" || failed.Status != "failed" || partly.Status != "partially_succeeded" {
			t.Fatalf("statuses %s %s %s", ok.Status, failed.Status, partly.Status)
		}
		all, raw := batchList(t, c, "")
		if got := batchIDs(all); got != joined(partly.ID, failed.ID, ok.ID) || all.HasMore || all.NextCursor != nil {
			t.Fatalf("all batches: %s", got)
		}
		var shape struct {
			Data []map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &shape); err != nil {
			t.Fatal(err)
		}
		for _, bj := range shape.Data {
			if _, has := bj["items"]; has {
				t.Fatalf("a listed batch carries its items: %s", raw)
			}
		}
		if c0 := all.Data[0].Counts; c0 != (api.BatchCounts{Total: 2, Succeeded: 1, Failed: 1}) {
			t.Fatalf("counts of the partial batch: %+v", c0)
		}
		for q, want := range map[string]string{
			"status=succeeded":           joined(ok.ID),
			"status=failed":              joined(failed.ID),
			"status=partially_succeeded": joined(partly.ID),
			"status=canceled":            joined(),
		} {
			if l, _ := batchList(t, c, q); batchIDs(l) != want {
				t.Fatalf("%s: %s, want %s", q, batchIDs(l), want)
			}
		}
		pages := pageThrough(t, func(q string) (string, *string) {
			l, _ := batchList(t, c, q)
			return batchIDs(l), l.NextCursor
		}, "limit=1")
		if fmt.Sprint(pages) != fmt.Sprint([]string{joined(partly.ID), joined(failed.ID), joined(ok.ID)}) {
			t.Fatalf("pages %v", pages)
		}
		if l, _ := batchList(t, b.srv.Client(t, "bob"), ""); len(l.Data) != 0 {
			t.Fatalf("bob sees alice's batches: %s", batchIDs(l))
		}
		for q, code := range map[string]string{
			"status=done": "VALIDATION_FAILED", "cursor=abc": "INVALID_REQUEST", "limit=1001": "VALIDATION_FAILED",
		} {
			if p := c.Do("GET", "/v1/batch?"+q, nil).Problem(t); p.Code != code {
				t.Fatalf("%s: %s, want %s", q, p.Code, code)
			}
		}
	})
}

// blockedOn says whether some session waits for a lock the backend pid
// holds.
func blockedOn(t *testing.T, b *testBundle, pid uint32) bool {
	t.Helper()
	var n int
	err := b.srv.Store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(pid)).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestCancelBatch(t *testing.T) {
	t.Run("CancelsWhatHasNotCommitted", func(t *testing.T) {
		c, b := setup(t)
		ctx := context.Background()
		a := upload(t, c, "a.txt", "old").Expect(t, 201).File(t)
		// Hold the row of a.txt: the batch's first item, a replace of it,
		// stops inside its transaction until the lock is let go.
		tx, err := b.srv.Store.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT 1 FROM files WHERE id = $1 FOR UPDATE`, a.ID); err != nil {
			t.Fatal(err)
		}
		pid := tx.Conn().PgConn().PID()
		raw, _ := json.Marshal(map[string]any{"operations": []map[string]any{
			{"op": "put", "path": "a.txt", "content": "new", "if_exists": "replace"},
			{"op": "put", "path": "b.txt", "content": "b"},
			{"op": "put", "path": "c.txt", "content": "c"},
		}})
		var bt api.Batch
		send(c, "POST", "/v1/batch", string(raw), "Idempotency-Key", "to-cancel").Expect(t, http.StatusAccepted).JSON(t, &bt)
		storagetest.Eventually(t, 30*time.Second, "the first item to wait for the lock", func() bool { return blockedOn(t, b, pid) })

		var canceled api.Batch
		c.Do("POST", "/v1/batch/"+bt.ID+"/cancel", nil).Expect(t, http.StatusOK).JSON(t, &canceled)
		if canceled.Status != "canceled" || canceled.Counts != (api.BatchCounts{Total: 3, Canceled: 3}) || canceled.CompletedAt == nil {
			t.Fatalf("canceled: %+v", canceled)
		}
		for _, it := range canceled.Items {
			if it.Status != "canceled" || it.File != nil {
				t.Fatalf("item %d: %+v", it.Index, it)
			}
		}
		var again api.Batch
		c.Do("POST", "/v1/batch/"+bt.ID+"/cancel", nil).Expect(t, http.StatusOK).JSON(t, &again)
		if again.Status != "canceled" || !again.CompletedAt.Equal(*canceled.CompletedAt) || again.Counts != canceled.Counts {
			t.Fatalf("a repeated cancel changed the batch: %+v", again)
		}

		// Let the blocked item go, then wait for its transaction to end: it
		// must not commit, since its item is no longer pending.
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.srv.Store.WithTx(ctx, func(tx2 pgx.Tx) error {
			_, err := tx2.Exec(ctx, `SELECT 1 FROM files WHERE id = $1 FOR UPDATE`, a.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := c.Do("GET", "/v1/files/"+a.ID+"/content", nil).Expect(t, 200); string(got.Body) != "old" {
			t.Fatalf("a canceled item replaced the file: %q", got.Body)
		}
		if l := list(t, c, ""); len(l.Data) != 1 {
			t.Fatalf("canceled items created files: %v", paths(l.Data))
		}
		if evs := eventList(t, b, c, ""); len(evs.Data) != 1 {
			t.Fatalf("events after a cancel: %v", eventTypes(evs.Data))
		}
		var after api.Batch
		c.Do("GET", "/v1/batch/"+bt.ID, nil).Expect(t, 200).JSON(t, &after)
		if after.Status != "canceled" || after.Counts.Canceled != 3 {
			t.Fatalf("batch after the runner let go: %+v", after)
		}
		if l, _ := batchList(t, c, "status=canceled"); batchIDs(l) != joined(bt.ID) || l.Data[0].Counts.Canceled != 3 {
			t.Fatalf("canceled batches: %+v", l.Data)
		}
	})

	t.Run("ATerminalBatchStaysAsItIs", func(t *testing.T) {
		c, _ := setup(t)
		done, _ := runBatch(t, c, "done", []map[string]any{{"op": "put", "path": "d", "content": "d"}}, 202)
		if done.Status != "succeeded" {
			t.Fatalf("batch: %+v", done)
		}
		var before, after api.Batch
		c.Do("GET", "/v1/batch/"+done.ID, nil).Expect(t, 200).JSON(t, &before)
		c.Do("POST", "/v1/batch/"+done.ID+"/cancel", nil).Expect(t, 200).JSON(t, &after)
		if after.Status != "succeeded" || after.Counts != before.Counts || !after.CompletedAt.Equal(*before.CompletedAt) ||
			len(after.Items) != 1 || after.Items[0].Status != "succeeded" || after.Items[0].File == nil {
			t.Fatalf("cancel of a terminal batch: %+v", after)
		}
	})

	t.Run("UnknownOrAnotherSubjectsBatch", func(t *testing.T) {
		c, b := setup(t)
		done, _ := runBatch(t, c, "mine", []map[string]any{{"op": "put", "path": "m", "content": "m"}}, 202)
		c.Do("POST", "/v1/batch/batch_nope/cancel", nil).ExpectProblem(t, 404, "NOT_FOUND")
		b.srv.Client(t, "bob").Do("POST", "/v1/batch/"+done.ID+"/cancel", nil).ExpectProblem(t, 404, "NOT_FOUND")
		first := c.Do("POST", "/v1/batch/"+done.ID+"/cancel", nil, "Idempotency-Key", "cancel-1").Expect(t, 200)
		again := c.Do("POST", "/v1/batch/"+done.ID+"/cancel", nil, "Idempotency-Key", "cancel-1").Expect(t, 200)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("a keyed cancel did not replay: %v", again.Header)
		}
		b.srv.Client(t, "alice", "read").Do("POST", "/v1/batch/"+done.ID+"/cancel", nil).ExpectProblem(t, 403, "FORBIDDEN")
	})
}
