package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// bundle is a real server, a fault proxy in front of it, and a client that
// bypasses the proxy to check what really happened.
type bundle struct {
	srv    *apitest.Server
	proxy  *faultProxy
	token  string
	direct *client.Client
}

// fast is the policy of tests whose waits are not the point.
var fast = client.RetryPolicy{MaxAttempts: 8, InitialDelay: 10 * time.Millisecond, MaxDelay: 2 * time.Second}

func setup(t *testing.T, opts ...client.Option) (*client.Client, *bundle) {
	t.Helper()
	return setupWith(t, apitest.Options{}, opts...)
}

func setupWith(t *testing.T, srvOpts apitest.Options, opts ...client.Option) (*client.Client, *bundle) {
	t.Helper()
	srv := apitest.NewServer(t, srvOpts)
	b := &bundle{srv: srv, proxy: newFaultProxy(t, srv.URL), token: srv.Token(t, "alice")}
	var err error
	b.direct, err = client.New(srv.URL, b.token, client.WithRetryPolicy(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b.proxy.URL, b.token, append([]client.Option{client.WithRetryPolicy(fast)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

// mustPut puts content at path through c, failing the test on an error.
func mustPut(t *testing.T, c *client.Client, path, content string, opts client.PutOptions) *client.File {
	t.Helper()
	f, err := c.PutFile(context.Background(), path, strings.NewReader(content), opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// filesAt lists every file that ever held path, deleted ones included.
func (b *bundle) filesAt(t *testing.T, path string) []client.File {
	t.Helper()
	l, err := b.direct.ListFiles(context.Background(), client.ListOptions{Path: path, IncludeDeleted: true})
	if err != nil {
		t.Fatalf("list %s: %v", path, err)
	}
	return l.Data
}

// expectOneFile fails unless exactly one file ever held path, and it is id.
func (b *bundle) expectOneFile(t *testing.T, path, id string) {
	t.Helper()
	files := b.filesAt(t, path)
	if len(files) != 1 || files[0].ID != id {
		t.Fatalf("files at %s: %+v, want exactly %s", path, files, id)
	}
}

func expectProblem(t *testing.T, err error, status int, code string) *client.Problem {
	t.Helper()
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("error %v (%T), want a *client.Problem %d %s", err, err, status, code)
	}
	if p.Status != status || p.Code != code || p.RequestID == "" {
		t.Fatalf("problem %+v, want %d %s with a request id", p, status, code)
	}
	return p
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// TestFiles goes through every files route with the client.
func TestFiles(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithAgentID("agent-a"), client.WithRunID("run-1"))
	ctx := context.Background()

	f := mustPut(t, c, "reports/summary.txt", "first draft", client.PutOptions{ContentType: "text/plain"})
	if f.Path != "reports/summary.txt" || f.SizeBytes != 11 || f.ContentType != "text/plain" || f.SHA256 != sha("first draft") ||
		f.Version != 1 || f.AgentID == nil || *f.AgentID != "agent-a" || f.RunID == nil || *f.RunID != "run-1" || f.DeletedAt != nil {
		t.Fatalf("created %+v", f)
	}
	if got, err := c.File(ctx, f.ID); err != nil || got.ETag != f.ETag || got.URL != f.URL {
		t.Fatalf("File: %+v, %v", got, err)
	}

	t.Run("Content", func(t *testing.T) {
		content, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(content)
		content.Close()
		if string(data) != "first draft" || content.Status != 200 || content.SHA256 != f.SHA256 ||
			content.Filename != "summary.txt" || content.ContentType != "text/plain" || content.Length != 11 || content.ETag != f.ETag {
			t.Fatalf("content %q %+v", data, content)
		}
		part, err := c.FileContent(ctx, f.ID, client.ContentOptions{Range: "bytes=6-"})
		if err != nil {
			t.Fatal(err)
		}
		data, _ = io.ReadAll(part)
		part.Close()
		if string(data) != "draft" || part.Status != 206 || part.ContentRange != "bytes 6-10/11" || part.SHA256 != f.SHA256 {
			t.Fatalf("range %q %+v", data, part)
		}
		_, err = c.FileContent(ctx, f.ID, client.ContentOptions{Range: "bytes=50-"})
		expectProblem(t, err, 416, "RANGE_NOT_SATISFIABLE")
	})

	t.Run("Replace", func(t *testing.T) {
		r := mustPut(t, c, "reports/summary.txt", "final version", client.PutOptions{Replace: true, ContentType: "text/plain"})
		if r.ID != f.ID || r.URL != f.URL || r.Version != 2 || r.SHA256 != sha("final version") {
			t.Fatalf("replaced %+v, was %+v", r, f)
		}
		_, err := c.PutFile(ctx, "reports/summary.txt", strings.NewReader("x"), client.PutOptions{Replace: true, IfMatch: f.ETag})
		expectProblem(t, err, 412, "PRECONDITION_FAILED")
	})

	t.Run("PathExists", func(t *testing.T) {
		_, err := c.PutFile(ctx, "reports/summary.txt", strings.NewReader("again"), client.PutOptions{})
		p := expectProblem(t, err, 409, "PATH_EXISTS")
		if p.ExistingFileID != f.ID || p.Retryable || client.ErrorCode(err) != "PATH_EXISTS" || !strings.Contains(err.Error(), "PATH_EXISTS") {
			t.Fatalf("problem %+v (%v)", p, err)
		}
	})

	t.Run("ListAndIterate", func(t *testing.T) {
		other, err := client.New(b.proxy.URL, b.token, client.WithRunID("run-2"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{f.ID}
		for i := range 4 {
			g, err := c.PutFile(ctx, "listed/"+strconv.Itoa(i), strings.NewReader("x"), client.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append([]string{g.ID}, want...) // newest first
		}
		if _, err := other.PutFile(ctx, "listed/other-run", strings.NewReader("y"), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		page, err := c.ListFiles(ctx, client.ListOptions{RunID: "run-1", Limit: 2})
		if err != nil || len(page.Data) != 2 || !page.HasMore || page.NextCursor == nil {
			t.Fatalf("first page %+v, %v", page, err)
		}
		var got []string
		for g, err := range c.AllFiles(ctx, client.ListOptions{RunID: "run-1", Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, g.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("run-1 files %v, want %v", got, want)
		}
		for g, err := range c.AllFiles(ctx, client.ListOptions{RunID: "run-1", Limit: 1}) {
			if err != nil || g.ID != want[0] {
				t.Fatalf("first of all: %v %v", g, err)
			}
			break // stopping early must not panic or fetch more
		}
		prefixed, err := c.ListFiles(ctx, client.ListOptions{Prefix: "listed/", AgentID: "agent-a"})
		if err != nil || len(prefixed.Data) != 4 || prefixed.HasMore {
			t.Fatalf("prefix+agent %+v, %v", prefixed, err)
		}
		_, err = c.ListFiles(ctx, client.ListOptions{Limit: 5000})
		expectProblem(t, err, 422, "VALIDATION_FAILED")
	})

	t.Run("DeleteAndRestore", func(t *testing.T) {
		d, err := c.DeleteFile(ctx, f.ID, client.DeleteOptions{})
		if err != nil || d.DeletedAt == nil || d.PurgeAfter == nil {
			t.Fatalf("deleted %+v, %v", d, err)
		}
		_, err = c.FileContent(ctx, f.ID, client.ContentOptions{})
		expectProblem(t, err, 404, "NOT_FOUND")
		if again, err := c.DeleteFile(ctx, f.ID, client.DeleteOptions{}); err != nil || again.DeletedAt == nil {
			t.Fatalf("second delete %+v, %v", again, err)
		}
		r, err := c.RestoreFile(ctx, f.ID, client.RestoreOptions{})
		if err != nil || r.DeletedAt != nil || r.ID != f.ID {
			t.Fatalf("restored %+v, %v", r, err)
		}
		_, err = c.DeleteFile(ctx, "file_doesnotexist", client.DeleteOptions{})
		expectProblem(t, err, 404, "NOT_FOUND")
	})

	t.Run("Operation", func(t *testing.T) {
		g := mustPut(t, c, "ops/a.txt", "keyed", client.PutOptions{IdempotencyKey: "ops-a-1"})
		op, err := c.Operation(ctx, "ops-a-1")
		if err != nil {
			t.Fatal(err)
		}
		var rec client.File
		if op.Status != client.OperationCompleted || op.Method != "POST" || op.Route != "/v1/files" ||
			op.ResponseStatus == nil || *op.ResponseStatus != 201 || op.Resource == nil || op.Resource.ID != g.ID {
			t.Fatalf("operation %+v", op)
		}
		if err := op.Outcome(&rec); err != nil || rec.ID != g.ID || rec.SHA256 != sha("keyed") {
			t.Fatalf("outcome %+v, %v", rec, err)
		}
		_, err = c.PutFile(ctx, "reports/summary.txt", strings.NewReader("z"), client.PutOptions{IdempotencyKey: "ops-taken"})
		expectProblem(t, err, 409, "PATH_EXISTS")
		op, err = c.Operation(ctx, "ops-taken")
		if err != nil {
			t.Fatal(err)
		}
		err = op.Outcome(&rec)
		if p := expectProblem(t, err, 409, "PATH_EXISTS"); p.ExistingFileID != f.ID {
			t.Fatalf("recorded problem %+v", p)
		}
		_, err = c.Operation(ctx, "never-used")
		expectProblem(t, err, 404, "NOT_FOUND")
	})

	t.Run("Protocol", func(t *testing.T) {
		p, err := c.Protocol(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.APIVersion != "v1" || p.Idempotency.Header != "Idempotency-Key" || p.Retry.MaxAttempts != 8 ||
			p.Limits.ListLimitMax != 1000 || !bytes.Contains(p.Raw, []byte(`"api_version"`)) {
			t.Fatalf("protocol %+v", p)
		}
	})

	t.Run("ProtocolNamesEveryLimit", func(t *testing.T) {
		p, err := c.Protocol(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := p.Limits
		if l.LinkExpiresInDefaultSeconds != 3600 || l.LinkExpiresInMaxSeconds != 604800 || l.ExpiresInMaxSeconds != 31536000 ||
			l.EventsWaitMaxSeconds != 30 || l.RateLimitScope != "subject, per instance" || l.ExpiresInMinSeconds != 60 {
			t.Fatalf("protocol limits %+v", l)
		}
	})

	t.Run("Unauthenticated", func(t *testing.T) {
		anon, err := client.New(b.proxy.URL, "not-a-token")
		if err != nil {
			t.Fatal(err)
		}
		_, err = anon.File(ctx, f.ID)
		expectProblem(t, err, 401, "UNAUTHENTICATED")
	})
}

// TestRetriesUnavailableHonouringRetryAfter: two 503s with Retry-After: 1,
// then the server: three attempts with one key, each at least a second
// after the one before, and one file.
func TestRetriesUnavailableHonouringRetryAfter(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	b.proxy.inject("POST", "/v1/files", 2, answerProblem(503, "STORAGE_UNAVAILABLE", "1"))
	f, err := c.PutFile(context.Background(), "reports/a.txt", strings.NewReader("hello"), client.PutOptions{ContentType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 3 || posts[2].Status != 201 {
		t.Fatalf("attempts %+v, want 503, 503, 201", posts)
	}
	for i, p := range posts {
		if p.Key != posts[0].Key || !keyPattern.MatchString(p.Key) || p.BodyBytes != 5 {
			t.Fatalf("attempt %d sent key %q and %d bytes; first key %q", i, p.Key, p.BodyBytes, posts[0].Key)
		}
		if gap := p.At.Sub(posts[max(i-1, 0)].At); i > 0 && gap < time.Second {
			t.Fatalf("attempt %d came %v after the one before, despite Retry-After: 1", i, gap)
		}
	}
	b.expectOneFile(t, "reports/a.txt", f.ID)
}

// TestReplaysWriteWhoseResponseWasLost: the server commits, the response
// never arrives; the retry with the same key is answered with the same
// file, and there is one file.
func TestReplaysWriteWhoseResponseWasLost(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	b.proxy.inject("POST", "/v1/files", 1, dropAfterCommit)
	f, err := c.PutFile(context.Background(), "out/result.json", bytes.NewReader([]byte(`{"ok":true}`)), client.PutOptions{ContentType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 2 || posts[0].ServerStatus != 201 || posts[0].Status != 0 || !posts[1].Replayed || posts[1].Key != posts[0].Key {
		t.Fatalf("attempts %+v, want a committed-then-dropped one and a replay with the same key", posts)
	}
	if f.SHA256 != sha(`{"ok":true}`) {
		t.Fatalf("file %+v", f)
	}
	b.expectOneFile(t, "out/result.json", f.ID)
}

// TestNeverRetriesClientErrors: 4xx answers other than OPERATION_IN_PROGRESS
// are sent once.
func TestNeverRetriesClientErrors(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	taken, err := b.direct.PutFile(ctx, "taken.txt", strings.NewReader("mine"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.direct.PutFile(ctx, "keyed.txt", strings.NewReader("one"), client.PutOptions{IdempotencyKey: "used-once"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		opts   client.PutOptions
		path   string
		status int
		code   string
	}{
		{"PathExists", client.PutOptions{}, "taken.txt", 409, "PATH_EXISTS"},
		{"IdempotencyConflict", client.PutOptions{IdempotencyKey: "used-once"}, "keyed.txt", 409, "IDEMPOTENCY_CONFLICT"},
		{"IfNoneMatch", client.PutOptions{IfNoneMatchAny: true}, "taken.txt", 412, "PRECONDITION_FAILED"},
		{"IfMatch", client.PutOptions{Replace: true, IfMatch: `"` + sha("other") + `"`}, "taken.txt", 412, "PRECONDITION_FAILED"},
		{"InvalidPath", client.PutOptions{}, "/absolute", 422, "INVALID_PATH"},
		{"IfMatchWithoutReplace", client.PutOptions{IfMatch: taken.ETag}, "taken.txt", 422, "VALIDATION_FAILED"},
		{"ChecksumMismatch", client.PutOptions{ContentDigest: client.Digest(make([]byte, 32))}, "new.txt", 422, "CHECKSUM_MISMATCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(b.proxy.requests("POST", "/v1/files"))
			_, err := c.PutFile(ctx, tc.path, strings.NewReader("two"), tc.opts)
			p := expectProblem(t, err, tc.status, tc.code)
			if p.Retryable {
				t.Fatalf("problem %+v says retryable", p)
			}
			if n := len(b.proxy.requests("POST", "/v1/files")) - before; n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
		})
	}
	b.expectOneFile(t, "taken.txt", taken.ID)
	if files := b.filesAt(t, "new.txt"); len(files) != 0 {
		t.Fatalf("a checksum mismatch stored %+v", files)
	}
}

// TestStopsWhenRetryAfterExceedsCap: a hint above MaxDelay is not
// shortened and not waited for: the problem comes back after one attempt.
func TestStopsWhenRetryAfterExceedsCap(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	b.proxy.inject("POST", "/v1/files", 5, answerProblem(503, "STORAGE_UNAVAILABLE", "5"))
	_, err := c.PutFile(ctx, "capped.txt", strings.NewReader("x"), client.PutOptions{})
	if p := expectProblem(t, err, 503, "STORAGE_UNAVAILABLE"); p.RetryAfter != 5*time.Second || !p.Retryable {
		t.Fatalf("problem %+v", p)
	}
	if n := len(b.proxy.requests("POST", "/v1/files")); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}

	date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	b.proxy.inject("GET", "/v1/files", 5, answerProblem(429, "RATE_LIMITED", date))
	_, err = c.ListFiles(ctx, client.ListOptions{})
	if p := expectProblem(t, err, 429, "RATE_LIMITED"); p.RetryAfter <= fast.MaxDelay {
		t.Fatalf("problem %+v, want the HTTP-date hint of about 2 minutes", p)
	}
	if n := len(b.proxy.requests("GET", "/v1/files")); n != 1 {
		t.Fatalf("%d list attempts, want 1", n)
	}
	if files := b.filesAt(t, "capped.txt"); len(files) != 0 {
		t.Fatalf("files %+v", files)
	}
}

// TestGivesUpAfterMaxAttempts: the attempt budget bounds the retries of a
// read, and a read that fails before any response is retried.
func TestGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRetryPolicy(client.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}))
	ctx := context.Background()
	f, err := b.direct.PutFile(ctx, "r.txt", strings.NewReader("r"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/files/" + f.ID
	b.proxy.inject("GET", path, 10, answerProblem(500, "INTERNAL", ""))
	_, err = c.File(ctx, f.ID)
	expectProblem(t, err, 500, "INTERNAL")
	if n := len(b.proxy.requests("GET", path)); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}

	c2, err := client.New(b.proxy.URL, b.token, client.WithRetryPolicy(fast))
	if err != nil {
		t.Fatal(err)
	}
	b.proxy.clearFaults()
	b.proxy.inject("GET", path, 1, dropBeforeForward)
	b.proxy.inject("GET", path, 1, answerProblem(502, "INTERNAL", ""))
	got, err := c2.File(ctx, f.ID)
	if err != nil || got.ID != f.ID {
		t.Fatalf("File after a drop and a 502: %+v, %v", got, err)
	}
	if n := len(b.proxy.requests("GET", path)); n != 6 {
		t.Fatalf("%d attempts in all, want 3 + 3", n)
	}
}

// TestOnRetryReportsEveryWait: the hook hears of each wait with the
// attempt that failed and why, and never after the last attempt.
func TestOnRetryReportsEveryWait(t *testing.T) {
	t.Parallel()
	type note struct {
		attempt int
		wait    time.Duration
		err     error
	}
	var (
		mu    sync.Mutex
		notes []note
	)
	policy := client.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	c, b := setup(t, client.WithRetryPolicy(policy), client.WithOnRetry(func(attempt int, wait time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, note{attempt, wait, err})
	}))
	ctx := context.Background()
	f, err := b.direct.PutFile(ctx, "n.txt", strings.NewReader("n"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/files/" + f.ID
	// The drop comes first: on a new connection (net/http repeats a GET
	// itself when a reused one breaks).
	b.proxy.inject("GET", path, 1, dropBeforeForward)
	b.proxy.inject("GET", path, 1, answerProblem(503, "STORAGE_UNAVAILABLE", ""))
	if _, err := c.File(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := notes
	notes = nil
	mu.Unlock()
	if len(got) != 2 || got[0].attempt != 1 || got[1].attempt != 2 {
		t.Fatalf("notes %+v, want attempts 1 and 2", got)
	}
	if got[0].err == nil || client.ErrorCode(got[0].err) != "" || client.ErrorCode(got[1].err) != "STORAGE_UNAVAILABLE" {
		t.Fatalf("notes %+v, want the dropped connection, then the 503 problem", got)
	}
	for _, n := range got {
		if n.wait < 0 || n.wait > policy.MaxDelay {
			t.Fatalf("wait %v outside 0 to %v", n.wait, policy.MaxDelay)
		}
	}

	b.proxy.clearFaults()
	b.proxy.inject("GET", path, 10, answerProblem(500, "INTERNAL", ""))
	_, err = c.File(ctx, f.ID)
	expectProblem(t, err, 500, "INTERNAL")
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 2 || notes[1].attempt != 2 {
		t.Fatalf("notes %+v, want 2 for 3 attempts (none after the last)", notes)
	}
}

// TestUnkeyedWritesAfterDrop: without keys a dropped plain create is not
// repeated (it may have happened), while replace uploads, deletes and
// restores are.
func TestUnkeyedWritesAfterDrop(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithoutIdempotencyKeys())
	ctx := context.Background()

	b.proxy.inject("POST", "/v1/files", 1, dropAfterCommit)
	_, err := c.PutFile(ctx, "plain.txt", strings.NewReader("once"), client.PutOptions{})
	var p *client.Problem
	if err == nil || errors.As(err, &p) {
		t.Fatalf("a dropped create returned %v", err)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 1 || posts[0].Key != "" || posts[0].ServerStatus != 201 {
		t.Fatalf("attempts %+v, want one unkeyed create that the server committed", posts)
	}
	created := b.filesAt(t, "plain.txt")
	if len(created) != 1 {
		t.Fatalf("files %+v", created)
	}

	b.proxy.inject("POST", "/v1/files", 1, dropAfterCommit)
	f, err := c.PutFile(ctx, "plain.txt", strings.NewReader("once"), client.PutOptions{Replace: true})
	if err != nil || f.ID != created[0].ID || f.Version != 1 {
		t.Fatalf("replace after a drop: %+v, %v", f, err)
	}
	if n := len(b.proxy.requests("POST", "/v1/files")); n != 3 {
		t.Fatalf("%d uploads, want 1 + 2", n)
	}

	path := "/v1/files/" + f.ID
	b.proxy.inject("DELETE", path, 1, dropAfterCommit)
	d, err := c.DeleteFile(ctx, f.ID, client.DeleteOptions{})
	if err != nil || d.DeletedAt == nil {
		t.Fatalf("delete after a drop: %+v, %v", d, err)
	}
	b.proxy.inject("POST", path+"/restore", 1, dropAfterCommit)
	r, err := c.RestoreFile(ctx, f.ID, client.RestoreOptions{})
	if err != nil || r.DeletedAt != nil {
		t.Fatalf("restore after a drop: %+v, %v", r, err)
	}
	if nd, nr := len(b.proxy.requests("DELETE", path)), len(b.proxy.requests("POST", path+"/restore")); nd != 2 || nr != 2 {
		t.Fatalf("%d deletes and %d restores, want 2 each", nd, nr)
	}
	b.expectOneFile(t, "plain.txt", f.ID)
}

// TestContextCancelInterruptsWait: cancelling during a 59 s Retry-After
// wait returns the context's error without another attempt.
func TestContextCancelInterruptsWait(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRetryPolicy(client.RetryPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: time.Minute}))
	b.proxy.inject("POST", "/v1/files", 10, answerProblem(503, "STORAGE_UNAVAILABLE", "59"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.PutFile(ctx, "waiting.txt", strings.NewReader("x"), client.PutOptions{})
		done <- err
	}()
	b.proxy.waitFor(t, "the first attempt answered", func(seen []seenRequest) bool {
		return len(seen) == 1 && seen[0].Status == 503
	})
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("error %v (%T), want context.Canceled", err, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after the cancel")
	}
	if n := len(b.proxy.requests("POST", "/v1/files")); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// stream hides a reader's other methods (Seek), as a pipe would.
type stream struct{ io.Reader }

// TestNonSeekableBodyIsNotResent: a body that was read and cannot be read
// again is sent once, whatever comes back; GetBody makes it re-sendable.
func TestNonSeekableBodyIsNotResent(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()

	b.proxy.inject("POST", "/v1/files", 1, answerProblem(503, "STORAGE_UNAVAILABLE", "1"))
	_, err := c.PutFile(ctx, "s.txt", stream{strings.NewReader("stream")}, client.PutOptions{})
	expectProblem(t, err, 503, "STORAGE_UNAVAILABLE")
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 1 || posts[0].BodyBytes != 6 {
		t.Fatalf("attempts %+v, want one that sent the 6 bytes", posts)
	}

	b.proxy.inject("POST", "/v1/files", 1, dropBeforeForward)
	_, err = c.PutFile(ctx, "s.txt", stream{strings.NewReader("stream")}, client.PutOptions{})
	var p *client.Problem
	if err == nil || errors.As(err, &p) || !strings.Contains(err.Error(), "cannot be re-read") {
		t.Fatalf("a dropped keyed stream returned %v", err)
	}
	if n := len(b.proxy.requests("POST", "/v1/files")); n != 2 {
		t.Fatalf("%d attempts in all, want 2", n)
	}
	if files := b.filesAt(t, "s.txt"); len(files) != 0 {
		t.Fatalf("files %+v", files)
	}

	b.proxy.inject("POST", "/v1/files", 1, answerProblem(503, "STORAGE_UNAVAILABLE", "0"))
	f, err := c.PutFile(ctx, "s.txt", stream{strings.NewReader("stream")}, client.PutOptions{
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("stream")), nil },
	})
	if err != nil || f.SHA256 != sha("stream") {
		t.Fatalf("with GetBody: %+v, %v", f, err)
	}
	posts = b.proxy.requests("POST", "/v1/files")
	if len(posts) != 4 || posts[3].Key != posts[2].Key || posts[3].BodyBytes != 6 {
		t.Fatalf("attempts %+v, want two more with one key", posts)
	}
}

// slowUpload starts a keyed upload whose body stalls after its first part,
// so its key stays in progress until finish is called.
func slowUpload(t *testing.T, b *bundle, path, key, first string, header ...string) (finish func(rest string) int) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", b.srv.URL+"/v1/files?path="+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	status := make(chan int, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		res.Body.Close()
		status <- res.StatusCode
	}()
	if _, err := pw.Write([]byte(first)); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 20*time.Second, "the slow upload to claim its key", func() bool {
		op, err := b.direct.Operation(context.Background(), key)
		return err == nil && op.Status == client.OperationInProgress
	})
	return func(rest string) int {
		_, _ = pw.Write([]byte(rest))
		pw.Close()
		return <-status
	}
}

// answered409 reports whether the proxy relayed an OPERATION_IN_PROGRESS.
func answered409(seen []seenRequest) bool {
	for _, s := range seen {
		if s.Method == "POST" && s.Status == http.StatusConflict {
			return true
		}
	}
	return false
}

// polled reports whether the proxy relayed a poll of key.
func polled(key string) func(seen []seenRequest) bool {
	return func(seen []seenRequest) bool {
		for _, s := range seen {
			if s.Method == "GET" && s.Path == "/v1/operations/"+key && s.Status == http.StatusOK {
				return true
			}
		}
		return false
	}
}

// TestPollsOperationInProgress: a write whose key another request holds
// waits as Retry-After says and polls /v1/operations/{key}, again while it
// is in progress, and returns the recorded file without sending the write
// again.
func TestPollsOperationInProgress(t *testing.T) {
	t.Parallel()
	c, b := setupWith(t, apitest.Options{Lease: 2 * time.Second},
		client.WithRetryPolicy(client.RetryPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second}))
	finish := slowUpload(t, b, "slow.txt", "slow-1", "first half ")

	type outcome struct {
		f   *client.File
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		f, err := c.PutFile(context.Background(), "slow.txt", strings.NewReader("first half second half"), client.PutOptions{IdempotencyKey: "slow-1"})
		done <- outcome{f, err}
	}()
	b.proxy.waitFor(t, "OPERATION_IN_PROGRESS", answered409)
	b.proxy.waitFor(t, "a poll while the key is in progress", polled("slow-1"))
	if status := finish("second half"); status != http.StatusCreated {
		t.Fatalf("the slow upload answered %d", status)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	files := b.filesAt(t, "slow.txt")
	if len(files) != 1 || got.f.ID != files[0].ID || got.f.SHA256 != sha("first half second half") {
		t.Fatalf("client got %+v; files %+v", got.f, files)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	polls := b.proxy.requests("GET", "/v1/operations/slow-1")
	if len(posts) != 1 || len(polls) < 2 {
		t.Fatalf("uploads %+v, polls %+v: want one upload, then polls", posts, polls)
	}
	hint, err := strconv.Atoi(posts[0].RetryAfter)
	if err != nil || hint < 1 {
		t.Fatalf("OPERATION_IN_PROGRESS carried Retry-After %q", posts[0].RetryAfter)
	}
	if gap := polls[0].At.Sub(posts[0].At); gap < time.Duration(hint)*time.Second {
		t.Fatalf("polled %v after the 409, despite Retry-After: %d", gap, hint)
	}
	if last := polls[len(polls)-1]; last.ServerStatus != 200 {
		t.Fatalf("last poll %+v", last)
	}
}

// TestResendsWhenKeyHoldsNothing: the request that held the key fails and
// releases it; the poll's 404 proves nothing happened, and only then (not
// while it is in progress) is the write sent again, with the same key.
func TestResendsWhenKeyHoldsNothing(t *testing.T) {
	t.Parallel()
	c, b := setupWith(t, apitest.Options{Lease: 2 * time.Second},
		client.WithRetryPolicy(client.RetryPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second}))
	wrong := sha256.Sum256([]byte("not what is sent"))
	finish := slowUpload(t, b, "doomed.txt", "doomed-1", "abc ", "Content-Digest", client.Digest(wrong[:]))

	done := make(chan error, 1)
	var f *client.File
	go func() {
		var err error
		f, err = c.PutFile(context.Background(), "doomed.txt", strings.NewReader("abc def"), client.PutOptions{IdempotencyKey: "doomed-1"})
		done <- err
	}()
	b.proxy.waitFor(t, "OPERATION_IN_PROGRESS", answered409)
	b.proxy.waitFor(t, "a poll while the key is in progress", polled("doomed-1"))
	if status := finish("def"); status != http.StatusUnprocessableEntity {
		t.Fatalf("the doomed upload answered %d, want 422", status)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	posts := b.proxy.requests("POST", "/v1/files")
	if len(posts) != 2 || posts[1].Key != "doomed-1" || posts[1].ServerStatus != 201 {
		t.Fatalf("uploads %+v, want the 409 and one resend", posts)
	}
	polls := b.proxy.requests("GET", "/v1/operations/doomed-1")
	if len(polls) == 0 || polls[len(polls)-1].ServerStatus != 404 || polls[len(polls)-1].At.After(posts[1].At) {
		t.Fatalf("polls %+v, want a 404 before the resend", polls)
	}
	if f.SHA256 != sha("abc def") {
		t.Fatalf("file %+v", f)
	}
	b.expectOneFile(t, "doomed.txt", f.ID)
}
