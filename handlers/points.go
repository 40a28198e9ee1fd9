package handlers

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// Points reads points in time (DESIGN §18) through the read gate: files as
// they were, checkpoints and diffs.
type Points interface {
	FilesAsOf(ctx context.Context, who agentfs.Caller, spec agentfs.PointSpec, filter agentfs.AsOfFilter) ([]*agentfs.File, agentfs.Point, error)
	FileAsOf(ctx context.Context, who agentfs.Caller, id string, spec agentfs.PointSpec) (*agentfs.File, error)
	ContentAsOf(ctx context.Context, who agentfs.Caller, id string, spec agentfs.PointSpec) (*agentfs.File, error)
	Checkpoint(ctx context.Context, who agentfs.Caller, idOrName string) (*agentfs.Checkpoint, error)
	ListCheckpoints(ctx context.Context, who agentfs.Caller, filter agentfs.CheckpointFilter) ([]*agentfs.Checkpoint, error)
	Diff(ctx context.Context, who agentfs.Caller, from, to agentfs.PointSpec, req agentfs.DiffRequest) ([]agentfs.Change, error)
	Fork(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Fork, error)
	ListForks(ctx context.Context, who agentfs.Caller, filter agentfs.ForkFilter) ([]*agentfs.Fork, error)
}

// pointParam parses the point in query parameter name (def when absent and
// def is not "").
func pointParam(c echo.Context, name, def string) (agentfs.PointSpec, bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		if def == "" {
			return agentfs.PointSpec{}, false, nil
		}
		v = def
	}
	spec, err := agentfs.ParsePoint(name, v, caller(c).Subject)
	return spec, true, err
}

// readFile answers a read of the file named by the route's id: as it was
// at the as_of point with past, else as it is now, read and answered.
func readFile(c echo.Context, past func(echo.Context, agentfs.PointSpec) error,
	read func(context.Context, agentfs.Caller, string) (*agentfs.File, error), answer func(echo.Context, *agentfs.File) error) error {
	if done, err := servedAsOf(c, past); done {
		return err
	}
	f, err := read(c.Request().Context(), caller(c), c.Param("id"))
	if err != nil {
		return err
	}
	return answer(c, f)
}

// servedAsOf serves a read of the past: when the request names a point
// (as_of), past answers it and servedAsOf reports true with past's error;
// a malformed point is true with its problem.
func servedAsOf(c echo.Context, past func(echo.Context, agentfs.PointSpec) error) (bool, error) {
	spec, ok, err := pointParam(c, "as_of", "")
	if err != nil || !ok {
		return err != nil, err
	}
	return true, past(c, spec)
}

// pathCursor is the opaque cursor of a listing in path order.
func pathCursor(path, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("p1|" + path + "|" + id))
}

func parsePathCursor(s string) (path, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	rest, ok := strings.CutPrefix(string(raw), "p1|")
	i := strings.LastIndexByte(rest, '|')
	if err != nil || !ok || i < 1 {
		return "", "", problem.Invalid("cursor", "is not a cursor this server issued")
	}
	return rest[:i], rest[i+1:], nil
}

// listFilesAsOf is GET /v1/files?as_of=: the files live at the point, in
// path order, each as it was then. Only prefix, limit and cursor combine
// with as_of.
func (a *API) listFilesAsOf(c echo.Context, spec agentfs.PointSpec) error {
	q := c.QueryParams()
	for _, k := range []string{"run_id", "agent_id", "last_run_id", "path", "include_deleted"} {
		if q.Get(k) != "" {
			return problem.Validation(k, "cannot be combined with as_of")
		}
	}
	limit, err := limitParam(c, defaultListLimit, maxListLimit)
	if err != nil {
		return err
	}
	req := agentfs.AsOfFilter{Limit: limit + 1}
	if v := q.Get("prefix"); v != "" {
		if req.Prefix, err = normalizePrefix(v); err != nil {
			return err
		}
	}
	if v := q.Get("cursor"); v != "" {
		if req.After, _, err = parsePathCursor(v); err != nil {
			return err
		}
	}
	fields, err := parseFields(q)
	if err != nil {
		return err
	}
	files, _, err := a.deps.Points.FilesAsOf(c.Request().Context(), caller(c), spec, req)
	if err != nil {
		return err
	}
	out := api.FileList{Data: make([]api.File, 0, len(files))}
	if len(files) > limit {
		files, out.HasMore = files[:limit], true
		next := pathCursor(files[len(files)-1].Path, "")
		out.NextCursor = &next
	}
	for _, f := range files {
		out.Data = append(out.Data, render.File(a.deps.PublicURL, f))
	}
	return writeFileList(c, out, fields)
}

// getFileAsOf is GET /v1/files/{id}?as_of=: the file as it was at the
// point (404 when it was not live then).
func (a *API) getFileAsOf(c echo.Context, spec agentfs.PointSpec) error {
	f, err := a.deps.Points.FileAsOf(c.Request().Context(), caller(c), c.Param("id"), spec)
	if err != nil {
		return err
	}
	return a.answerFile(c, f)
}

// getContentAsOf is GET and HEAD /v1/files/{id}/content?as_of=: the bytes
// of the version current at the point.
func (a *API) getContentAsOf(c echo.Context, spec agentfs.PointSpec) error {
	f, err := a.deps.Points.ContentAsOf(c.Request().Context(), caller(c), c.Param("id"), spec)
	if err != nil {
		return err
	}
	return a.serveFileContent(c, contentOf(f))
}

// limitParam is the limit query parameter: def when absent, 1..max.
func limitParam(c echo.Context, def, most int) (int, error) {
	return limitOf(c.QueryParam("limit"), def, most)
}

// limitOf reads a page size v: def when empty, else 1..most.
func limitOf(v string, def, most int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, problem.Invalid("limit", "must be an integer")
	}
	if n < 1 || n > most {
		return 0, problem.Validation("limit", "must be between 1 and "+strconv.Itoa(most))
	}
	return n, nil
}
