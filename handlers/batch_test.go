package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

type batchResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Counts struct {
		Total, Succeeded, Failed, Pending int
	} `json:"counts"`
	Items []struct {
		Index    int              `json:"index"`
		Op       string           `json:"op"`
		Status   string           `json:"status"`
		Replayed bool             `json:"replayed"`
		File     *apitest.File    `json:"file"`
		Error    *apitest.Problem `json:"error"`
	} `json:"items"`
}

func runBatch(t *testing.T, c *apitest.Client, key string, ops []map[string]any, status int, headers ...string) (batchResult, *apitest.Response) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"operations": ops})
	res := c.Do("POST", "/v1/batch?wait=20", raw, append([]string{"Content-Type", "application/json", "Idempotency-Key", key}, headers...)...)
	res.Expect(t, status)
	var b batchResult
	res.JSON(t, &b)
	return b, res
}

func TestBatch(t *testing.T) {
	t.Run("RunsEveryKindOfItemInOrder", func(t *testing.T) {
		c, _ := setup(t)
		a := upload(t, c, "a.txt", "aaa").Expect(t, 201).File(t)
		src := upload(t, c, "src.txt", "source").Expect(t, 201).File(t)
		b, res := runBatch(t, c, "b-1", []map[string]any{
			{"op": "put", "path": "x.txt", "content": "hello", "content_type": "text/plain"},
			{"op": "put", "path": "y.bin", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), "encoding": "base64"},
			{"op": "delete", "file_id": a.ID},
			{"op": "restore", "file_id": a.ID},
			{"op": "copy", "file_id": src.ID, "path": "copy.txt"},
		}, http.StatusAccepted, "X-Run-ID", "batch-run")
		if res.Header.Get("Location") != "/v1/batch/"+b.ID {
			t.Fatalf("Location %q", res.Header.Get("Location"))
		}
		if b.Status != "succeeded" || b.Counts.Total != 5 || b.Counts.Succeeded != 5 || b.Counts.Pending != 0 {
			t.Fatalf("batch: %+v", b)
		}
		for _, it := range b.Items {
			if it.File == nil || it.Status != "succeeded" || it.Replayed {
				t.Fatalf("item %d: %+v", it.Index, it)
			}
		}
		if y := c.Do("GET", "/v1/files/"+b.Items[1].File.ID+"/content", nil).Expect(t, 200); string(y.Body) != "\x00\x01\x02" {
			t.Fatalf("base64 content %q", y.Body)
		}
		if b.Items[3].File.DeletedAt != nil || b.Items[3].File.ID != a.ID {
			t.Fatalf("restore item: %+v", b.Items[3].File)
		}
		cp := c.Do("GET", "/v1/files/"+b.Items[4].File.ID+"/content", nil).Expect(t, 200)
		if string(cp.Body) != "source" || b.Items[4].File.ID == src.ID || *b.Items[4].File.RunID != "batch-run" {
			t.Fatalf("copy: %q %+v", cp.Body, b.Items[4].File)
		}
		// Items that commit in one transaction are equally new: the listing
		// orders them by id, so only the set is checked.
		got := paths(list(t, c, "run_id=batch-run").Data)
		sort.Strings(got)
		if fmt.Sprint(got) != "[copy.txt x.txt y.bin]" {
			t.Fatalf("files of the batch's run: %v", got)
		}
		var again batchResult
		c.Do("GET", "/v1/batch/"+b.ID, nil).Expect(t, 200).JSON(t, &again)
		if again.Status != "succeeded" || len(again.Items) != 5 {
			t.Fatalf("GET batch: %+v", again)
		}
	})

	t.Run("ReportsEachFailedItemAsAStandaloneRequestWould", func(t *testing.T) {
		c, _ := setup(t)
		holder := upload(t, c, "taken.txt", "first").Expect(t, 201).File(t)
		b, _ := runBatch(t, c, "b-2", []map[string]any{
			{"op": "put", "path": "ok.txt", "content": "fine"},
			{"op": "put", "path": "taken.txt", "content": "second"},
			{"op": "delete", "file_id": missingFileID},
		}, http.StatusAccepted)
		if b.Status != "partially_succeeded" || b.Counts.Succeeded != 1 || b.Counts.Failed != 2 {
			t.Fatalf("batch: %+v", b)
		}
		e := b.Items[1].Error
		if e == nil || e.Code != "PATH_EXISTS" || e.Status != 409 || e.ExistingFileID != holder.ID {
			t.Fatalf("item 1 error: %+v", e)
		}
		if e := b.Items[2].Error; e == nil || e.Code != "NOT_FOUND" {
			t.Fatalf("item 2 error: %+v", e)
		}
		allFailed, _ := runBatch(t, c, "b-3", []map[string]any{{"op": "restore", "file_id": missingFileID}}, http.StatusAccepted)
		if allFailed.Status != "failed" {
			t.Fatalf("a batch whose items all failed: %s", allFailed.Status)
		}
	})

	t.Run("RepeatsByKeyAndBody", func(t *testing.T) {
		c, _ := setup(t)
		first, _ := runBatch(t, c, "b-4", []map[string]any{{"op": "put", "path": "r.txt", "content": "r"}}, http.StatusAccepted)
		res := c.Do("POST", "/v1/batch", `{ "operations" : [ {"content":"r", "path":"r.txt", "op":"put"} ] }`,
			"Content-Type", "application/json", "Idempotency-Key", "b-4").Expect(t, http.StatusOK)
		var again batchResult
		res.JSON(t, &again)
		if again.ID != first.ID || again.Status != "succeeded" || res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat: %s", res.Body)
		}
		c.Do("POST", "/v1/batch", `{"operations":[{"op":"put","path":"r.txt","content":"other"}]}`,
			"Content-Type", "application/json", "Idempotency-Key", "b-4").ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
		if n := len(list(t, c, "path=r.txt&include_deleted=true").Data); n != 1 {
			t.Fatalf("%d files at r.txt", n)
		}
	})

	t.Run("ItemKeysShareTheKeySpaceWithStandaloneUploads", func(t *testing.T) {
		c, _ := setup(t)
		before := keyed(t, c, "item-k1", "k1.txt", "one", "X-Run-ID", "r").Expect(t, 201).File(t)
		b, _ := runBatch(t, c, "b-5", []map[string]any{
			{"op": "put", "path": "k1.txt", "content": "one", "idempotency_key": "item-k1"},
			{"op": "put", "path": "k2.txt", "content": "two", "idempotency_key": "item-k2"},
			{"op": "put", "path": "k1.txt", "content": "changed", "idempotency_key": "item-k1"},
		}, http.StatusAccepted, "X-Run-ID", "r")
		if it := b.Items[0]; it.Status != "succeeded" || !it.Replayed || it.File.ID != before.ID {
			t.Fatalf("item 0: %+v", it)
		}
		if it := b.Items[1]; it.Status != "succeeded" || it.Replayed {
			t.Fatalf("item 1: %+v", it)
		}
		if it := b.Items[2]; it.Status != "failed" || it.Error.Code != "IDEMPOTENCY_CONFLICT" {
			t.Fatalf("item 2: %+v", it)
		}
		after := keyed(t, c, "item-k2", "k2.txt", "two", "X-Run-ID", "r").Expect(t, 201)
		if after.Header.Get("Idempotent-Replayed") != "true" || after.File(t).ID != b.Items[1].File.ID {
			t.Fatalf("a standalone upload did not replay the item: %s", after.Body)
		}
	})

	t.Run("RejectsInvalidBatchesBeforeAnythingRuns", func(t *testing.T) {
		t.Parallel()
		srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{
			MaxUploadBytes: 1 << 20, BatchMaxItems: 3, BatchMaxBytes: 4096, BatchMaxItemBytes: 16}})
		c := srv.Client(t, "alice")
		post := func(body string, headers ...string) *apitest.Response {
			return c.Do("POST", "/v1/batch", body, append([]string{"Content-Type", "application/json"}, headers...)...)
		}
		post(`{"operations":[{"op":"put","path":"a","content":"x"}]}`).ExpectProblem(t, 400, "IDEMPOTENCY_KEY_REQUIRED")
		k := []string{"Idempotency-Key", "bad-batch"}
		p := post(`{"operations":[{"op":"put","path":"ok","content":"x"},{"op":"put","path":"../no","content":"x"},{"op":"delete"}]}`, k...).
			ExpectProblem(t, 422, "VALIDATION_FAILED")
		fields := []string{}
		for _, e := range p.Errors {
			fields = append(fields, e.Field)
		}
		if got := strings.Join(fields, ","); got != "operations[1].path,operations[2].file_id" {
			t.Fatalf("errors name %s", got)
		}
		for _, body := range []string{
			`{"operations":[]}`,
			`{"operations":[{"op":"put","path":"a","content":"x"},{"op":"put","path":"b","content":"x"},{"op":"put","path":"c","content":"x"},{"op":"put","path":"d","content":"x"}]}`,
			`{"operations":[{"op":"put","path":"a","content":"seventeen bytes!!"}]}`,
			`{"operations":[{"op":"move","path":"a"}]}`,
			`{"operations":[{"op":"put","path":"a","content":"x","encoding":"hex"}]}`,
			`{"operations":[{"op":"put","path":"a","content":"!!","encoding":"base64"}]}`,
			`{"operations":[{"op":"put","path":"a","content":"x","idempotency_key":"bad key"}]}`,
			`{"operations":[{"op":"delete","file_id":"f","content":"x"}]}`,
			`{"operations":[{"op":"put","path":"a","content":"x","colour":"red"}]}`,
			`{"ops":[]}`,
		} {
			post(body, k...).ExpectProblem(t, 422, "VALIDATION_FAILED")
		}
		post(`{"operations":[`, k...).ExpectProblem(t, 400, "INVALID_REQUEST")
		post(`{"operations":[{"op":"put","path":"a","content":"`+strings.Repeat("x", 5000)+`"}]}`, k...).
			ExpectProblem(t, 413, "PAYLOAD_TOO_LARGE")
		c.Do("POST", "/v1/batch", `{}`, "Content-Type", "text/plain", "Idempotency-Key", "x").ExpectProblem(t, 415, "UNSUPPORTED_MEDIA_TYPE")
		c.Do("POST", "/v1/batch?wait=31", `{}`, "Content-Type", "application/json", "Idempotency-Key", "x").ExpectProblem(t, 422, "VALIDATION_FAILED")
		if n := len(list(t, c, "include_deleted=true").Data); n != 0 {
			t.Fatalf("rejected batches made %d files", n)
		}
		c.Do("GET", "/v1/operations/bad-batch", nil).ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("OtherSubjectsBatchesAreNotFound", func(t *testing.T) {
		c, b := setup(t)
		mine, _ := runBatch(t, c, "b-6", []map[string]any{{"op": "put", "path": "m", "content": "m"}}, http.StatusAccepted)
		b.srv.Client(t, "bob").Do("GET", "/v1/batch/"+mine.ID, nil).ExpectProblem(t, 404, "NOT_FOUND")
	})
}
