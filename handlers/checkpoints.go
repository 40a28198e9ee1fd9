package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// createCheckpointBody is the body of POST /v1/checkpoints.
type createCheckpointBody struct {
	Name   *string `json:"name"`
	Prefix *string `json:"prefix"`
	Note   *string `json:"note"`
}

// createCheckpoint is POST /v1/checkpoints: 201 with the checkpoint.
func (a *API) createCheckpoint(c echo.Context) error {
	var body createCheckpointBody
	if _, err := readJSON(c, maxJSONBytes, &body, true); err != nil {
		return err
	}
	var req agentfs.NewCheckpoint
	if body.Name != nil {
		if err := agentfs.CheckCheckpointName(*body.Name); err != nil {
			return problem.Validation("name", err.Error())
		}
		req.Name = *body.Name
	}
	if body.Prefix != nil && *body.Prefix != "" {
		p, err := normalizePrefix(*body.Prefix)
		if err != nil {
			return err
		}
		req.Prefix = p
	}
	if body.Note != nil {
		if len(*body.Note) > agentfs.MaxCheckpointNote {
			return problem.Validation("note", "must be at most 4096 bytes")
		}
		req.Note = *body.Note
	}
	res, err := a.deps.Writes.CreateCheckpoint(c.Request().Context(), caller(c), req)
	return writeResult(c, res, err)
}

// listCheckpoints is GET /v1/checkpoints: newest first.
func (a *API) listCheckpoints(c echo.Context) error {
	limit, err := limitParam(c, defaultListLimit, maxListLimit)
	if err != nil {
		return err
	}
	filter := agentfs.CheckpointFilter{Limit: limit + 1}
	if v := c.QueryParam("prefix"); v != "" {
		if filter.Prefix, err = normalizePrefix(v); err != nil {
			return err
		}
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, err := agentfs.ParseCursor(v, "ckpt")
		if err != nil {
			return problem.Invalid("cursor", err.Error())
		}
		filter.After = &cur
	}
	cps, err := a.deps.Points.ListCheckpoints(c.Request().Context(), caller(c), filter)
	if err != nil {
		return err
	}
	out := api.CheckpointList{Data: make([]api.Checkpoint, 0, len(cps))}
	if len(cps) > limit {
		cps, out.HasMore = cps[:limit], true
		last := cps[limit-1]
		next := agentfs.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
		out.NextCursor = &next
	}
	for _, cp := range cps {
		out.Data = append(out.Data, render.Checkpoint(cp))
	}
	return c.JSON(http.StatusOK, out)
}

// getCheckpoint is GET /v1/checkpoints/{id_or_name}.
func (a *API) getCheckpoint(c echo.Context) error {
	cp, err := a.deps.Points.Checkpoint(c.Request().Context(), caller(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Checkpoint(cp))
}

// deleteCheckpoint is DELETE /v1/checkpoints/{id_or_name}: safe to repeat.
func (a *API) deleteCheckpoint(c echo.Context) error {
	res, err := a.deps.Writes.DeleteCheckpoint(c.Request().Context(), caller(c), c.Param("id"))
	return writeResult(c, res, err)
}
