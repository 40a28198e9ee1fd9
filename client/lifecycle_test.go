package client_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// TestListUploads lists sessions by status and path, page by page.
func TestListUploads(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	a, err := c.CreateUpload(ctx, "notes/big-a.bin", 10, client.CreateUploadOptions{ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bu, err := c.CreateUpload(ctx, "notes/big-b.bin", 20, client.CreateUploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ExpiresIn == nil || *a.ExpiresIn != 3600 || bu.ExpiresIn != nil {
		t.Fatalf("expires_in of the sessions: %v, %v", a.ExpiresIn, bu.ExpiresIn)
	}
	if _, err := c.AbortUpload(ctx, a.ID, client.AbortOptions{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for u, err := range c.AllUploads(ctx, client.UploadListOptions{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	if strings.Join(ids, ",") != bu.ID+","+a.ID {
		t.Fatalf("sessions %v, want %s then %s (newest first)", ids, bu.ID, a.ID)
	}
	for _, tc := range []struct {
		opts client.UploadListOptions
		want string
	}{
		{client.UploadListOptions{Status: client.UploadPending}, bu.ID},
		{client.UploadListOptions{Status: client.UploadAborted}, a.ID},
		{client.UploadListOptions{Path: "notes/big-a.bin"}, a.ID},
		{client.UploadListOptions{Status: client.UploadCompleted}, ""},
	} {
		l, err := c.ListUploads(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range l.Data {
			got = append(got, u.ID)
		}
		if strings.Join(got, ",") != tc.want || l.HasMore {
			t.Errorf("ListUploads(%+v): %v, want %q", tc.opts, got, tc.want)
		}
	}
	_, err = c.ListUploads(ctx, client.UploadListOptions{Status: "sleeping"})
	expectProblem(t, err, 422, "VALIDATION_FAILED")
}

// TestBatchesListAndCancel cancels a batch whose first item waits for a
// key another request holds, so the items after it cannot have run, and
// lists batches.
func TestBatchesListAndCancel(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done, err := c.CreateBatch(ctx, []client.BatchOp{client.BatchPut("notes/done.txt", []byte("d"))}, client.BatchOptions{Wait: 20 * time.Second})
	if err == nil && !done.Terminal() {
		done, err = c.WaitBatch(ctx, done.ID)
	}
	if err != nil || done.Status != client.BatchSucceeded {
		t.Fatalf("first batch %+v, %v", done, err)
	}

	finish := slowUpload(t, b, "notes/held.txt", "hist-held", "held ")
	held := client.BatchPut("notes/held.txt", []byte("held content"))
	held.IdempotencyKey = "hist-held"
	running, err := c.CreateBatch(ctx, []client.BatchOp{held,
		client.BatchPut("notes/never-1.txt", []byte("1")), client.BatchPut("notes/never-2.txt", []byte("2"))}, client.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	canceled, err := c.CancelBatch(ctx, running.ID, client.CancelBatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if canceled.ID != running.ID || canceled.Items[1].Status != client.BatchItemCanceled || canceled.Items[2].Status != client.BatchItemCanceled {
		t.Fatalf("canceled batch %+v", canceled)
	}
	if status := finish("content"); status != http.StatusCreated {
		t.Fatalf("the held upload answered %d", status)
	}
	ended, err := c.WaitBatch(ctx, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended.Status != client.BatchCanceled || !ended.Terminal() || ended.Counts.Canceled < 2 || ended.Counts.Pending != 0 ||
		ended.Counts.Canceled+ended.Counts.Succeeded+ended.Counts.Failed != ended.Counts.Total {
		t.Fatalf("ended %+v", ended)
	}
	for _, p := range []string{"notes/never-1.txt", "notes/never-2.txt"} {
		if files := b.filesAt(t, p); len(files) != 0 {
			t.Fatalf("a canceled item wrote %s: %+v", p, files)
		}
	}
	again, err := c.CancelBatch(ctx, done.ID, client.CancelBatchOptions{})
	if err != nil || again.Status != client.BatchSucceeded {
		t.Fatalf("cancelling a finished batch: %+v, %v", again, err)
	}

	t.Run("LostResponseReplays", func(t *testing.T) {
		path := "/v1/batch/" + running.ID + "/cancel"
		b.proxy.inject("POST", path, 1, dropAfterCommit)
		before := len(b.proxy.requests("POST", path))
		if _, err := c.CancelBatch(ctx, running.ID, client.CancelBatchOptions{}); err != nil {
			t.Fatal(err)
		}
		seen := b.proxy.requests("POST", path)[before:]
		if len(seen) != 2 || seen[0].Key == "" || seen[1].Key != seen[0].Key || !seen[1].Replayed {
			t.Fatalf("requests %+v, want a dropped cancel and its replay", seen)
		}
	})

	var ids []string
	for bt, err := range c.AllBatches(ctx, client.BatchListOptions{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if bt.Items != nil {
			t.Fatalf("a listed batch carries items: %+v", bt)
		}
		ids = append(ids, bt.ID)
	}
	if strings.Join(ids, ",") != running.ID+","+done.ID {
		t.Fatalf("batches %v, want %s then %s", ids, running.ID, done.ID)
	}
	l, err := c.ListBatches(ctx, client.BatchListOptions{Status: client.BatchCanceled})
	if err != nil || len(l.Data) != 1 || l.Data[0].ID != running.ID || l.Data[0].Counts != ended.Counts {
		t.Fatalf("canceled batches %+v, %v", l, err)
	}
	_, err = c.CancelBatch(ctx, "batch_nope", client.CancelBatchOptions{})
	expectProblem(t, err, 404, "NOT_FOUND")
}
