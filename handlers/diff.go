package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// getDiff is GET /v1/diff?from=&to=&prefix=&limit=&cursor=: the files that
// differ between two points, by path.
func (a *API) getDiff(c echo.Context) error {
	from, ok, err := pointParam(c, "from", "")
	if err != nil {
		return err
	}
	if !ok {
		return problem.Validation("from", "is required: an event cursor, a checkpoint id or name, an RFC 3339 time or now")
	}
	to, _, err := pointParam(c, "to", "now")
	if err != nil {
		return err
	}
	format := c.QueryParam("format")
	if format != "" && format != "json" && format != "patch" {
		return problem.Validation("format", "must be json or patch")
	}
	def := defaultListLimit
	if format == "patch" {
		def = maxListLimit
	}
	limit, err := limitParam(c, def, maxListLimit)
	if err != nil {
		return err
	}
	req := agentfs.DiffRequest{Limit: limit + 1, Content: format == "patch"}
	if v := c.QueryParam("prefix"); v != "" {
		if req.Prefix, err = normalizePrefix(v); err != nil {
			return err
		}
	}
	if v := c.QueryParam("cursor"); v != "" {
		if req.AfterPath, req.AfterID, err = parsePathCursor(v); err != nil {
			return err
		}
	}
	changes, err := a.deps.Points.Diff(c.Request().Context(), caller(c), from, to, req)
	if err != nil {
		return err
	}
	out := api.DiffList{Object: "list", Data: make([]api.Change, 0, len(changes))}
	next := ""
	if len(changes) > limit {
		changes, out.HasMore = changes[:limit], true
		last := changes[limit-1]
		next = pathCursor(last.Path, last.FileID)
		out.NextCursor = &next
	}
	if format == "patch" {
		return a.writePatch(c, changes, next)
	}
	for _, ch := range changes {
		out.Data = append(out.Data, render.Change(ch))
	}
	return c.JSON(http.StatusOK, out)
}
