package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// partSize is the test server's part size (apitest.Options' default).
const partSize = 5 << 20

// localFile writes size reproducible random bytes to a temporary file and
// returns its path, the bytes and their SHA-256.
func localFile(t *testing.T, size int, seed uint64) (string, []byte, string) {
	t.Helper()
	data := make([]byte, size)
	var key [32]byte
	key[0] = byte(seed)
	_, _ = rand.NewChaCha8(key).Read(data)
	p := filepath.Join(t.TempDir(), "local.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return p, data, hex.EncodeToString(sum[:])
}

// progressLog records the calls of an upload's Progress callback.
type progressLog struct {
	mu      sync.Mutex
	calls   int
	last    int64
	total   int64
	bad     string
	running atomic.Bool
}

func (l *progressLog) record(sent, total int64) {
	if !l.running.CompareAndSwap(false, true) {
		l.bad = "called concurrently"
	}
	defer l.running.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.last, l.total = sent, total
	if sent < 0 || sent > total {
		l.bad = "sent outside [0, total]"
	}
}

// check fails unless the callback was called, sanely, and ended at want.
func (l *progressLog) check(t *testing.T, want int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == 0 || l.bad != "" || l.last != want || l.total != want {
		t.Fatalf("progress: %d calls, last %d of %d (%s), want to end at %d", l.calls, l.last, l.total, l.bad, want)
	}
}

// isPart matches the PUT of part n of any session.
func isPart(n string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == "PUT" && strings.HasSuffix(r.URL.Path, "/parts/"+n)
	}
}

func partPuts(b *bundle) []seenRequest {
	return b.proxy.where(func(s seenRequest) bool { return s.Method == "PUT" && strings.Contains(s.Path, "/parts/") })
}

// expectContent fails unless the file's content is data.
func expectContent(t *testing.T, b *bundle, f *client.File, data []byte) {
	t.Helper()
	content, err := b.direct.FileContent(context.Background(), f.ID, client.ContentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer content.Close()
	got, err := io.ReadAll(content)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content of %s: %d bytes (%v), want the %d bytes sent", f.ID, len(got), err, len(data))
	}
}

// TestUploadFile sends a 12 MiB file as three parts, in parallel, each
// with its Content-Digest, and reports progress up to the total.
func TestUploadFile(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("run-up"))
	ctx := context.Background()
	const size = 12 << 20
	local, data, sum := localFile(t, size, 1)

	// Part 1 is held until another part arrives: only parallel sends get
	// past it.
	var parallel atomic.Bool
	b.proxy.injectWhere(isPart("1"), 1, func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		for held := true; held && !parallel.Load(); {
			parallel.Store(len(p.where(func(s seenRequest) bool { return s.Method == "PUT" && !strings.HasSuffix(s.Path, "/parts/1") })) > 0)
			select {
			case <-tick.C:
			case <-deadline:
				held = false // stop holding; the assertion below then fails
			}
		}
		forwardAndAnswer(p, w, r, rec)
	})
	var prog, hashed progressLog
	var session *client.Upload
	var sentBeforeHashed atomic.Bool
	f, err := c.UploadFile(ctx, local, "big/data.bin", client.UploadOptions{
		ContentType: "application/x-test", Parallel: 3,
		Progress: func(sent, total int64) {
			hashed.mu.Lock()
			if hashed.last != size {
				sentBeforeHashed.Store(true)
			}
			hashed.mu.Unlock()
			prog.record(sent, total)
		},
		HashProgress: hashed.record,
		OnSession:    func(u *client.Upload) { session = u },
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "big/data.bin" || f.SizeBytes != size || f.SHA256 != sum || f.ContentType != "application/x-test" ||
		f.Version != 1 || f.RunID == nil || *f.RunID != "run-up" {
		t.Fatalf("file %+v", f)
	}
	if session == nil || session.PartCount != 3 || session.PartSize != partSize || len(session.Parts) != 0 ||
		session.SHA256 == nil || *session.SHA256 != sum || session.Status != client.UploadPending {
		t.Fatalf("session %+v", session)
	}
	if !parallel.Load() {
		t.Fatal("no other part was sent while part 1 was held")
	}
	prog.check(t, size)
	hashed.check(t, size)
	if sentBeforeHashed.Load() {
		t.Fatal("Progress was called before the content was hashed")
	}
	puts := partPuts(b)
	if len(puts) != 3 {
		t.Fatalf("part uploads %+v, want 3", puts)
	}
	for _, p := range puts {
		if !strings.HasPrefix(p.Digest, "sha-256=:") || p.Key == "" || p.Status != 200 {
			t.Fatalf("part upload %+v, want a Content-Digest, a key and 200", p)
		}
	}
	expectContent(t, b, f, data)
	u, err := c.Upload(ctx, session.ID)
	if err != nil || u.Status != client.UploadCompleted || u.File == nil || u.File.ID != f.ID || len(u.Parts) != 3 {
		t.Fatalf("session after: %+v, %v", u, err)
	}
	// Parts 2 and 3 came before part 1, and the server kept them for their
	// turn: complete read nothing back to learn the file's sha256.
	if n := b.srv.Store.Counters().ReadBackBytes; n != 0 {
		t.Fatalf("complete read %d bytes back", n)
	}

	t.Run("PathExistsThenReplace", func(t *testing.T) {
		changed, newData, newSum := localFile(t, 6<<20, 2)
		_, err := c.UploadFile(ctx, changed, "big/data.bin", client.UploadOptions{})
		if p := expectProblem(t, err, 409, "PATH_EXISTS"); p.ExistingFileID != f.ID {
			t.Fatalf("problem %+v", p)
		}
		// The session the failed complete left is resumed: nothing is
		// sent again, and Replace applies although it was started without.
		before := len(partPuts(b))
		var resumed *client.Upload
		r, err := c.UploadFile(ctx, changed, "big/data.bin", client.UploadOptions{Replace: true,
			OnSession: func(u *client.Upload) { resumed = u }})
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != f.ID || r.Version != 2 || r.SHA256 != newSum || resumed == nil || len(resumed.Parts) != 2 {
			t.Fatalf("replaced %+v from session %+v", r, resumed)
		}
		if n := len(partPuts(b)) - before; n != 0 {
			t.Fatalf("%d parts sent again to a session that held them all", n)
		}
		expectContent(t, b, r, newData)
	})
}

// TestUploadFileResumes: a session with one right part and one wrong one
// is resumed; only the wrong part and the missing one are sent.
func TestUploadFileResumes(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	const size = 12 << 20
	local, data, sum := localFile(t, size, 3)

	u, err := c.CreateUpload(ctx, "resumed.bin", size, client.CreateUploadOptions{SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutPart(ctx, u.ID, 2, bytes.NewReader(data[partSize:2*partSize]), partSize, client.PartOptions{}); err != nil {
		t.Fatal(err)
	}
	wrong := bytes.Repeat([]byte{'x'}, partSize)
	if _, err := c.PutPart(ctx, u.ID, 1, bytes.NewReader(wrong), partSize, client.PartOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(partPuts(b))

	var prog progressLog
	var resumed *client.Upload
	f, err := c.UploadFile(ctx, local, "resumed.bin", client.UploadOptions{Progress: prog.record,
		OnSession: func(u *client.Upload) { resumed = u }})
	if err != nil {
		t.Fatal(err)
	}
	if resumed == nil || resumed.ID != u.ID || len(resumed.Parts) != 2 {
		t.Fatalf("resumed %+v, want session %s with its 2 parts", resumed, u.ID)
	}
	var sent []string
	for _, p := range partPuts(b)[before:] {
		sent = append(sent, p.Path[strings.LastIndex(p.Path, "/")+1:])
	}
	if len(sent) != 2 || sent[0] == sent[1] || !strings.Contains("1 3", sent[0]) || !strings.Contains("1 3", sent[1]) {
		t.Fatalf("parts sent on resume: %v, want 1 and 3", sent)
	}
	if f.SHA256 != sum || f.SizeBytes != size {
		t.Fatalf("file %+v", f)
	}
	prog.check(t, size)
	expectContent(t, b, f, data)
	if n := len(b.proxy.requests("POST", "/v1/uploads/"+u.ID+"/complete")); n != 1 {
		t.Fatalf("%d completes of the resumed session", n)
	}
}

// TestUploadPartRetried: a part answered 503 is sent again, whole, with
// the same key and digest; the progress still ends at the total.
func TestUploadPartRetried(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	const size = 6 << 20
	local, data, _ := localFile(t, size, 4)
	b.proxy.injectWhere(isPart("2"), 1, answerProblem(503, "STORAGE_UNAVAILABLE", ""))
	var prog progressLog
	f, err := c.UploadFile(context.Background(), local, "retried.bin", client.UploadOptions{Progress: prog.record})
	if err != nil {
		t.Fatal(err)
	}
	var second []seenRequest
	for _, p := range partPuts(b) {
		if strings.HasSuffix(p.Path, "/parts/2") {
			second = append(second, p)
		}
	}
	if len(second) != 2 || second[0].Status != 503 || second[1].Status != 200 || second[0].Key != second[1].Key ||
		second[0].Digest != second[1].Digest || second[0].BodyBytes != 1<<20 || second[1].BodyBytes != 1<<20 {
		t.Fatalf("part 2 attempts %+v, want 503 then 200, alike and whole", second)
	}
	prog.check(t, size)
	expectContent(t, b, f, data)
}

// TestUploadRepeatsWithoutKeys: without keys, a create, a part and a
// complete whose connections broke are sent again, and there is one file.
func TestUploadRepeatsWithoutKeys(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithoutIdempotencyKeys())
	local, data, _ := localFile(t, 6<<20, 5)
	b.proxy.inject("POST", "/v1/uploads", 1, dropAfterCommit)
	b.proxy.injectWhere(isPart("1"), 1, dropAfterCommit)
	b.proxy.injectWhere(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/complete") }, 1, dropAfterCommit)
	f, err := c.UploadFile(context.Background(), local, "unkeyed.bin", client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range b.proxy.where(func(seenRequest) bool { return true }) {
		if s.Key != "" {
			t.Fatalf("request %+v carried a key", s)
		}
	}
	creates := b.proxy.requests("POST", "/v1/uploads")
	completes := b.proxy.where(func(s seenRequest) bool { return strings.HasSuffix(s.Path, "/complete") })
	if len(creates) != 2 || len(partPuts(b)) != 3 || len(completes) != 2 || completes[1].Status != 200 {
		t.Fatalf("creates %+v, parts %+v, completes %+v: want each broken one sent twice", creates, partPuts(b), completes)
	}
	b.expectOneFile(t, "unkeyed.bin", f.ID)
	expectContent(t, b, f, data)
}

// TestUploadReplaysLostResponses: with keys, a create, parts and a
// complete whose responses were lost are sent again with the same key and
// answered from what the server recorded.
func TestUploadReplaysLostResponses(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	local, data, _ := localFile(t, 6<<20, 9)
	complete := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/complete") }
	b.proxy.inject("POST", "/v1/uploads", 1, dropAfterCommit)
	b.proxy.injectWhere(isPart("1"), 1, dropAfterCommit)
	b.proxy.injectWhere(isPart("2"), 1, dropAfterCommit)
	b.proxy.injectWhere(complete, 1, dropAfterCommit)
	f, err := c.UploadFile(context.Background(), local, "keyed.bin", client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string][]seenRequest{}
	for _, s := range b.proxy.where(func(seenRequest) bool { return true }) {
		name := s.Method + " " + s.Path[strings.LastIndex(s.Path, "/")+1:]
		attempts[name] = append(attempts[name], s)
	}
	for _, name := range []string{"POST uploads", "PUT 1", "PUT 2", "POST complete"} {
		a := attempts[name]
		if len(a) != 2 || a[0].Status != 0 || a[0].ServerStatus/100 != 2 || !a[1].Replayed || a[1].Key == "" || a[1].Key != a[0].Key {
			t.Fatalf("%s: attempts %+v, want a lost answer, then a replay with the same key", name, a)
		}
	}
	b.expectOneFile(t, "keyed.bin", f.ID)
	expectContent(t, b, f, data)
}

// TestUploadSessionRoutes drives the session routes one by one.
func TestUploadSessionRoutes(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	_, data, sum := localFile(t, partSize+10, 6)

	u, err := c.CreateUpload(ctx, "s/file.bin", int64(len(data)), client.CreateUploadOptions{ContentType: "text/plain", Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if u.PartCount != 2 || u.PartSize != partSize || u.IfExists != "replace" || u.SHA256 != nil || u.ContentType != "text/plain" ||
		!strings.HasPrefix(u.ID, "upl_") || u.ExpiresAt.IsZero() {
		t.Fatalf("created %+v", u)
	}
	_, err = c.PutPart(ctx, u.ID, 1, bytes.NewReader(data[:100]), 100, client.PartOptions{})
	expectProblem(t, err, 422, "SIZE_MISMATCH")
	p, err := c.PutPart(ctx, u.ID, 2, bytes.NewReader(data[partSize:]), 10, client.PartOptions{})
	if err != nil || p.PartNumber != 2 || p.SizeBytes != 10 || p.UploadID != u.ID || p.SHA256 != sha(string(data[partSize:])) {
		t.Fatalf("part 2: %+v, %v", p, err)
	}
	_, err = c.CompleteUpload(ctx, u.ID, client.CompleteOptions{})
	if p := expectProblem(t, err, 422, "PARTS_MISSING"); len(p.MissingParts) != 1 || p.MissingParts[0] != 1 {
		t.Fatalf("problem %+v", p)
	}
	// A stream is sent with the size it is said to have.
	if _, err := c.PutPart(ctx, u.ID, 1, stream{bytes.NewReader(data[:partSize])}, partSize, client.PartOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutPart(ctx, u.ID, 1, bytes.NewReader(data), partSize, client.PartOptions{}); err == nil ||
		!strings.Contains(err.Error(), "not 5242880") {
		t.Fatalf("a body longer than its size: %v", err)
	}
	got, err := c.Upload(ctx, u.ID)
	if err != nil || len(got.Parts) != 2 || got.Parts[0].PartNumber != 1 || got.Status != client.UploadPending {
		t.Fatalf("session %+v, %v", got, err)
	}
	f, err := c.CompleteUpload(ctx, u.ID, client.CompleteOptions{SHA256: sum})
	if err != nil || f.SHA256 != sum || f.ContentType != "text/plain" {
		t.Fatalf("complete: %+v, %v", f, err)
	}
	again, err := c.CompleteUpload(ctx, u.ID, client.CompleteOptions{})
	if err != nil || again.ID != f.ID {
		t.Fatalf("complete again: %+v, %v", again, err)
	}
	_, err = c.AbortUpload(ctx, u.ID, client.AbortOptions{})
	expectProblem(t, err, 409, "UPLOAD_COMPLETED")

	t.Run("Abort", func(t *testing.T) {
		v, err := c.CreateUpload(ctx, "s/aborted.bin", 10, client.CreateUploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.AbortUpload(ctx, v.ID, client.AbortOptions{})
		if err != nil || a.Status != client.UploadAborted {
			t.Fatalf("abort: %+v, %v", a, err)
		}
		if a, err = c.AbortUpload(ctx, v.ID, client.AbortOptions{}); err != nil || a.Status != client.UploadAborted {
			t.Fatalf("abort again: %+v, %v", a, err)
		}
		_, err = c.PutPart(ctx, v.ID, 1, strings.NewReader("0123456789"), 10, client.PartOptions{})
		expectProblem(t, err, 409, "UPLOAD_ABORTED")
		_, err = c.Upload(ctx, "upl_nope")
		expectProblem(t, err, 404, "NOT_FOUND")
	})

	t.Run("ChecksumMismatchFailsSession", func(t *testing.T) {
		v, err := c.CreateUpload(ctx, "s/bad.bin", 3, client.CreateUploadOptions{SHA256: sha("abd")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutPart(ctx, v.ID, 1, strings.NewReader("abc"), 3, client.PartOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CompleteUpload(ctx, v.ID, client.CompleteOptions{})
		expectProblem(t, err, 422, "CHECKSUM_MISMATCH")
		failed, err := c.Upload(ctx, v.ID)
		if err != nil || failed.Status != client.UploadFailed || failed.Error == nil || failed.Error.Code != "CHECKSUM_MISMATCH" {
			t.Fatalf("failed session %+v, %v", failed, err)
		}
		if files := b.filesAt(t, "s/bad.bin"); len(files) != 0 {
			t.Fatalf("files %+v", files)
		}
	})

	t.Run("PartDigestChecked", func(t *testing.T) {
		v, err := c.CreateUpload(ctx, "s/digest.bin", 3, client.CreateUploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wrong := sha256.Sum256([]byte("abd"))
		_, err = c.PutPart(ctx, v.ID, 1, strings.NewReader("abc"), 3, client.PartOptions{ContentDigest: client.Digest(wrong[:])})
		expectProblem(t, err, 422, "CHECKSUM_MISMATCH")
	})
}

// TestPutPath sends small files with one POST and large ones, or those
// the server finds too large for one POST, through a session.
func TestPutPath(t *testing.T) {
	t.Parallel()
	c, b := setupWith(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 3 << 20}})
	ctx := context.Background()
	small, smallData, _ := localFile(t, 1000, 7)
	large, largeData, largeSum := localFile(t, 6<<20, 8)

	var prog progressLog
	f, err := c.PutPath(ctx, small, "p/small.bin", client.PutPathOptions{Threshold: 1 << 20,
		UploadOptions: client.UploadOptions{Progress: prog.record}})
	if err != nil {
		t.Fatal(err)
	}
	prog.check(t, 1000)
	if len(b.proxy.requests("POST", "/v1/files")) != 1 || len(b.proxy.requests("POST", "/v1/uploads")) != 0 {
		t.Fatal("a small file did not go as one POST /v1/files")
	}
	expectContent(t, b, f, smallData)

	g, err := c.PutPath(ctx, large, "p/large.bin", client.PutPathOptions{Threshold: 5 << 20})
	if err != nil || g.SHA256 != largeSum {
		t.Fatalf("large: %+v, %v", g, err)
	}
	if len(b.proxy.requests("POST", "/v1/files")) != 1 || len(b.proxy.requests("POST", "/v1/uploads")) != 1 {
		t.Fatal("a file above the threshold did not go through a session")
	}

	// Below the default threshold but above the server's 3 MiB limit: the
	// POST is refused, and a session takes over.
	h, err := c.PutPath(ctx, large, "p/refused.bin", client.PutPathOptions{})
	if err != nil || h.SHA256 != largeSum {
		t.Fatalf("after 413: %+v, %v", h, err)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 2 || posts[1].Status != 413 || len(b.proxy.requests("POST", "/v1/uploads")) != 2 {
		t.Fatalf("posts %+v, want a 413 then a session", posts)
	}
	expectContent(t, b, h, largeData)

	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := c.UploadFile(ctx, empty, "p/empty", client.UploadOptions{})
	if err != nil || e.SizeBytes != 0 {
		t.Fatalf("empty: %+v, %v", e, err)
	}
	if _, err := c.PutPath(ctx, t.TempDir(), "p/dir", client.PutPathOptions{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
	if _, err := c.UploadFile(ctx, small, "p/x", client.UploadOptions{SHA256: "nope"}); err == nil {
		t.Fatal("a malformed SHA256 was accepted")
	}
}
