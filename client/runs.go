package client

import (
	"context"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/url"
	"sync"

	"github.com/agentfs/agentfs/api"
)

// Archive formats (ArchiveOptions.Format).
const (
	ArchiveZip = "zip"
	ArchiveTar = "tar"
)

// ArchiveOptions adjust RunArchive and WriteRunArchive.
type ArchiveOptions struct {
	// Format is ArchiveZip (the default) or ArchiveTar. Zip entries are
	// stored, not compressed, so the server streams them in constant
	// memory.
	Format string
	// Progress, when set, is told the bytes received so far as they
	// arrive; total is -1, since the server streams the archive without
	// announcing its length. It is called from the goroutine that reads.
	Progress func(received, total int64)
}

// Archive is a run's archive as it streams from the server. Read it to
// its end and close it: a stream the server had to cut short fails the
// read (an unexpected EOF), never ends early in silence.
type Archive struct {
	io.ReadCloser
	// Format is ArchiveZip or ArchiveTar.
	Format string
	// ContentType is application/zip or application/x-tar.
	ContentType string
	// Filename is the name the server suggests (Content-Disposition),
	// run-RUN_ID.zip with / and : in the run id made _.
	Filename string
}

// RunArchive opens the archive of a run's live files (GET
// /v1/runs/{run_id}/archive): every file the run created or last wrote
// that is live now, as one zip or tar whose entries are named by path,
// each a whole version. A run with no event of this subject is
// NOT_FOUND. The request is retried until the response starts; an
// archive cannot resume in the middle, so a stream cut later fails the
// read, and only asking again from the start gets the whole archive.
func (c *Client) RunArchive(ctx context.Context, runID string, opts ArchiveOptions) (*Archive, error) {
	format := opts.Format
	if format == "" {
		format = ArchiveZip
	}
	if format != ArchiveZip && format != ArchiveTar {
		return nil, fmt.Errorf("RunArchive: Format %q: want %q or %q", opts.Format, ArchiveZip, ArchiveTar)
	}
	if err := checkTagValue("run id", runID); err != nil {
		return nil, err
	}
	r := newRequest(routeRunArchive, runPath(runID)+"/archive")
	r.query = url.Values{"format": {format}}
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	a := &Archive{ReadCloser: res.Body, Format: format, ContentType: res.Header.Get("Content-Type")}
	if _, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition")); err == nil {
		a.Filename = params["filename"]
	}
	if opts.Progress != nil {
		a.ReadCloser = &receiving{rc: res.Body, fn: opts.Progress}
	}
	return a, nil
}

// WriteRunArchive streams a run's archive (see RunArchive) to w and
// returns the number of bytes written. An error after some bytes were
// written leaves w holding a partial archive: write to a temporary file
// and keep it only when this returns nil.
func (c *Client) WriteRunArchive(ctx context.Context, runID string, w io.Writer, opts ArchiveOptions) (int64, error) {
	a, err := c.RunArchive(ctx, runID, opts)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	n, err := io.Copy(w, ctxReader{ctx: ctx, r: a})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return n, cerr
		}
		return n, fmt.Errorf("run archive of %s: after %d bytes: %w", runID, n, err)
	}
	return n, nil
}

// receiving counts the bytes read from an archive and tells a callback.
type receiving struct {
	rc io.ReadCloser
	fn func(received, total int64)

	mu       sync.Mutex
	received int64
}

func (r *receiving) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.mu.Lock()
		r.received += int64(n)
		received := r.received
		r.mu.Unlock()
		r.fn(received, -1)
	}
	return n, err
}

func (r *receiving) Close() error { return r.rc.Close() }

// RevertRunOptions adjust RevertRun.
type RevertRunOptions struct {
	// Force undoes also the files another run changed after this one,
	// which otherwise fail their item with CHANGED_SINCE_RUN: that later
	// change is then undone too (it stays in the file's versions).
	Force bool
	// IdempotencyKey names this revert; generated when empty, also by a
	// client WithoutIdempotencyKeys, since the server requires one. The
	// same key and Force again return the same batch, admitted once.
	IdempotencyKey string
	// Wait waits for the batch to end (polling as WaitBatch does) and
	// returns it with every item's outcome; ctx bounds the wait.
	Wait bool
}

// RevertRun undoes what a run did (POST /v1/runs/{run_id}/revert) and
// returns the batch that does it: one undo item per file the run changed,
// the most recently changed first. A file the run created is deleted, one
// it replaced or reverted gets back the version it had before the run, one
// it deleted is restored, one it moved goes back. Items whose file
// another run changed since fail with CHANGED_SINCE_RUN unless
// opts.Force. The revert's own events carry this client's run id
// (WithRunID), so a revert can be reverted in turn. A run with no event
// of this subject is NOT_FOUND.
//
// The batch runs in the background: it comes back queued unless
// opts.Wait, and WaitBatch waits for it later. A retry after a lost
// answer, or a call again with the same key, returns the same batch in
// its current state.
func (c *Client) RevertRun(ctx context.Context, runID string, opts RevertRunOptions) (*Batch, error) {
	if err := checkTagValue("run id", runID); err != nil {
		return nil, err
	}
	r, err := newRequest(routeRevertRun, runPath(runID)+"/revert").withKey(requiredKey(opts.IdempotencyKey)).
		withJSON(map[string]bool{"force": opts.Force})
	return c.startBatch(ctx, r, err, opts.Wait)
}

// runPath is /v1/runs/{run_id}, the run id one escaped path segment (a /
// in it is sent as %2F).
func runPath(runID string) string { return "/v1/runs/" + url.PathEscape(runID) }

// RunList is one page of runs, newest activity first (schema RunList).
type RunList = api.RunList

// RunRevertPlan is what reverting a run would do (schema RunRevertPlan).
type RunRevertPlan = api.RunRevertPlan

// RunListOptions page ListRuns.
type RunListOptions = PageOptions

// ListRuns returns one page of the subject's runs (GET /v1/runs), the
// run with the newest event first, each summarised as Run does.
func (c *Client) ListRuns(ctx context.Context, opts RunListOptions) (*RunList, error) {
	r := newRequest(routeListRuns, "/v1/runs")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	return callJSON[RunList](ctx, c, r)
}

// AllRuns iterates over every run, newest activity first, page after
// page. It stops at the first error, which it yields with a nil run.
func (c *Client) AllRuns(ctx context.Context, opts RunListOptions) iter.Seq2[*Run, error] {
	return allPages(ctx, c.ListRuns, &opts, &opts.Cursor)
}

// PlanRevertRun is what RevertRun would do now, changing nothing (POST
// /v1/runs/{run_id}/revert with dry_run): each file it would delete or
// put back, newest change first. force plans as RevertRunOptions.Force.
func (c *Client) PlanRevertRun(ctx context.Context, runID string, force bool) (*RunRevertPlan, error) {
	if err := checkTagValue("run id", runID); err != nil {
		return nil, err
	}
	r, err := newRequest(routeRevertRun, runPath(runID)+"/revert").withJSON(map[string]bool{"force": force, "dry_run": true})
	if err != nil {
		return nil, err
	}
	return callJSON[RunRevertPlan](ctx, c, r)
}
