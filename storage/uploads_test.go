package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// minPart is the smallest part a session plans (S3's multipart minimum);
// every session of these tests has parts of this size but the last.
const minPart = agentfs.MinPartSize

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// hashState is the marshalled state of a SHA-256 that hashed b.
func hashState(b ...[]byte) []byte {
	h := sha256.New()
	for _, p := range b {
		h.Write(p)
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err)
	}
	return state
}

func hexSHA(b ...[]byte) string {
	h := sha256.New()
	for _, p := range b {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// twoParts is the content of a session of two parts: 5 MiB and 1 KiB.
func twoParts(seed int64) (whole, p1, p2 []byte) {
	whole = randomBytes(minPart+1024, seed)
	return whole, whole[:minPart], whole[minPart:]
}

// openTwoParts opens a session at path for twoParts(seed), without a
// declared sha256, and returns it with the content and its parts.
func openTwoParts(t *testing.T, store *storage.Store, path string, seed int64) (u *agentfs.Upload, whole, p1, p2 []byte) {
	t.Helper()
	whole, p1, p2 = twoParts(seed)
	u, _ = openUpload(t, store, newUpload(path, int64(len(whole)), ""))
	return u, whole, p1, p2
}

func newUpload(path string, size int64, sum string) agentfs.NewUpload {
	return agentfs.NewUpload{Subject: "s", Path: path, SizeBytes: size, ContentType: "application/octet-stream",
		SHA256: sum, PartSize: minPart, TTL: time.Hour, By: agentfs.Attribution{AgentID: "ag", RunID: "run"}}
}

// openUpload runs CreateUploadTx in a transaction of its own and says
// whether it created the session.
func openUpload(t *testing.T, store *storage.Store, req agentfs.NewUpload) (*agentfs.Upload, bool) {
	t.Helper()
	var (
		u       *agentfs.Upload
		created bool
	)
	err := store.WithTx(context.Background(), func(tx pgx.Tx) (err error) {
		u, created, err = store.CreateUploadTx(context.Background(), tx, req)
		return err
	})
	if err != nil {
		t.Fatalf("create upload: %v", err)
	}
	return u, created
}

func getUpload(t *testing.T, store *storage.Store, id string) *agentfs.Upload {
	t.Helper()
	u, err := store.Upload(context.Background(), "s", id)
	if err != nil {
		t.Fatalf("get upload %s: %v", id, err)
	}
	return u
}

func mustComplete(t *testing.T, store *storage.Store, id string, req agentfs.CompleteRequest) (*agentfs.File, bool) {
	t.Helper()
	f, created, err := completeUpload(context.Background(), store, "s", id, req)
	if err != nil {
		t.Fatalf("complete %s: %v", id, err)
	}
	return f, created
}

// readFile reads a file's whole content back from its blob.
func readFile(t *testing.T, store *storage.Store, f *agentfs.File) []byte {
	t.Helper()
	r, err := store.OpenBlob(context.Background(), f.BlobKey, 0, f.SizeBytes)
	if err != nil {
		t.Fatalf("open blob of %s: %v", f.ID, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read blob of %s: %v", f.ID, err)
	}
	return b
}

// multipartGone reports whether S3 no longer knows the session's multipart
// upload.
func multipartGone(t *testing.T, b *testBundle, u *agentfs.Upload) bool {
	t.Helper()
	core := minio.Core{Client: storagetest.S3(t, b.cfg)}
	_, err := core.ListObjectParts(context.Background(), b.cfg.S3Bucket, u.BlobKey, u.S3UploadID, 0, 100)
	return minio.ToErrorResponse(err).Code == "NoSuchUpload"
}

func countFiles(t *testing.T, store *storage.Store, path string) int {
	t.Helper()
	var n int
	if err := store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM files WHERE path = $1`, path).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateUpload(t *testing.T) {
	ctx := context.Background()

	t.Run("ResumesTheMatchingPendingSession", func(t *testing.T) {
		store, _ := setup(t)
		req := newUpload("r.bin", minPart+1024, hexSHA([]byte("whatever")))
		u, created := openUpload(t, store, req)
		if !created || u.Status != agentfs.UploadPending || u.PartCount != 2 || u.PartSize != minPart {
			t.Fatalf("first create: created=%v %+v", created, u)
		}
		putPart(t, store, u.ID, 2, string(make([]byte, 1024)))
		again, created := openUpload(t, store, req)
		if created || again.ID != u.ID || len(again.Parts) != 1 || again.Parts[0].Number != 2 {
			t.Fatalf("the same request: created=%v id %s (want %s) parts %+v", created, again.ID, u.ID, again.Parts)
		}
	})

	t.Run("AnotherSizeOrChecksumOrTypeIsANewSession", func(t *testing.T) {
		store, _ := setup(t)
		req := newUpload("r.bin", 100, "")
		u, _ := openUpload(t, store, req)
		for name, change := range map[string]func(*agentfs.NewUpload){
			"Size":        func(r *agentfs.NewUpload) { r.SizeBytes = 101 },
			"SHA256":      func(r *agentfs.NewUpload) { r.SHA256 = hexSHA([]byte("x")) },
			"ContentType": func(r *agentfs.NewUpload) { r.ContentType = "text/plain" },
			"Path":        func(r *agentfs.NewUpload) { r.Path = "other.bin" },
		} {
			other := req
			change(&other)
			got, created := openUpload(t, store, other)
			if !created || got.ID == u.ID {
				t.Errorf("%s changed: created=%v id %s, want a new session (not %s)", name, created, got.ID, u.ID)
			}
		}
	})

	for _, tc := range []struct {
		name, path, after string
		end               func(t *testing.T, store *storage.Store, id string)
	}{
		{"DoesNotResumeAnExpiredSession", "e.bin", "expiry", func(t *testing.T, store *storage.Store, id string) {
			seed(t, store, `UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, id)
		}},
		{"DoesNotResumeASessionNoLongerPending", "a.bin", "abort", func(t *testing.T, store *storage.Store, id string) {
			abortUpload(t, store, id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := setup(t)
			req := newUpload(tc.path, 100, "")
			u, _ := openUpload(t, store, req)
			tc.end(t, store, u.ID)
			again, created := openUpload(t, store, req)
			if !created || again.ID == u.ID {
				t.Fatalf("after %s: created=%v id %s, want a new session (not %s)", tc.after, created, again.ID, u.ID)
			}
		})
	}

	t.Run("RacingCreatesShareOneSession", func(t *testing.T) {
		store, _ := setup(t)
		req := newUpload("race.bin", 100, "")
		var wg sync.WaitGroup
		ids := make([]string, 4)
		errs := make([]error, len(ids))
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = store.WithTx(ctx, func(tx pgx.Tx) error {
					u, _, err := store.CreateUploadTx(ctx, tx, req)
					if err == nil {
						ids[i] = u.ID
					}
					return err
				})
			}()
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("racing creates answered %v (errors %v), want one session", ids, errs)
			}
		}
	})
}

func abortUpload(t *testing.T, store *storage.Store, id string) (*agentfs.Upload, bool) {
	t.Helper()
	var (
		u       *agentfs.Upload
		aborted bool
	)
	err := store.WithTx(context.Background(), func(tx pgx.Tx) (err error) {
		u, aborted, err = store.AbortUploadTx(context.Background(), tx, "s", id)
		return err
	})
	if err != nil {
		t.Fatalf("abort %s: %v", id, err)
	}
	return u, aborted
}

func TestSendPart(t *testing.T) {
	ctx := context.Background()

	t.Run("RejectsAWrongSize", func(t *testing.T) {
		store, _ := setup(t)
		u, _ := openUpload(t, store, newUpload("p.bin", minPart+1024, ""))
		for _, tc := range []struct {
			n    int
			body string
		}{{1, "short"}, {2, string(make([]byte, 1023))}, {2, string(make([]byte, 1025))}} {
			if _, err := sendPart(ctx, store, "s", u.ID, tc.n, tc.body); !errors.Is(err, agentfs.ErrSizeMismatch) {
				t.Errorf("part %d of %d bytes: err %v, want ErrSizeMismatch", tc.n, len(tc.body), err)
			}
		}
		if got := getUpload(t, store, u.ID); len(got.Parts) != 0 {
			t.Fatalf("refused parts were recorded: %+v", got.Parts)
		}
	})

	// A part sent with its digest is checked by S3 itself (the digest goes
	// upstream as x-amz-content-sha256): bytes that match are recorded with
	// the digest as their SHA-256; bytes that do not are refused and never
	// assembled, and the file's sha256 is that of the bytes S3 holds.
	t.Run("ADigestIsCheckedByS3", func(t *testing.T) {
		store, _ := setup(t)
		whole := randomBytes(minPart+1024, 31)
		u, _ := openUpload(t, store, newUpload("digest.bin", int64(len(whole)), ""))
		one, two := whole[:minPart], whole[minPart:]
		sum := sha256.Sum256(one)
		wrong := bytes.Clone(one)
		wrong[len(wrong)/2] ^= 1
		send := func(n int, body []byte, digest []byte) (*agentfs.Part, error) {
			p, err := store.SendPart(ctx, "s", u.ID, n, bytes.NewReader(body), int64(len(body)), digest)
			if err != nil {
				return nil, err
			}
			err = store.WithTx(ctx, func(tx pgx.Tx) error { return p.Apply(ctx, tx) })
			p.Finish(ctx, err)
			return p.Part, err
		}
		if _, err := send(1, wrong, sum[:]); !errors.Is(err, agentfs.ErrChecksumMismatch) {
			t.Fatalf("part 1 with bytes its digest does not name: err %v, want ErrChecksumMismatch", err)
		}
		p, err := send(1, one, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		if p.SHA256 != hexSHA(one) || p.SizeBytes != int64(len(one)) {
			t.Fatalf("part 1 recorded as %+v, want sha256 %s", p, hexSHA(one))
		}
		putPart(t, store, u.ID, 2, string(two))
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{SHA256: hexSHA(whole)})
		if f.SHA256 != hexSHA(whole) {
			t.Fatalf("file sha256 %s, want %s", f.SHA256, hexSHA(whole))
		}
	})

	t.Run("RejectsAPartNumberOutOfRange", func(t *testing.T) {
		store, _ := setup(t)
		u, _ := openUpload(t, store, newUpload("p.bin", 10, ""))
		for _, n := range []int{0, -1, 2} {
			if _, err := sendPart(ctx, store, "s", u.ID, n, "0123456789"); !errors.Is(err, agentfs.ErrPartOutOfRange) {
				t.Errorf("part %d: err %v, want ErrPartOutOfRange", n, err)
			}
		}
	})

	t.Run("RejectsASessionNoLongerPending", func(t *testing.T) {
		store, _ := setup(t)
		aborted, _ := openUpload(t, store, newUpload("aborted.bin", 10, ""))
		abortUpload(t, store, aborted.ID)
		expired, _ := openUpload(t, store, newUpload("expired.bin", 10, ""))
		seed(t, store, `UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)
		completed, _ := openUpload(t, store, newUpload("completed.bin", 10, ""))
		putPart(t, store, completed.ID, 1, "0123456789")
		mustComplete(t, store, completed.ID, agentfs.CompleteRequest{})
		failed, _ := openUpload(t, store, newUpload("failed.bin", 10, hexSHA([]byte("not this"))))
		putPart(t, store, failed.ID, 1, "0123456789")
		if _, _, err := completeUpload(ctx, store, "s", failed.ID, agentfs.CompleteRequest{}); !errors.Is(err, agentfs.ErrChecksumMismatch) {
			t.Fatalf("complete with a wrong sha256: %v", err)
		}
		for _, tc := range []struct{ id, want string }{
			{aborted.ID, agentfs.UploadAborted}, {expired.ID, agentfs.UploadExpired},
			{completed.ID, agentfs.UploadCompleted}, {failed.ID, agentfs.UploadFailed},
		} {
			_, err := sendPart(ctx, store, "s", tc.id, 1, "0123456789")
			var state *agentfs.UploadStateError
			if !errors.As(err, &state) || state.Status != tc.want {
				t.Errorf("part to a session that is %s: err %v", tc.want, err)
			}
		}
	})

	t.Run("AnotherSubjectsSessionIsNotFound", func(t *testing.T) {
		store, _ := setup(t)
		u, _ := openUpload(t, store, newUpload("p.bin", 10, ""))
		if _, err := sendPart(ctx, store, "mallory", u.ID, 1, "0123456789"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("another subject's part: %v", err)
		}
		if _, err := sendPart(ctx, store, "s", "upl_nonsense", 1, "0123456789"); !errors.Is(err, agentfs.ErrNotFound) {
			t.Fatalf("a malformed id: %v", err)
		}
	})

	t.Run("PartsInOrderBuildTheRunningHash", func(t *testing.T) {
		store, _ := setup(t)
		u, whole, p1, p2 := openTwoParts(t, store, "inorder.bin", 1)
		putPart(t, store, u.ID, 1, string(p1))
		wantHashed(t, store, u.ID, 1, "after part 1")
		part := putPart(t, store, u.ID, 2, string(p2))
		if part.SHA256 != hexSHA(p2) || part.SizeBytes != int64(len(p2)) {
			t.Fatalf("part 2: %+v, want the part's own size and sha256", part)
		}
		wantHashed(t, store, u.ID, 2, "after part 2")
		f, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{SHA256: hexSHA(whole)})
		if !created || f.SHA256 != hexSHA(whole) || f.SizeBytes != int64(len(whole)) || f.Version != 1 {
			t.Fatalf("file: created=%v %+v, want version 1 of %d bytes with sha256 %s", created, f, len(whole), hexSHA(whole))
		}
		if !bytes.Equal(readFile(t, store, f), whole) {
			t.Fatal("the assembled content differs from the parts")
		}
	})

	// A running hash that covers every part is the file's sha256: complete
	// reads nothing back. Seeding the hash state of other content shows it:
	// the file is given that content's sha256.
	t.Run("CompleteTrustsARunningHashThatCoversEveryPart", func(t *testing.T) {
		store, _ := setup(t)
		u, whole, p1, p2 := openTwoParts(t, store, "trust.bin", 2)
		putPart(t, store, u.ID, 1, string(p1))
		putPart(t, store, u.ID, 2, string(p2))
		other := randomBytes(len(whole), 3)
		seed(t, store, `UPDATE uploads SET hash_state = $2 WHERE id = $1`, u.ID, hashState(other))
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if f.SHA256 != hexSHA(other) {
			t.Fatalf("sha256 %s, want the seeded running hash's %s: complete read the content back", f.SHA256, hexSHA(other))
		}
	})

	t.Run("PartsOutOfOrderStillGiveTheWholeFilesSHA256", func(t *testing.T) {
		store, _ := setup(t)
		whole := randomBytes(2*minPart+1024, 4) // three parts
		parts := [][]byte{whole[:minPart], whole[minPart : 2*minPart], whole[2*minPart:]}
		u, _ := openUpload(t, store, newUpload("outoforder.bin", int64(len(whole)), ""))
		for _, n := range []int{3, 1, 2} {
			putPart(t, store, u.ID, n, string(parts[n-1]))
		}
		// Part 3 came first and was held in memory; part 1 started the
		// hash, and part 2 carried it over part 3.
		wantHashed(t, store, u.ID, 3, "after parts 3, 1 and 2")
		completeReadsNothing(t, store, u.ID, whole)
	})

	t.Run("APartAheadOfTheHashWaitsInMemoryForItsTurn", func(t *testing.T) {
		store, _ := setup(t)
		u, whole, p1, p2 := openTwoParts(t, store, "backwards.bin", 5)
		putPart(t, store, u.ID, 2, string(p2))
		wantHashed(t, store, u.ID, 0, "part 2 alone must not fold into the running hash")
		putPart(t, store, u.ID, 1, string(p1))
		wantHashed(t, store, u.ID, 2, "after part 1: part 1, then the part 2 held for it")
		completeReadsNothing(t, store, u.ID, whole)
	})

	t.Run("APartResentWithOtherBytesAfterHashingResetsTheRunningHash", func(t *testing.T) {
		store, _ := setup(t)
		u, _, p1, p2 := openTwoParts(t, store, "resent.bin", 6)
		putPart(t, store, u.ID, 1, string(p1))
		putPart(t, store, u.ID, 2, string(p2))
		putPart(t, store, u.ID, 1, string(p1)) // the same bytes again change nothing
		wantHashed(t, store, u.ID, 2, "an identical resend changes nothing")
		q1 := randomBytes(minPart, 7)
		putPart(t, store, u.ID, 1, string(q1))
		// The hash starts again from the new part 1; part 2 was hashed
		// after the old one, so it is read back at complete.
		if got := getUpload(t, store, u.ID); got.HashedParts != 1 || !bytes.Equal(got.HashState, hashState(q1)) {
			t.Fatalf("after part 1 changed: hashed_parts %d; want 1, over the new part 1", got.HashedParts)
		}
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if f.SHA256 != hexSHA(q1, p2) {
			t.Fatalf("sha256 %s, want %s (the resent part 1 then part 2)", f.SHA256, hexSHA(q1, p2))
		}
		if !bytes.Equal(readFile(t, store, f), append(append([]byte{}, q1...), p2...)) {
			t.Fatal("the assembled content is not the resent part 1 then part 2")
		}
	})

	// Part 2 extends the running hash as it was when part 2 began: over part
	// 1's first bytes. If part 1 is replaced twice while part 2 streams (the
	// hash reset, then rebuilt over the new part 1), part 2 must not fold
	// itself onto the state it started from, or the file's sha256 would
	// name bytes it does not hold.
	t.Run("APartReplacedWhileTheNextStreamsLeavesNoStaleRunningHash", func(t *testing.T) {
		store, _ := setup(t)
		u, _, p1, p2 := openTwoParts(t, store, "stale.bin", 8)
		putPart(t, store, u.ID, 1, string(p1))
		b1, d1 := randomBytes(minPart, 9), randomBytes(minPart, 10)
		body := storagetest.OnFirstRead(bytes.NewReader(p2), func() {
			for _, p := range [][]byte{b1, d1} {
				if _, err := sendPart(ctx, store, "s", u.ID, 1, string(p)); err != nil {
					t.Errorf("resend part 1: %v", err)
				}
			}
		})
		pending, err := store.SendPart(ctx, "s", u.ID, 2, body, int64(len(p2)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.WithTx(ctx, func(tx pgx.Tx) error { return pending.Apply(ctx, tx) }); err != nil {
			t.Fatal(err)
		}
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if got := readFile(t, store, f); hexSHA(got) != hexSHA(d1, p2) {
			t.Fatalf("the file holds %s, not the last part 1 then part 2", hexSHA(got))
		}
		if want := hexSHA(d1, p2); f.SHA256 != want {
			t.Fatalf("sha256 %s, want %s (the last part 1 then part 2); sha256 of the first part 1 then part 2 is %s",
				f.SHA256, want, hexSHA(p1, p2))
		}
	})
}

func TestCompleteUpload(t *testing.T) {
	ctx := context.Background()

	// ready opens a session of two parts and sends both.
	ready := func(t *testing.T, store *storage.Store, path string, seed int64, sum string) (*agentfs.Upload, []byte) {
		t.Helper()
		whole, p1, p2 := twoParts(seed)
		u, _ := openUpload(t, store, newUpload(path, int64(len(whole)), sum))
		putPart(t, store, u.ID, 2, string(p2))
		putPart(t, store, u.ID, 1, string(p1))
		return u, whole
	}

	t.Run("ListsTheMissingParts", func(t *testing.T) {
		store, _ := setup(t)
		whole := randomBytes(2*minPart+1024, 11)
		u, _ := openUpload(t, store, newUpload("missing.bin", int64(len(whole)), ""))
		putPart(t, store, u.ID, 2, string(whole[minPart:2*minPart]))
		_, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		var missing *agentfs.PartsMissingError
		if !errors.As(err, &missing) || fmt.Sprint(missing.Missing) != "[1 3]" {
			t.Fatalf("err %v, want parts 1 and 3 missing", err)
		}
		if got := getUpload(t, store, u.ID); got.Status != agentfs.UploadPending {
			t.Fatalf("a refused complete left the session %s", got.Status)
		}
	})

	t.Run("ADeclaredSHA256ThatDoesNotMatchFailsTheSession", func(t *testing.T) {
		store, b := setup(t)
		u, whole := ready(t, store, "wrong.bin", 12, hexSHA([]byte("something else")))
		_, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		if !errors.Is(err, agentfs.ErrChecksumMismatch) {
			t.Fatalf("err %v, want ErrChecksumMismatch", err)
		}
		if got := getUpload(t, store, u.ID); got.Status != agentfs.UploadFailed || got.FileID != "" {
			t.Fatalf("session after the mismatch: %s (file %q), want failed with no file", got.Status, got.FileID)
		}
		if keys := storagetest.ObjectKeys(t, b.cfg); len(keys) != 0 {
			t.Fatalf("the assembled object survived: %v", keys)
		}
		if n := countFiles(t, store, "wrong.bin"); n != 0 {
			t.Fatalf("%d files, want none", n)
		}
		// Asking again with the right sha256 cannot revive it.
		if _, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{SHA256: hexSHA(whole)}); !errors.Is(err, agentfs.ErrChecksumMismatch) {
			t.Fatalf("complete of a failed session: %v", err)
		}
	})

	t.Run("ASHA256GivenAtCompleteOverridesTheSessions", func(t *testing.T) {
		store, _ := setup(t)
		u, whole := ready(t, store, "override.bin", 13, hexSHA([]byte("stale declaration")))
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{SHA256: hexSHA(whole)})
		if f.SHA256 != hexSHA(whole) {
			t.Fatalf("sha256 %s", f.SHA256)
		}
	})

	t.Run("RefusesALivePathUnlessReplacing", func(t *testing.T) {
		store, _ := setup(t)
		u, whole := ready(t, store, "taken.bin", 14, "")
		holder, err := putFile(ctx, store, put("taken.bin", false), bytes.NewReader([]byte("first")), alone)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{})
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) || exists.ExistingFileID != holder.File.ID {
			t.Fatalf("err %v, want PathExistsError naming %s", err, holder.File.ID)
		}
		if got := getUpload(t, store, u.ID); got.Status != agentfs.UploadPending {
			t.Fatalf("a refused complete left the session %s", got.Status)
		}
		if _, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{IfMatch: holder.File.ETag()}); !errors.Is(err, agentfs.ErrIfMatchWithoutReplace) {
			t.Fatalf("If-Match without replace: %v", err)
		}
		replace := true
		if _, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{Replace: &replace, IfMatch: `"` + hexSHA([]byte("no")) + `"`}); !errors.Is(err, agentfs.ErrPreconditionFailed) {
			t.Fatalf("If-Match of another etag: %v", err)
		}
		f, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{Replace: &replace, IfMatch: holder.File.ETag()})
		if created || f.ID != holder.File.ID || f.Version != 2 || f.SHA256 != hexSHA(whole) {
			t.Fatalf("replace by complete: created=%v %+v, want version 2 of %s", created, f, holder.File.ID)
		}
	})

	t.Run("ACompletedSessionAnswersItsFileAgain", func(t *testing.T) {
		store, b := setup(t)
		u, _ := ready(t, store, "again.bin", 15, "")
		first, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if !created {
			t.Fatal("the first complete did not create the file")
		}
		again, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if created || again.ID != first.ID || again.Version != first.Version || again.BlobKey != first.BlobKey {
			t.Fatalf("repeat: created=%v %+v, want the same file %+v", created, again, first)
		}
		if got := getUpload(t, store, u.ID); got.Status != agentfs.UploadCompleted || got.FileID != first.ID {
			t.Fatalf("session: %s file %q", got.Status, got.FileID)
		}
		if keys := storagetest.ObjectKeys(t, b.cfg); len(keys) != 1 || keys[0] != first.BlobKey {
			t.Fatalf("objects %v, want only the file's blob %s", keys, first.BlobKey)
		}
	})

	t.Run("RacingCompletesCommitOneFile", func(t *testing.T) {
		store, _ := setup(t)
		u, whole := ready(t, store, "race.bin", 16, "") // out of order: complete reads back
		var wg sync.WaitGroup
		files := make([]*agentfs.File, 4)
		errs := make([]error, len(files))
		for i := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				files[i], _, errs[i] = completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{})
			}()
		}
		wg.Wait()
		ids := map[string]bool{}
		for i, err := range errs {
			switch {
			case err == nil:
				ids[files[i].ID] = true
			case !completing(err):
				t.Fatalf("complete %d: %v, want the file or a complete running", i, err)
			}
		}
		if len(ids) != 1 || countFiles(t, store, "race.bin") != 1 {
			t.Fatalf("completes answered files %v, %d rows at the path; want exactly one", ids, countFiles(t, store, "race.bin"))
		}
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if !ids[f.ID] || f.Version != 1 || f.SHA256 != hexSHA(whole) {
			t.Fatalf("the file: %+v", f)
		}
	})

	t.Run("ASessionLeftCompletingByADeadCompleteCanBeCompleted", func(t *testing.T) {
		store, _ := setup(t)
		u, whole := ready(t, store, "dead.bin", 17, "")
		// The dead complete got as far as assembling the object. It replaces,
		// so only its claim on the session keeps it from committing late.
		replace := true
		dead, err := store.PrepareComplete(ctx, "s", u.ID, agentfs.CompleteRequest{Replace: &replace})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := completeUpload(ctx, store, "s", u.ID, agentfs.CompleteRequest{}); !completing(err) {
			t.Fatalf("complete while another holds the lease: %v", err)
		}
		seed(t, store, `UPDATE uploads SET completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		f, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if !created || f.SHA256 != hexSHA(whole) || !bytes.Equal(readFile(t, store, f), whole) {
			t.Fatalf("takeover: created=%v %+v", created, f)
		}
		// The dead complete, waking late, commits nothing.
		err = store.WithTx(ctx, func(tx pgx.Tx) error { _, _, err := dead.Apply(ctx, tx, agentfs.Origin{}); return err })
		if !errors.Is(err, agentfs.ErrUploadCompleting) {
			t.Fatalf("the taken-over complete: %v, want ErrUploadCompleting", err)
		}
		dead.Finish(ctx, err)
		if got := getUpload(t, store, u.ID); got.Status != agentfs.UploadCompleted || got.FileID != f.ID {
			t.Fatalf("session after the late complete: %s file %q", got.Status, got.FileID)
		}
		if n := countFiles(t, store, "dead.bin"); n != 1 {
			t.Fatalf("%d files at the path, want 1", n)
		}
		if !bytes.Equal(readFile(t, store, f), whole) {
			t.Fatal("the late complete removed the file's blob")
		}
	})

	t.Run("ACompleteThatDiedBeforeS3AssembledCanBeRedone", func(t *testing.T) {
		store, _ := setup(t)
		u, whole := ready(t, store, "early.bin", 18, "")
		seed(t, store, `UPDATE uploads SET status = 'completing', completing_until = now() - interval '1 second' WHERE id = $1`, u.ID)
		f, created := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		if !created || f.SHA256 != hexSHA(whole) {
			t.Fatalf("complete after a dead one: created=%v %+v", created, f)
		}
	})
}

func TestAbortUpload(t *testing.T) {
	t.Run("AbortsAPendingSessionOnce", func(t *testing.T) {
		store, b := setup(t)
		_, p1, _ := twoParts(20)
		u, _ := openUpload(t, store, newUpload("abort.bin", minPart+1024, ""))
		putPart(t, store, u.ID, 1, string(p1))
		got, aborted := abortUpload(t, store, u.ID)
		if !aborted || got.Status != agentfs.UploadAborted || len(got.Parts) != 1 {
			t.Fatalf("abort: aborted=%v %+v", aborted, got)
		}
		if multipartGone(t, b, u) {
			t.Fatal("S3 lost the parts before the abort committed and was dropped")
		}
		store.DropMultipart(context.Background(), got)
		if !multipartGone(t, b, u) {
			t.Fatal("the S3 multipart upload survived DropMultipart")
		}
		store.DropMultipart(context.Background(), got) // a repeated drop is harmless
		again, aborted := abortUpload(t, store, u.ID)
		if aborted || again.Status != agentfs.UploadAborted {
			t.Fatalf("second abort: aborted=%v status %s, want unchanged", aborted, again.Status)
		}
	})

	t.Run("LeavesAnEndedSessionAsItIs", func(t *testing.T) {
		store, _ := setup(t)
		u, _ := openUpload(t, store, newUpload("expired.bin", 10, ""))
		seed(t, store, `UPDATE uploads SET status = 'expired' WHERE id = $1`, u.ID)
		got, aborted := abortUpload(t, store, u.ID)
		if aborted || got.Status != agentfs.UploadExpired {
			t.Fatalf("abort of an expired session: aborted=%v status %s", aborted, got.Status)
		}
	})

	t.Run("RefusesACompletedSession", func(t *testing.T) {
		store, _ := setup(t)
		u, _ := openUpload(t, store, newUpload("done.bin", 10, ""))
		putPart(t, store, u.ID, 1, "0123456789")
		f, _ := mustComplete(t, store, u.ID, agentfs.CompleteRequest{})
		err := store.WithTx(context.Background(), func(tx pgx.Tx) error {
			_, _, err := store.AbortUploadTx(context.Background(), tx, "s", u.ID)
			return err
		})
		var state *agentfs.UploadStateError
		if !errors.As(err, &state) || state.Status != agentfs.UploadCompleted {
			t.Fatalf("abort of a completed session: %v", err)
		}
		if !bytes.Equal(readFile(t, store, f), []byte("0123456789")) {
			t.Fatal("the completed file lost its content")
		}
	})
}

func TestExpireUploads(t *testing.T) {
	store, b := setup(t)
	ctx := context.Background()
	_, p1, _ := twoParts(30)
	past := `UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`
	expired, _ := openUpload(t, store, newUpload("expired.bin", minPart+1024, ""))
	putPart(t, store, expired.ID, 1, string(p1))
	seed(t, store, past, expired.ID)
	live, _ := openUpload(t, store, newUpload("live.bin", minPart+1024, ""))
	putPart(t, store, live.ID, 1, string(p1))
	completing, _ := openUpload(t, store, newUpload("completing.bin", 10, ""))
	seed(t, store, past, completing.ID)
	seed(t, store, `UPDATE uploads SET status = 'completing', completing_until = now() + interval '1 hour' WHERE id = $1`, completing.ID)
	deadComplete, _ := openUpload(t, store, newUpload("dead.bin", 10, ""))
	seed(t, store, past, deadComplete.ID)
	seed(t, store, `UPDATE uploads SET status = 'completing', completing_until = now() - interval '1 second' WHERE id = $1`, deadComplete.ID)

	n, err := store.ExpireUploads(ctx)
	if err != nil || n != 2 {
		t.Fatalf("expired %d (%v), want the expired pending session and the one a dead complete left", n, err)
	}
	for _, tc := range []struct {
		u    *agentfs.Upload
		want string
	}{
		{expired, agentfs.UploadExpired}, {deadComplete, agentfs.UploadExpired},
		{live, agentfs.UploadPending}, {completing, agentfs.UploadCompleting},
	} {
		if got := getUpload(t, store, tc.u.ID); got.Status != tc.want {
			t.Errorf("%s: status %s, want %s", tc.u.Path, got.Status, tc.want)
		}
	}
	if !multipartGone(t, b, expired) {
		t.Error("the expired session's S3 multipart upload survived")
	}
	if multipartGone(t, b, live) {
		t.Error("the live session lost its S3 multipart upload")
	}
	if n, err := store.ExpireUploads(ctx); err != nil || n != 0 {
		t.Fatalf("second run expired %d (%v), want 0", n, err)
	}
}

// completing reports whether err says another complete of the session is
// running: a retryable answer, never a second file.
func completing(err error) bool {
	var busy *agentfs.UploadBusyError
	return errors.Is(err, agentfs.ErrUploadCompleting) || errors.As(err, &busy)
}
