package client_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestUploadFileResumedProgressStartsAtStoredBytes: a resumed upload's
// first progress report is the bytes the session already holds, so a bar
// starts where the interrupted upload stopped instead of creeping up to it
// while the stored parts are checked; a stored part found wrong is taken
// back once and sent again.
func TestUploadFileResumedProgressStartsAtStoredBytes(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	const size = 3*partSize + 1000
	local, data, sum := localFile(t, size, 11)

	u, err := c.CreateUpload(ctx, "resumed-progress.bin", size, client.CreateUploadOptions{SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		if _, err := c.PutPart(ctx, u.ID, n, bytes.NewReader(data[(n-1)*partSize:n*partSize]), partSize, client.PartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Part 3 is stored with the wrong bytes: it has to go again.
	wrong := bytes.Repeat([]byte{'w'}, partSize)
	if _, err := c.PutPart(ctx, u.ID, 3, bytes.NewReader(wrong), partSize, client.PartOptions{}); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		reports []int64
	)
	f, err := c.UploadFile(ctx, local, "resumed-progress.bin", client.UploadOptions{Parallel: 1,
		Progress: func(sent, total int64) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, sent)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if f.SHA256 != sum {
		t.Fatalf("file %+v", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || reports[0] != 3*partSize {
		t.Fatalf("first progress report %v, want %d (the three stored parts)", reports[:min(len(reports), 3)], 3*partSize)
	}
	if last := reports[len(reports)-1]; last != size {
		t.Fatalf("last progress report %d, want %d", last, size)
	}
	// The wrong part 3 is taken back once: progress drops to two parts,
	// then climbs to the total.
	low := reports[0]
	for _, r := range reports {
		low = min(low, r)
	}
	if low != 2*partSize {
		t.Fatalf("progress went down to %d, want 2 parts (%d) when the wrong part 3 went again", low, 2*partSize)
	}
}
