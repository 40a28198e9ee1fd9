package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/internal/testkit"
)

// runFiles is what a run left live, path to content, read through the
// API: the files it created or last wrote.
func runFiles(t *testing.T, b *bundle, runID string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, opts := range []client.ListOptions{{RunID: runID}, {LastRunID: runID}} {
		for f, err := range b.direct.AllFiles(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			content, err := b.direct.FileContent(ctx, f.ID, client.ContentOptions{})
			out[f.Path] = string(testkit.ReadAll(t, content, err))
		}
	}
	return out
}

func sameContents(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	names := func(m map[string]string) string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	if names(got) != names(want) {
		t.Fatalf("%s holds [%s], want [%s]", what, names(got), names(want))
	}
	for name, body := range want {
		if got[name] != body {
			t.Errorf("%s: %s holds %d bytes that differ from the file's %d", what, name, len(got[name]), len(body))
		}
	}
}

// cutMidBody forwards the request and relays the status, the headers and
// half the body, then drops the connection: a stream cut on the way.
func cutMidBody(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
	res, body, err := p.forward(r, rec)
	if err != nil {
		panic(err)
	}
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	hangUp(w)
}

// TestRunArchive: the archive holds exactly the run's live files with
// their current content, in either format, whatever the run id holds; a
// failed start is retried and a stream cut on the way is an error.
func TestRunArchive(t *testing.T) {
	t.Parallel()
	const run = "arch/run-1"
	c, b := setup(t, client.WithRunID(run))
	other, err := client.New(b.srv.URL, b.token, client.WithRunID("arch-other"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(c *client.Client, path, body string, replace bool) *client.File {
		t.Helper()
		return mustPut(t, c, path, body, client.PutOptions{Replace: replace})
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	put(c, "notes/a.txt", "first", false)
	put(c, "notes/a.txt", "second", true)
	put(c, "notes/deep/big.bin", string(big), false)
	put(c, "notes/empty", "", false)
	gone := put(c, "notes/gone.txt", "deleted", false)
	if _, err := c.DeleteFile(ctx, gone.ID, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	put(other, "notes/other.txt", "not the run's", false)
	put(other, "notes/shared.txt", "by the other run", false)
	put(c, "notes/shared.txt", "then by the run", true)
	want := runFiles(t, b, run)
	if len(want) != 4 || want["notes/a.txt"] != "second" || want["notes/shared.txt"] != "then by the run" {
		t.Fatalf("the run's live files, as listed: %v", want)
	}

	t.Run("ZipToAWriterWithProgress", func(t *testing.T) {
		var buf bytes.Buffer
		var reports []int64
		n, err := c.WriteRunArchive(ctx, run, &buf, client.ArchiveOptions{Progress: func(received, total int64) {
			if total != -1 {
				t.Errorf("progress total %d, want -1 (unknown)", total)
			}
			reports = append(reports, received)
		}})
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(buf.Len()) || len(reports) < 2 || reports[len(reports)-1] != n || !sort.SliceIsSorted(reports, func(i, j int) bool { return reports[i] < reports[j] }) {
			t.Fatalf("wrote %d bytes (buffer %d); progress %v", n, buf.Len(), reports)
		}
		sameContents(t, "the zip", testkit.Unzip(t, buf.Bytes()), want)
		gets := b.proxy.where(func(s seenRequest) bool { return s.Method == "GET" && s.Path == "/v1/runs/arch/run-1/archive" })
		if len(gets) != 1 || gets[0].Query != "format=zip" {
			t.Fatalf("archive requests %+v, want one", gets)
		}
	})

	t.Run("TarAsAStream", func(t *testing.T) {
		a, err := c.RunArchive(ctx, run, client.ArchiveOptions{Format: client.ArchiveTar})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if a.Format != client.ArchiveTar || a.ContentType != "application/x-tar" || a.Filename != "run-arch_run-1.tar" {
			t.Fatalf("archive %+v", a)
		}
		sameContents(t, "the tar", testkit.Untar(t, a), want)
	})

	t.Run("RetriesAFailedStart", func(t *testing.T) {
		b.proxy.inject("GET", "/v1/runs/*", 1, answerProblem(503, "STORAGE_UNAVAILABLE", ""))
		var buf bytes.Buffer
		if _, err := c.WriteRunArchive(ctx, run, &buf, client.ArchiveOptions{Format: client.ArchiveTar}); err != nil {
			t.Fatal(err)
		}
		sameContents(t, "the tar after a 503", testkit.Untar(t, &buf), want)
	})

	t.Run("ACutStreamIsAnError", func(t *testing.T) {
		b.proxy.inject("GET", "/v1/runs/*", 1, cutMidBody)
		var buf bytes.Buffer
		n, err := c.WriteRunArchive(ctx, run, &buf, client.ArchiveOptions{})
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || n == 0 || n != int64(buf.Len()) {
			t.Fatalf("a cut archive: %d bytes, %v; want the bytes received and an unexpected EOF", n, err)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		before := len(b.proxy.where(func(s seenRequest) bool { return strings.HasPrefix(s.Path, "/v1/runs/") }))
		_, err := c.WriteRunArchive(ctx, "arch-nobody", io.Discard, client.ArchiveOptions{})
		expectProblem(t, err, 404, "NOT_FOUND")
		if _, err := c.RunArchive(ctx, run, client.ArchiveOptions{Format: "rar"}); err == nil || !strings.Contains(err.Error(), "rar") {
			t.Fatalf("format rar: %v", err)
		}
		if _, err := c.RunArchive(ctx, "has space", client.ArchiveOptions{}); err == nil {
			t.Fatal("a run id with a space was sent")
		}
		if after := len(b.proxy.where(func(s seenRequest) bool { return strings.HasPrefix(s.Path, "/v1/runs/") })); after != before+1 {
			t.Fatalf("%d requests for one unknown run and two refused locally", after-before)
		}
	})
}

// content reads a live file at path through the direct client, "" when
// none holds it.
func (b *bundle) content(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	l, err := b.direct.ListFiles(ctx, client.ListOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) == 0 {
		return ""
	}
	content, err := b.direct.FileContent(ctx, l.Data[0].ID, client.ContentOptions{})
	return string(testkit.ReadAll(t, content, err))
}

// TestRevertRun: a run's creates, replaces and deletes are undone by one
// batch; a lost answer to the keyed revert replays the same batch; a file
// another run changed since fails its item unless forced.
func TestRevertRun(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("rev-undo"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer := func(run string) *client.Client {
		w, err := client.New(b.srv.URL, b.token, client.WithRunID(run))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	put := func(w *client.Client, path, body string, replace bool) *client.File {
		t.Helper()
		f, err := w.PutFile(ctx, path, strings.NewReader(body), client.PutOptions{Replace: replace})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	batches := func() int {
		t.Helper()
		n := 0
		for _, err := range b.direct.AllBatches(ctx, client.BatchListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}

	t.Run("UndoesTheRunAndWaits", func(t *testing.T) {
		setupRun, run := writer("rev-setup"), writer("rev-run")
		put(setupRun, "notes/base.txt", "original", false)
		kept := put(setupRun, "notes/kept.txt", "keep me", false)
		put(run, "notes/new.txt", "made by the run", false)
		put(run, "notes/base.txt", "overwritten", true)
		if _, err := run.DeleteFile(ctx, kept.ID, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bt, err := c.RevertRun(ctx, "rev-run", client.RevertRunOptions{Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		if bt.Status != client.BatchSucceeded || bt.Counts.Total != 3 || bt.Counts.Succeeded != 3 || len(bt.Items) != 3 {
			t.Fatalf("revert batch %+v", bt)
		}
		for _, it := range bt.Items {
			if it.Op != "undo" || it.File == nil || it.Path == nil {
				t.Fatalf("item %+v", it)
			}
		}
		for path, want := range map[string]string{"notes/new.txt": "", "notes/base.txt": "original", "notes/kept.txt": "keep me"} {
			if got := b.content(t, path); got != want {
				t.Errorf("%s holds %q after the revert, want %q", path, got, want)
			}
		}
		r, err := c.Run(ctx, "rev-undo")
		if err != nil || r.Counts.Deleted != 1 || r.Counts.Restored != 1 || r.Counts.Reverted != 1 {
			t.Fatalf("the revert's own run: %+v, %v", r, err)
		}
	})

	t.Run("ALostAnswerReplaysTheSameBatch", func(t *testing.T) {
		put(writer("rev-lost"), "notes/lost.txt", "made", false)
		before := batches()
		b.proxy.inject("POST", "/v1/runs/*", 1, dropAfterCommit)
		bt, err := c.RevertRun(ctx, "rev-lost", client.RevertRunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		posts := b.proxy.where(func(s seenRequest) bool { return s.Method == "POST" && s.Path == "/v1/runs/rev-lost/revert" })
		if len(posts) != 2 || posts[0].Status != 0 || posts[0].ServerStatus != http.StatusAccepted || posts[0].Key == "" ||
			posts[1].Key != posts[0].Key || !posts[1].Replayed || posts[1].Status != http.StatusOK {
			t.Fatalf("revert attempts %+v, want a lost 202 and a replay with its key", posts)
		}
		if after := batches(); after != before+1 {
			t.Fatalf("%d batches made by one revert", after-before)
		}
		done, err := c.WaitBatch(ctx, bt.ID)
		if err != nil || done.Status != client.BatchSucceeded || b.content(t, "notes/lost.txt") != "" {
			t.Fatalf("replayed batch %+v, %v", done, err)
		}
		again, err := c.RevertRun(ctx, "rev-lost", client.RevertRunOptions{IdempotencyKey: posts[0].Key})
		if err != nil || again.ID != bt.ID || again.Status != client.BatchSucceeded {
			t.Fatalf("the same key again: %+v, %v; want batch %s in its current state", again, err, bt.ID)
		}
		if after := batches(); after != before+1 {
			t.Fatalf("%d batches after the same key twice", after-before)
		}
	})

	t.Run("ChangedSinceRunUnlessForced", func(t *testing.T) {
		put(writer("rev-setup"), "notes/x.txt", "v1", false)
		put(writer("rev-a"), "notes/x.txt", "by a", true)
		put(writer("rev-b"), "notes/x.txt", "by b", true)
		bt, err := c.RevertRun(ctx, "rev-a", client.RevertRunOptions{Wait: true, IdempotencyKey: "rev-a-1"})
		if err != nil {
			t.Fatal(err)
		}
		failed := bt.FailedItems()
		if bt.Status != client.BatchFailed || len(failed) != 1 || failed[0].Error == nil || failed[0].Error.Code != "CHANGED_SINCE_RUN" ||
			failed[0].Error.Status != http.StatusConflict {
			t.Fatalf("revert over another run's change: %+v", bt)
		}
		if got := b.content(t, "notes/x.txt"); got != "by b" {
			t.Fatalf("a refused undo changed the file: %q", got)
		}
		_, err = c.RevertRun(ctx, "rev-a", client.RevertRunOptions{Force: true, IdempotencyKey: "rev-a-1"})
		expectProblem(t, err, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
		forced, err := c.RevertRun(ctx, "rev-a", client.RevertRunOptions{Force: true, Wait: true})
		if err != nil || forced.Status != client.BatchSucceeded || b.content(t, "notes/x.txt") != "v1" {
			t.Fatalf("forced revert: %+v, %v", forced, err)
		}
	})

	t.Run("AlwaysKeyedAndRefusals", func(t *testing.T) {
		plain, err := client.New(b.proxy.URL, b.token, client.WithoutIdempotencyKeys(), client.WithRetryPolicy(fast))
		if err != nil {
			t.Fatal(err)
		}
		put(writer("rev-plain"), "notes/plain.txt", "p", false)
		if _, err := plain.RevertRun(ctx, "rev-plain", client.RevertRunOptions{}); err != nil {
			t.Fatal(err)
		}
		posts := b.proxy.where(func(s seenRequest) bool { return s.Path == "/v1/runs/rev-plain/revert" })
		if len(posts) != 1 || !keyPattern.MatchString(posts[0].Key) {
			t.Fatalf("revert without generated keys: %+v, want one keyed request", posts)
		}
		_, err = c.RevertRun(ctx, "rev-nobody", client.RevertRunOptions{})
		expectProblem(t, err, http.StatusNotFound, "NOT_FOUND")
		if _, err := c.RevertRun(ctx, "has space", client.RevertRunOptions{}); err == nil {
			t.Fatal("a run id with a space was sent")
		}
	})
}
