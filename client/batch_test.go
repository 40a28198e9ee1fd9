package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// TestBatch admits a batch of mixed items, one of which fails, waits for
// it, and repeats it with its key.
func TestBatch(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("run-batch"))
	ctx := context.Background()
	taken, err := b.direct.PutFile(ctx, "taken.txt", strings.NewReader("mine"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binary := []byte{0xff, 0x00, 0xfe}
	ops := []client.BatchOp{
		client.BatchPut("b/a.txt", []byte("hello")),
		client.BatchPut("taken.txt", []byte("theirs")),
		client.BatchPut("b/bin", binary),
		client.BatchPut("b/empty", nil),
		client.BatchCopy(taken.ID, "b/copy.txt"),
	}
	ops[0].ContentType = "text/plain"

	admitted, err := c.CreateBatch(ctx, ops, client.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(admitted.ID, "batch_") || admitted.Counts.Total != 5 || len(admitted.Items) != 5 || admitted.Terminal() {
		t.Fatalf("admitted %+v", admitted)
	}
	posts := b.proxy.requests("POST", "/v1/batch")
	if len(posts) != 1 || !keyPattern.MatchString(posts[0].Key) || posts[0].Status != 202 {
		t.Fatalf("posts %+v, want one with a generated key", posts)
	}

	done, err := c.WaitBatch(ctx, admitted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != client.BatchPartiallySucceeded || done.Counts != (client.BatchCounts{Total: 5, Succeeded: 4, Failed: 1}) ||
		done.CompletedAt == nil {
		t.Fatalf("batch %+v", done)
	}
	failed := done.FailedItems()
	if len(failed) != 1 || failed[0].Index != 1 || failed[0].File != nil || failed[0].Error == nil {
		t.Fatalf("failed items %+v", failed)
	}
	if p := failed[0].Error; p.Code != "PATH_EXISTS" || p.Status != 409 || p.ExistingFileID != taken.ID ||
		client.ErrorCode(p) != "PATH_EXISTS" {
		t.Fatalf("item error %+v", p)
	}
	for i, want := range map[int]string{0: sha("hello"), 2: sha(string(binary)), 3: sha(""), 4: sha("mine")} {
		it := done.Items[i]
		if it.Status != client.BatchItemSucceeded || it.File == nil || it.File.SHA256 != want || it.Error != nil ||
			it.File.RunID == nil || *it.File.RunID != "run-batch" {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	if done.Items[0].File.ContentType != "text/plain" || done.Items[0].Path == nil || *done.Items[0].Path != "b/a.txt" {
		t.Fatalf("item 0: %+v", done.Items[0])
	}

	t.Run("RepeatWithKeyWaits", func(t *testing.T) {
		key := "batch-repeat-1"
		first, err := c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("r/1.txt", []byte("1"))},
			client.BatchOptions{IdempotencyKey: key, Wait: 10 * time.Second})
		if err != nil || first.Status != client.BatchSucceeded {
			t.Fatalf("waited batch %+v, %v", first, err)
		}
		again, err := c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("r/1.txt", []byte("1"))},
			client.BatchOptions{IdempotencyKey: key})
		if err != nil || again.ID != first.ID || again.Status != client.BatchSucceeded {
			t.Fatalf("repeat %+v, %v; first %s", again, err, first.ID)
		}
		_, err = c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("r/1.txt", []byte("2"))},
			client.BatchOptions{IdempotencyKey: key})
		expectProblem(t, err, 409, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("LostResponseReplays", func(t *testing.T) {
		b.proxy.inject("POST", "/v1/batch", 1, dropAfterCommit)
		before := len(b.proxy.requests("POST", "/v1/batch"))
		got, err := c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("lost/1.txt", []byte("1"))}, client.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		posts := b.proxy.requests("POST", "/v1/batch")[before:]
		if len(posts) != 2 || posts[0].ServerStatus != 202 || posts[1].Key != posts[0].Key || !posts[1].Replayed {
			t.Fatalf("posts %+v, want a dropped admission and its replay", posts)
		}
		if w, err := c.WaitBatch(ctx, got.ID); err != nil || w.Status != client.BatchSucceeded {
			t.Fatalf("batch %+v, %v", w, err)
		}
		if files := b.filesAt(t, "lost/1.txt"); len(files) != 1 {
			t.Fatalf("files %+v", files)
		}
	})

	t.Run("KeyEvenWithoutKeys", func(t *testing.T) {
		plain, err := client.New(b.proxy.URL, b.token, client.WithoutIdempotencyKeys())
		if err != nil {
			t.Fatal(err)
		}
		before := len(b.proxy.requests("POST", "/v1/batch"))
		if _, err := plain.CreateBatch(ctx, []client.BatchOp{client.BatchDelete(taken.ID)}, client.BatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if posts := b.proxy.requests("POST", "/v1/batch")[before:]; len(posts) != 1 || posts[0].Key == "" {
			t.Fatalf("posts %+v", posts)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		_, err := c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("ok.txt", nil), {Op: "move"}}, client.BatchOptions{})
		p := expectProblem(t, err, 422, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != "operations[1].op" {
			t.Fatalf("problem %+v", p)
		}
		before := len(b.proxy.requests("POST", "/v1/batch"))
		if _, err := c.CreateBatch(ctx, ops, client.BatchOptions{Wait: 31 * time.Second}); err == nil {
			t.Fatal("a wait above 30 s was accepted")
		}
		if n := len(b.proxy.requests("POST", "/v1/batch")) - before; n != 0 {
			t.Fatalf("%d requests for a wait above 30 s", n)
		}
		_, err = c.Batch(ctx, "batch_nope")
		expectProblem(t, err, 404, "NOT_FOUND")
	})
}

func TestBatchOpJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op   client.BatchOp
		want string
	}{
		{client.BatchPut("a", nil), `{"op":"put","path":"a","content":""}`},
		{client.BatchPut("a", []byte("é")), `{"op":"put","path":"a","content":"é"}`},
		{client.BatchPut("a", []byte{0xff}), `{"op":"put","path":"a","encoding":"base64","content":"/w=="}`},
		{client.BatchDelete("file_1"), `{"op":"delete","file_id":"file_1"}`},
		{client.BatchRestore("file_1"), `{"op":"restore","file_id":"file_1"}`},
		{client.BatchCopy("file_1", "b"), `{"op":"copy","path":"b","file_id":"file_1"}`},
	} {
		got, err := json.Marshal(tc.op)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v: %s (%v), want %s", tc.op, got, err, tc.want)
		}
	}
}
