package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// TestConcurrentWritersOfOnePart sends part 1 of a session from several
// writers at once, each with its own bytes, as clients would (a writer
// told the part is busy waits and sends it again), many times over: every
// writer ends with the part recorded, and the complete that follows
// assembles exactly the part the session lists, whose bytes are one
// writer's. S3 keeps the bytes of whichever UploadPart of a part number
// ends last, and each writer records the ETag of its own: when they
// overlapped, the session could list a part S3 did not hold, and complete
// answered PARTS_MISSING.
func TestConcurrentWritersOfOnePart(t *testing.T) {
	for _, writers := range []int{2, 4} {
		t.Run(fmt.Sprintf("%dWriters", writers), func(t *testing.T) {
			store := setupLeases(t, 30*time.Second)
			waited := 0
			for round := range 24 {
				waited += racePart(t, store, round, writers)
			}
			if waited == 0 {
				t.Fatal("no writer ever found the part on its way in another: the writers never overlapped")
			}
		})
	}
}

// racePart runs one round: a fresh one-part session, writers sending its
// part at once, then a complete. It returns how many times a writer was
// told to wait.
func racePart(t *testing.T, store *storage.Store, round, writers int) int {
	t.Helper()
	ctx := context.Background()
	const size = 512 << 10
	u := createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: fmt.Sprintf("race-%d.bin", round), SizeBytes: size,
		ContentType: "application/octet-stream", PartSize: agentfs.MinPartSize, TTL: time.Hour})
	contents := make(map[string][]byte, writers)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	waits := make([]int, writers)
	start := make(chan struct{})
	for w := range writers {
		body := bytes.Repeat([]byte{byte('a' + w), byte(round)}, size/2)
		sum := sha256.Sum256(body)
		contents[hex.EncodeToString(sum[:])] = body
		wg.Go(func() {
			<-start
			waits[w], errs[w] = sendPartUntilTaken(ctx, store, u.ID, body)
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("round %d: writer %d: %v", round, w, err)
		}
	}
	listed := sessionStatus(t, store, u.ID).Parts
	if len(listed) != 1 || contents[listed[0].SHA256] == nil {
		t.Fatalf("round %d: the session lists %+v, not one writer's part", round, listed)
	}
	f, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{})
	if err != nil {
		t.Fatalf("round %d: complete after %d writers of part 1, which the session lists as %s: %v",
			round, writers, listed[0].SHA256[:12], err)
	}
	if f.SHA256 != listed[0].SHA256 || fileContent(t, store, f) != string(contents[listed[0].SHA256]) {
		t.Fatalf("round %d: the file holds %s, the session listed %s", round, f.SHA256, listed[0].SHA256)
	}
	n := 0
	for _, w := range waits {
		n += w
	}
	return n
}

// sendPartUntilTaken sends part 1 until it is recorded, sending it again
// while the part is busy; it returns how many times it was.
func sendPartUntilTaken(ctx context.Context, store *storage.Store, id string, body []byte) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for waits := 0; ; waits++ {
		_, err := sendPart(ctx, store, "s", id, 1, string(body))
		var busy *agentfs.UploadBusyError
		if !errors.As(err, &busy) || time.Now().After(deadline) {
			return waits, err
		}
		time.Sleep(10 * time.Millisecond) // a client's wait before it sends again (Retry-After is a ceiling here)
	}
}

func TestWritersOfOnePartTakeTurns(t *testing.T) {
	ctx := context.Background()
	newSession := func(t *testing.T, store *storage.Store) *agentfs.Upload {
		return createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: "turns.txt", SizeBytes: 3,
			ContentType: "text/plain", PartSize: agentfs.MinPartSize, TTL: time.Hour})
	}
	send := func(t *testing.T, store *storage.Store, id, body string) *storage.PendingPart {
		t.Helper()
		p, err := store.SendPart(ctx, "s", id, 1, strings.NewReader(body), int64(len(body)), nil)
		if err != nil {
			t.Fatalf("send part: %v", err)
		}
		return p
	}

	t.Run("APartOnItsWayHoldsOffAnotherWriterOfThatPartOnly", func(t *testing.T) {
		store := setupLeases(t, time.Hour) // part leases of 20 minutes, never renewed in the test
		u := createUpload(t, store, agentfs.NewUpload{Subject: "s", Path: "two.bin", SizeBytes: agentfs.MinPartSize + 3,
			ContentType: "application/octet-stream", PartSize: agentfs.MinPartSize, TTL: time.Hour})
		first := send(t, store, u.ID, strings.Repeat("a", int(agentfs.MinPartSize)))
		_, err := sendPart(ctx, store, "s", u.ID, 1, strings.Repeat("b", int(agentfs.MinPartSize)))
		expectBusy(t, err, 20*time.Minute)
		putPart(t, store, u.ID, 2, "end") // another part number goes its own way
		if err := recordPart(ctx, store, first); err != nil {
			t.Fatal(err)
		}
		putPart(t, store, u.ID, 1, strings.Repeat("b", int(agentfs.MinPartSize))) // its turn now
		f, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{})
		if err != nil || fileContent(t, store, f) != strings.Repeat("b", int(agentfs.MinPartSize))+"end" {
			t.Fatalf("complete: %v", err)
		}
	})

	t.Run("AWriterWhoseLeaseWasTakenOverForgetsThePart", func(t *testing.T) {
		store := setupLeases(t, time.Hour)
		u := newSession(t, store)
		stalled := send(t, store, u.ID, "aaa")
		seed(t, store, `UPDATE upload_part_leases SET lease_until = now() - interval '1 second' WHERE upload_id = $1`, u.ID)
		putPart(t, store, u.ID, 1, "bbb") // takes the lapsed lease over
		expectBusy(t, recordPart(ctx, store, stalled), time.Second)
		// Which of the two S3 kept is unknown: the session lists neither.
		if parts := sessionStatus(t, store, u.ID).Parts; len(parts) != 0 {
			t.Fatalf("the session lists %+v after two writers of part 1 overlapped", parts)
		}
		var missing *agentfs.PartsMissingError
		if _, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{}); !errors.As(err, &missing) {
			t.Fatalf("complete: %v, want part 1 missing", err)
		}
		putPart(t, store, u.ID, 1, "ccc")
		f, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{})
		if err != nil || fileContent(t, store, f) != "ccc" {
			t.Fatalf("complete after the part was sent again: %v", err)
		}
	})
}
