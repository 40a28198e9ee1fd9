package mcpserver_test

// The tools of file history, share links and the run ledger: move_file,
// file_history, revert_file, share_file and run_summary.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mcpserver"
)

func TestMoveFile(t *testing.T) {
	b := setup(t, config{subject: "mover"})
	var f mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "drafts/report.md", "content": "draft one"}, &f)
	b.ok(t, "write_file", map[string]any{"path": "drafts/report.md", "content": "draft two", "if_exists": "replace"}, &f)

	t.Run("KeepsIdURLVersionAndHistory", func(t *testing.T) {
		var m mcpserver.File
		res := b.ok(t, "move_file", map[string]any{"source": "/drafts/report.md", "destination": "reports/final.md"}, &m)
		if m.ID != f.ID || m.URL != f.URL || m.Version != 2 || m.ETag != f.ETag || m.Path != "reports/final.md" {
			t.Fatalf("moved %+v, was %+v", m, f)
		}
		if !strings.HasPrefix(text(res), "Moved drafts/report.md to reports/final.md. Now reports/final.md: "+f.ID) {
			t.Fatalf("text %s", text(res))
		}
		if b.content(t, "reports/final.md") != "draft two" || len(b.liveFiles(t, "drafts/report.md")) != 0 {
			t.Fatal("the move did not take the content along, or left the source")
		}
		var h mcpserver.FileHistory
		b.ok(t, "file_history", map[string]any{"path": "reports/final.md"}, &h)
		if h.FileID != f.ID || len(h.Versions) != 2 || h.Versions[1].Version != 1 {
			t.Fatalf("history after the move %+v", h)
		}
		b.fail(t, "read_text_file", map[string]any{"path": "drafts/report.md"}, "NOT_FOUND")
	})

	t.Run("MovingToItsOwnPathChangesNothing", func(t *testing.T) {
		var m mcpserver.File
		res := b.ok(t, "move_file", map[string]any{"source": "reports/final.md", "destination": "reports/final.md"}, &m)
		if m.Version != 2 || !strings.HasPrefix(text(res), "No change: the file is already at reports/final.md") {
			t.Fatalf("%+v %s", m, text(res))
		}
	})

	t.Run("NeverOverwrites", func(t *testing.T) {
		var other mcpserver.File
		b.ok(t, "write_file", map[string]any{"path": "notes.md", "content": "notes"}, &other)
		p, msg := b.fail(t, "move_file", map[string]any{"source": "notes.md", "destination": "reports/final.md"}, "PATH_EXISTS")
		if p.ExistingFileID != f.ID || p.Retryable ||
			!strings.HasPrefix(msg, "PATH_EXISTS: a live file already holds reports/final.md ("+f.ID+"); nothing was moved.") ||
			!strings.Contains(msg, "Choose another destination") || !strings.Contains(msg, "delete_file it first") {
			t.Fatalf("problem %+v\n%s", p, msg)
		}
		if b.content(t, "notes.md") != "notes" || b.content(t, "reports/final.md") != "draft two" {
			t.Fatal("a refused move changed a file")
		}
		// What the advice says works: delete the destination, move again.
		b.ok(t, "delete_file", map[string]any{"path": "reports/final.md"}, nil)
		var m mcpserver.File
		b.ok(t, "move_file", map[string]any{"source": "notes.md", "destination": "reports/final.md"}, &m)
		if m.ID != other.ID || b.content(t, "reports/final.md") != "notes" {
			t.Fatalf("moved %+v", m)
		}
	})

	t.Run("MissingSourceAndBadPaths", func(t *testing.T) {
		_, msg := b.fail(t, "move_file", map[string]any{"source": "nope.md", "destination": "x.md"}, "NOT_FOUND")
		if !strings.Contains(msg, "no live file at nope.md") || !strings.Contains(msg, "search_files") {
			t.Fatalf("text %s", msg)
		}
		p, _ := b.fail(t, "move_file", map[string]any{"source": "reports/final.md", "destination": "a//b"}, "INVALID_PATH")
		if p.Errors[0].Field != "destination" {
			t.Fatalf("problem %+v", p)
		}
		p, _ = b.fail(t, "move_file", map[string]any{"source": "../x", "destination": "y"}, "INVALID_PATH")
		if p.Errors[0].Field != "source" {
			t.Fatalf("problem %+v", p)
		}
	})

	t.Run("AnotherSubjectsFileIsNotFound", func(t *testing.T) {
		stranger := connect(t, b.srv, config{subject: "stranger"})
		stranger.fail(t, "move_file", map[string]any{"source": "reports/final.md", "destination": "mine.md"}, "NOT_FOUND")
		if b.content(t, "reports/final.md") != "notes" {
			t.Fatal("another subject moved the file")
		}
	})
}

func TestFileHistoryAndRevert(t *testing.T) {
	b := setup(t, config{subject: "historian", agentID: "agent-h", runID: "run-h"})
	var v1, v2, v3 mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "one"}, &v1)
	b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "two", "if_exists": "replace"}, &v2)
	b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "three", "if_exists": "replace"}, &v3)

	t.Run("ListsVersionsNewestFirst", func(t *testing.T) {
		var h mcpserver.FileHistory
		res := b.ok(t, "file_history", map[string]any{"path": "doc.txt"}, &h)
		if h.Path != "doc.txt" || h.FileID != v1.ID || h.HasMore || h.NextCursor != "" || len(h.Versions) != 3 {
			t.Fatalf("history %s", mustJSON(h))
		}
		for i, want := range []mcpserver.File{v3, v2, v1} {
			v := h.Versions[i]
			if v.Version != want.Version || v.ETag != want.ETag || v.SHA256 != want.SHA256 || v.SizeBytes != want.SizeBytes ||
				v.Current != (i == 0) || v.FileID != v1.ID || v.AgentID == nil || *v.AgentID != "agent-h" ||
				v.RunID == nil || *v.RunID != "run-h" || v.CreatedAt.IsZero() {
				t.Fatalf("version %d: %+v, want the version of %+v", i, v, want)
			}
		}
		for _, line := range []string{"Versions of doc.txt (" + v1.ID + "), newest first:\n",
			"version 3 (current): 5 bytes, text/plain; charset=utf-8, etag " + v3.ETag,
			"version 1: 3 bytes", ", agent agent-h, run run-h\n", "revert_file"} {
			if !strings.Contains(text(res), line) {
				t.Fatalf("text lacks %q:\n%s", line, text(res))
			}
		}
	})

	t.Run("RevertMakesANewVersion", func(t *testing.T) {
		var r mcpserver.File
		res := b.ok(t, "revert_file", map[string]any{"path": "doc.txt", "version": 1}, &r)
		if r.ID != v1.ID || r.Version != 4 || r.ETag != v1.ETag || b.content(t, "doc.txt") != "one" {
			t.Fatalf("reverted %+v", r)
		}
		if !strings.HasPrefix(text(res), "Reverted doc.txt to the content of version 1. Now doc.txt: "+v1.ID+", version 4") {
			t.Fatalf("text %s", text(res))
		}
		var h mcpserver.FileHistory
		b.ok(t, "file_history", map[string]any{"path": "doc.txt"}, &h)
		if len(h.Versions) != 4 || h.Versions[0].Version != 4 || !h.Versions[0].Current || h.Versions[1].Current {
			t.Fatalf("history %s", mustJSON(h))
		}
		// The same content again: nothing to do.
		res = b.ok(t, "revert_file", map[string]any{"path": "doc.txt", "version": 1}, &r)
		if r.Version != 4 || !strings.HasPrefix(text(res), "No change: doc.txt already has the content of version 1; nothing was written.") {
			t.Fatalf("%+v %s", r, text(res))
		}
	})

	t.Run("RevertOnlyTheVersionItSaw", func(t *testing.T) {
		_, msg := b.fail(t, "revert_file", map[string]any{"path": "doc.txt", "version": 2, "expected_etag": v3.ETag}, "PRECONDITION_FAILED")
		if !strings.Contains(msg, "nothing was written") || !strings.Contains(msg, "file_history") || b.content(t, "doc.txt") != "one" {
			t.Fatalf("text %s", msg)
		}
		var r mcpserver.File
		b.ok(t, "revert_file", map[string]any{"path": "doc.txt", "version": 2, "expected_etag": strings.Trim(v1.ETag, `"`)}, &r)
		if r.Version != 5 || b.content(t, "doc.txt") != "two" {
			t.Fatalf("conditional revert %+v", r)
		}
	})

	t.Run("KeyedRevertReplays", func(t *testing.T) {
		args := map[string]any{"path": "doc.txt", "version": 3, "idempotency_key": "revert-doc-3"}
		var first, again mcpserver.File
		b.ok(t, "revert_file", args, &first)
		if first.Version != 6 || b.content(t, "doc.txt") != "three" {
			t.Fatalf("first %+v", first)
		}
		var later mcpserver.File
		b.ok(t, "write_file", map[string]any{"path": "doc.txt", "content": "four", "if_exists": "replace"}, &later)
		res := b.ok(t, "revert_file", args, &again)
		if again.Version != first.Version || again.ETag != first.ETag || b.content(t, "doc.txt") != "four" {
			t.Fatalf("replay %+v after %+v: content %q", again, first, b.content(t, "doc.txt"))
		}
		if !strings.HasPrefix(text(res), `Already done: idempotency_key "revert-doc-3" holds this revert`) ||
			!strings.Contains(text(res), fmt.Sprintf("now version %d", later.Version)) {
			t.Fatalf("text %s", text(res))
		}
		args["version"] = 2
		b.fail(t, "revert_file", args, "IDEMPOTENCY_CONFLICT")
		b.badArgs(t, "revert_file", map[string]any{"path": "doc.txt", "version": 1, "idempotency_key": "bad key"}, "idempotency_key")
	})

	t.Run("UnknownVersionsAndFiles", func(t *testing.T) {
		_, msg := b.fail(t, "revert_file", map[string]any{"path": "doc.txt", "version": 99}, "NOT_FOUND")
		if !strings.HasPrefix(msg, "NOT_FOUND: doc.txt has no version 99") || !strings.Contains(msg, `Call file_history with path "doc.txt"`) {
			t.Fatalf("text %s", msg)
		}
		b.badArgs(t, "revert_file", map[string]any{"path": "doc.txt", "version": 0}, "version")
		b.badArgs(t, "revert_file", map[string]any{"path": "doc.txt", "version": 1.5}, "version")
		_, msg = b.fail(t, "revert_file", map[string]any{"path": "nope.txt", "version": 1}, "NOT_FOUND")
		if !strings.Contains(msg, "no live file at nope.txt") {
			t.Fatalf("text %s", msg)
		}
		b.fail(t, "file_history", map[string]any{"path": "nope.txt"}, "NOT_FOUND")
		b.fail(t, "file_history", map[string]any{"path": "a//b"}, "INVALID_PATH")
		// A deleted file: restore it first.
		b.ok(t, "write_file", map[string]any{"path": "gone.txt", "content": "x"}, nil)
		b.ok(t, "delete_file", map[string]any{"path": "gone.txt"}, nil)
		b.fail(t, "revert_file", map[string]any{"path": "gone.txt", "version": 1}, "NOT_FOUND")
		b.fail(t, "file_history", map[string]any{"path": "gone.txt"}, "NOT_FOUND")
	})

	t.Run("AnotherSubjectsFileIsNotFound", func(t *testing.T) {
		stranger := connect(t, b.srv, config{subject: "stranger"})
		stranger.fail(t, "file_history", map[string]any{"path": "doc.txt"}, "NOT_FOUND")
		stranger.fail(t, "revert_file", map[string]any{"path": "doc.txt", "version": 1}, "NOT_FOUND")
		if b.content(t, "doc.txt") != "four" {
			t.Fatal("another subject reverted the file")
		}
	})

	t.Run("HistoryComesInPages", func(t *testing.T) {
		// 101 versions: one more than a page.
		for i := range 101 {
			if _, err := b.client.PutFile(context.Background(), "many.txt", strings.NewReader(fmt.Sprintf("v%d", i+1)),
				client.PutOptions{Replace: true}); err != nil {
				t.Fatal(err)
			}
		}
		var first, rest mcpserver.FileHistory
		res := b.ok(t, "file_history", map[string]any{"path": "many.txt"}, &first)
		if len(first.Versions) != 100 || !first.HasMore || first.Versions[0].Version != 101 ||
			!strings.Contains(text(res), fmt.Sprintf("cursor=%q", first.NextCursor)) {
			t.Fatalf("first page: %d versions, has_more %v, next %q", len(first.Versions), first.HasMore, first.NextCursor)
		}
		b.ok(t, "file_history", map[string]any{"path": "many.txt", "cursor": first.NextCursor}, &rest)
		if len(rest.Versions) != 1 || rest.HasMore || rest.Versions[0].Version != 1 || rest.Versions[0].Current {
			t.Fatalf("second page %s", mustJSON(rest))
		}
		p, _ := b.fail(t, "file_history", map[string]any{"path": "many.txt", "cursor": "not-a-cursor"}, "INVALID_REQUEST")
		if p.Errors[0].Field != "cursor" {
			t.Fatalf("bad cursor %+v", p)
		}
	})
}

func TestShareFile(t *testing.T) {
	b := setup(t, config{subject: "sharer"})
	var v1, v2 mcpserver.File
	b.ok(t, "write_file", map[string]any{"path": "out/report.md", "content": "first report"}, &v1)
	b.ok(t, "write_file", map[string]any{"path": "out/report.md", "content": "second report", "if_exists": "replace"}, &v2)

	t.Run("ServesTheCurrentContentWithoutAToken", func(t *testing.T) {
		var l mcpserver.Link
		res := b.ok(t, "share_file", map[string]any{"path": "out/report.md"}, &l)
		if l.FileID != v1.ID || l.Version != nil || !strings.HasPrefix(l.URL, b.srv.URL+"/s/") || l.RevokedAt != nil ||
			!strings.HasPrefix(l.ID, "lnk_") || l.ExpiresAt.Sub(l.CreatedAt) != time.Hour {
			t.Fatalf("link %+v", l)
		}
		for _, want := range []string{"Share link to out/report.md (its current content", "\n" + l.URL + "\n", "shown only now",
			"valid until " + l.ExpiresAt.Format(time.RFC3339)} {
			if !strings.Contains(text(res), want) {
				t.Fatalf("text lacks %q:\n%s", want, text(res))
			}
		}
		if got := fetch(t, l.URL); got != "second report" {
			t.Fatalf("link serves %q", got)
		}
		// It serves what is current when opened.
		b.ok(t, "write_file", map[string]any{"path": "out/report.md", "content": "third report", "if_exists": "replace"}, nil)
		if got := fetch(t, l.URL); got != "third report" {
			t.Fatalf("link serves %q after a replace", got)
		}
	})

	t.Run("PinsAVersionAndTakesAnExpiry", func(t *testing.T) {
		var l mcpserver.Link
		res := b.ok(t, "share_file", map[string]any{"path": "out/report.md", "version": 1, "expires_in": 60}, &l)
		if l.Version == nil || *l.Version != 1 || l.ExpiresAt.Sub(l.CreatedAt) != time.Minute || !strings.Contains(text(res), "(version 1)") {
			t.Fatalf("link %+v\n%s", l, text(res))
		}
		if got := fetch(t, l.URL); got != "first report" {
			t.Fatalf("pinned link serves %q", got)
		}
		b.ok(t, "share_file", map[string]any{"path": "out/report.md", "expires_in": 604800}, &l)
		if l.ExpiresAt.Sub(l.CreatedAt) != 7*24*time.Hour {
			t.Fatalf("a week: %+v", l)
		}
	})

	t.Run("EveryCallMakesANewLink", func(t *testing.T) {
		var a, c mcpserver.Link
		b.ok(t, "share_file", map[string]any{"path": "out/report.md"}, &a)
		b.ok(t, "share_file", map[string]any{"path": "out/report.md"}, &c)
		if a.ID == c.ID || a.URL == c.URL {
			t.Fatalf("two calls, one link: %+v %+v", a, c)
		}
		links, err := b.client.Links(context.Background(), v1.ID)
		if err != nil || len(links) != 5 {
			t.Fatalf("links %d: %v", len(links), err)
		}
		for _, l := range links {
			if l.URL != nil {
				t.Fatalf("a listed link shows its URL: %+v", l)
			}
		}
	})

	t.Run("UnknownVersionsAndFiles", func(t *testing.T) {
		_, msg := b.fail(t, "share_file", map[string]any{"path": "out/report.md", "version": 99}, "NOT_FOUND")
		if !strings.HasPrefix(msg, "NOT_FOUND: out/report.md has no version 99") || !strings.Contains(msg, "file_history") {
			t.Fatalf("text %s", msg)
		}
		b.fail(t, "share_file", map[string]any{"path": "out/none.md"}, "NOT_FOUND")
		b.badArgs(t, "share_file", map[string]any{"path": "out/report.md", "version": 0}, "version")
		b.badArgs(t, "share_file", map[string]any{"path": "out/report.md", "expires_in": 30}, "expires_in")
		stranger := connect(t, b.srv, config{subject: "stranger"})
		stranger.fail(t, "share_file", map[string]any{"path": "out/report.md"}, "NOT_FOUND")
	})

	t.Run("GetsAllOfAFileTooLargeToRead", func(t *testing.T) {
		small := connect(t, b.srv, config{subject: "sharer", opts: mcpserver.Options{MaxReadBytes: 1024}})
		big := bytes.Repeat([]byte("0123456789abcdef\n"), 200)
		b.put(t, "big.txt", big, "text/plain")
		var tf mcpserver.TextFile
		small.ok(t, "read_text_file", map[string]any{"path": "big.txt"}, &tf)
		if !tf.Truncated || !strings.Contains(tf.Note, "share_file") {
			t.Fatalf("read %+v", tf)
		}
		var l mcpserver.Link
		small.ok(t, "share_file", map[string]any{"path": "big.txt"}, &l)
		if got := fetch(t, l.URL); got != string(big) {
			t.Fatalf("link serves %d bytes, want %d", len(got), len(big))
		}
	})
}

// fetch GETs a share link's URL without any token.
func fetch(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body := testkit.ReadAll(t, res.Body, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
	}
	return string(body)
}

func TestRunSummary(t *testing.T) {
	b := setup(t, config{subject: "ledger", agentID: "agent-s", runID: "run-sum"})
	b.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "aaa"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "b.txt", "content": "bb"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "AAAA", "if_exists": "replace"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "AAAA", "if_exists": "replace"}, nil) // no change: no event
	var del mcpserver.File
	b.ok(t, "delete_file", map[string]any{"path": "b.txt"}, &del)
	b.ok(t, "restore_file", map[string]any{"file_id": del.ID}, nil)
	b.ok(t, "move_file", map[string]any{"source": "a.txt", "destination": "c.txt"}, nil)
	b.ok(t, "revert_file", map[string]any{"path": "c.txt", "version": 1}, nil)
	// Another run of the same subject, and its own summary.
	other := connect(t, b.srv, config{subject: "ledger", agentID: "agent-t", runID: "run-other"})
	other.ok(t, "write_file", map[string]any{"path": "d.txt", "content": "d"}, nil)

	check := func(t *testing.T, r mcpserver.Run) {
		t.Helper()
		want := mcpserver.RunCounts{Created: 2, Replaced: 1, Deleted: 1, Restored: 1, Moved: 1, Reverted: 1}
		if r.RunID != "run-sum" || r.Object != "run" || r.Counts != want || r.BytesWritten != 3+2+4 || r.LiveFiles != 2 ||
			len(r.AgentIDs) != 1 || r.AgentIDs[0] != "agent-s" || r.FirstAt.IsZero() || r.LastAt.Before(r.FirstAt) {
			t.Fatalf("run %s", mustJSON(r))
		}
	}

	t.Run("TheSessionsRun", func(t *testing.T) {
		var r mcpserver.Run
		res := b.ok(t, "run_summary", map[string]any{}, &r)
		check(t, r)
		for _, want := range []string{"Run run-sum (agents agent-s), from ", "created 2, replaced 1, deleted 1, restored 1, moved 1, reverted 1",
			"9 bytes written", "2 of the files it created or last wrote are live now", "list_run_files"} {
			if !strings.Contains(text(res), want) {
				t.Fatalf("text lacks %q:\n%s", want, text(res))
			}
		}
	})

	t.Run("ARunByItsId", func(t *testing.T) {
		var r mcpserver.Run
		other.ok(t, "run_summary", map[string]any{"run_id": "run-sum"}, &r)
		check(t, r)
		other.ok(t, "run_summary", map[string]any{}, &r)
		if r.RunID != "run-other" || r.Counts.Created != 1 || r.BytesWritten != 1 || r.AgentIDs[0] != "agent-t" {
			t.Fatalf("run-other %s", mustJSON(r))
		}
	})

	t.Run("UnknownAndInvalidRuns", func(t *testing.T) {
		_, msg := b.fail(t, "run_summary", map[string]any{"run_id": "run-none"}, "NOT_FOUND")
		if !strings.HasPrefix(msg, "NOT_FOUND: no run run-none") || !strings.Contains(msg, "Check the run id") {
			t.Fatalf("text %s", msg)
		}
		p, _ := b.fail(t, "run_summary", map[string]any{"run_id": "bad run id"}, "VALIDATION_FAILED")
		if p.Errors[0].Field != "run_id" {
			t.Fatalf("problem %+v", p)
		}
		anon := connect(t, b.srv, config{subject: "ledger"})
		_, msg = anon.fail(t, "run_summary", map[string]any{}, "VALIDATION_FAILED")
		if !strings.Contains(msg, "this session has no run id") {
			t.Fatalf("text %s", msg)
		}
		stranger := connect(t, b.srv, config{subject: "stranger", runID: "run-sum"})
		stranger.fail(t, "run_summary", map[string]any{}, "NOT_FOUND")
	})

	t.Run("ReadOnlyTokensRead", func(t *testing.T) {
		ro := connect(t, b.srv, config{subject: "ledger", scopes: []string{"read"}})
		var r mcpserver.Run
		ro.ok(t, "run_summary", map[string]any{"run_id": "run-sum"}, &r)
		check(t, r)
	})
}
