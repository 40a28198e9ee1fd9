package handlers

import (
	"archive/tar"
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// maxEventWait bounds ?wait on GET /v1/events.
const maxEventWait = 30

// listEvents is GET /v1/events: the subject's events, oldest first, after
// a cursor; with wait, held until at least one matching event commits.
func (a *API) listEvents(c echo.Context) error {
	filter, wait, err := a.bindEventFilter(c)
	if err != nil {
		return err
	}
	limit := filter.Limit
	filter.Limit++
	events, next, err := a.deps.Ledger.AwaitEvents(c.Request().Context(), caller(c), filter, wait)
	if err != nil {
		return eventsProblem(err)
	}
	out := api.EventList{}
	var last *agentfs.Event
	out.Data, out.HasMore, last = page(events, limit, render.Event)
	if out.HasMore {
		next.Position, next.At = last.Position, last.At
	}
	out.NextCursor = next.String()
	return c.JSON(http.StatusOK, out)
}

// eventsProblem is the problem of a read of the feed that failed: an
// expired cursor, or too many of the subject's waits on this instance.
func eventsProblem(err error) error {
	if errors.Is(err, agentfs.ErrCursorExpired) {
		return problem.New(problem.CursorExpired, "the events after this cursor may have been removed by the retention; start again without after")
	}
	if errors.Is(err, agentfs.ErrTooManyWaiters) {
		p := problem.New(problem.RateLimited, "this subject has as many requests waiting for events on this server as it may; "+
			"wait for one of them to answer, or ask again after Retry-After seconds")
		p.RetryAfter = 1
		return p
	}
	return err
}

func (a *API) bindEventFilter(c echo.Context) (agentfs.EventFilter, time.Duration, error) {
	q := c.QueryParams()
	subject := principal(c).Subject
	var f agentfs.EventFilter
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return f, 0, err
	}
	switch after := q.Get("after"); after {
	case "":
	case "now":
		cur, err := a.deps.Ledger.EventsStart(c.Request().Context(), caller(c))
		if err != nil {
			return f, 0, err
		}
		f.After = &cur
	default:
		cur, err := agentfs.ParseEventCursor(after, subject)
		if err != nil {
			return f, 0, problem.Invalid("after", err.Error())
		}
		f.After = &cur
	}
	f.RunID, f.AgentID, f.FileID, f.Prefix = q.Get("run_id"), q.Get("agent_id"), q.Get("file_id"), q.Get("prefix")
	for _, v := range []struct{ name, value string }{{"run_id", f.RunID}, {"agent_id", f.AgentID}} {
		if v.value != "" && !agentfs.ValidTagValue(v.value) {
			return f, 0, problem.Validation(v.name, "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -")
		}
	}
	if f.FileID != "" && !agentfs.WellFormedID("file", f.FileID) {
		return f, 0, problem.Validation("file_id", "is not a file id (file_ followed by 26 characters)")
	}
	if f.Prefix, err = normalizePrefix(f.Prefix); err != nil {
		return f, 0, err
	}
	if types := q.Get("type"); types != "" {
		for _, t := range strings.Split(types, ",") {
			if !knownEventType(t) {
				return f, 0, problem.Validation("type", "must be a comma-separated list of "+strings.Join(agentfs.EventTypes, ", "))
			}
			f.Types = append(f.Types, t)
		}
	}
	wait, err := parseWait(q.Get("wait"), maxEventWait)
	return f, wait, err
}

func knownEventType(t string) bool {
	for _, k := range agentfs.EventTypes {
		if t == k {
			return true
		}
	}
	return false
}

// runID reads the run id path segment. A / in it arrives as %2F, which
// Echo hands over still escaped (it routes on the raw path), so the
// segment is unescaped here. A / that arrives as itself makes two segments,
// which name no route (Echo's last parameter would take them both).
func runID(c echo.Context) (string, error) {
	raw := c.Param("run_id")
	if strings.Contains(raw, "/") {
		return "", problem.New(problem.NotFound, "a run id is one path segment: send a / in it as %2F")
	}
	id, err := url.PathUnescape(raw)
	if err != nil || !agentfs.ValidTagValue(id) {
		return "", problem.Validation("run_id", "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit")
	}
	return id, nil
}

// getRun is GET /v1/runs/{run_id}: what one run did.
func (a *API) getRun(c echo.Context) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	r, err := a.deps.Ledger.RunSummary(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Run(r))
}

// revertRunBody is the optional body of POST /v1/runs/{run_id}/revert.
type revertRunBody struct {
	Force  *bool `json:"force"`
	DryRun bool  `json:"dry_run"`
}

// revertRun is POST /v1/runs/{run_id}/revert: undo a run, as a durable
// batch (202; the key is required), or answer its plan with dry_run (200,
// nothing changed, no key needed).
func (a *API) revertRun(c echo.Context) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	var body revertRunBody
	if _, err := readJSON(c, maxJSONBytes, &body, true); err != nil {
		return err
	}
	force := body.Force != nil && *body.Force
	if body.DryRun {
		return a.planRevertRun(c, id, force)
	}
	if key, _ := c.Get(keyKey).(string); key == "" {
		return problem.New(problem.IdempotencyKeyRequired, "POST /v1/runs/{run_id}/revert runs only with an Idempotency-Key")
	}
	res, err := a.deps.Writes.RevertRun(c.Request().Context(), caller(c), id, force)
	return writeResult(c, res, err)
}

// archivePage is how many files an archive lists at a time.
const archivePage = 200

// runArchive is GET /v1/runs/{run_id}/archive?format=zip|tar: the files the
// run created or last wrote that are live, as one archive streamed in
// constant memory, entries named by path. Each entry is one whole version
// (blobs never change), whatever happens to the file meanwhile.
func (a *API) runArchive(c echo.Context) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	format := c.QueryParam("format")
	if format == "" {
		format = "zip"
	}
	if format != "zip" && format != "tar" {
		return problem.Validation("format", "must be zip or tar")
	}
	ctx := c.Request().Context()
	if _, err := a.deps.Ledger.RunArchive(ctx, caller(c), id); err != nil {
		return err // 404 for a run no event names
	}
	h := c.Response().Header()
	name := "run-" + strings.NewReplacer("/", "_", ":", "_").Replace(id) + "." + format
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set(echo.HeaderContentType, map[string]string{"zip": "application/zip", "tar": "application/x-tar"}[format])
	if c.Request().Method == http.MethodHead {
		c.Response().WriteHeader(http.StatusOK)
		return nil
	}
	out := newClientWriter(c.Response(), a.deps.Limits.WriteIdleTimeout)
	defer out.done()
	c.Response().WriteHeader(http.StatusOK)
	if err := a.writeArchive(c, out, format, id); err != nil {
		// The status is sent: the connection is cut, so the client sees a
		// short archive, never a silently truncated one.
		cut := &cutResponse{err: err, clientGone: out.clientGone(ctx, err)}
		if cut.clientGone {
			a.deps.Log.DebugContext(ctx, "client gone", "run_id", id, "err", err)
		} else {
			a.deps.Log.WarnContext(ctx, "run archive failed", "run_id", id, "err", err)
		}
		return cut
	}
	return nil
}

// archiveWriter is one entry at a time of a zip or tar stream.
type archiveWriter interface {
	entry(f *agentfs.File) (io.Writer, error)
	Close() error
}

type zipArchive struct{ *zip.Writer }

func (z zipArchive) entry(f *agentfs.File) (io.Writer, error) {
	return z.CreateHeader(&zip.FileHeader{Name: f.Path, Method: zip.Store, Modified: f.UpdatedAt.UTC(),
		UncompressedSize64: uint64(f.SizeBytes)})
}

type tarArchive struct{ *tar.Writer }

func (t tarArchive) entry(f *agentfs.File) (io.Writer, error) {
	err := t.WriteHeader(&tar.Header{Name: f.Path, Mode: 0o644, Size: f.SizeBytes, ModTime: f.UpdatedAt.UTC(),
		Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	return t.Writer, err
}

func (a *API) writeArchive(c echo.Context, out io.Writer, format, runID string) error {
	ctx, who := c.Request().Context(), caller(c)
	var w archiveWriter = tarArchive{tar.NewWriter(out)}
	if format == "zip" {
		w = zipArchive{zip.NewWriter(out)}
	}
	buf := make([]byte, copyBufferSize)
	filter := agentfs.FileFilter{WrittenByRun: runID, Limit: archivePage}
	for {
		files, err := a.deps.Files.ListFiles(ctx, who, filter)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := a.archiveEntry(ctx, w, f, buf); err != nil {
				return err
			}
		}
		if len(files) < archivePage {
			return w.Close()
		}
		last := files[len(files)-1]
		filter.After = &agentfs.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

func (a *API) archiveEntry(ctx context.Context, w archiveWriter, f *agentfs.File, buf []byte) error {
	dst, err := w.entry(f)
	if err != nil {
		return err
	}
	if f.SizeBytes == 0 {
		return nil
	}
	blob, err := a.deps.Files.OpenBlob(ctx, f.BlobKey, 0, f.SizeBytes)
	if err != nil {
		return err
	}
	defer blob.Close()
	n, err := io.CopyBuffer(writerOnly{dst}, blob, buf)
	if err == nil && n != f.SizeBytes {
		err = fmt.Errorf("blob %s of %s gave %d of %d bytes", f.BlobKey, f.ID, n, f.SizeBytes)
	}
	return err
}
