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
	if filter.After, err = parseCursor(c.QueryParam("cursor"), "ckpt"); err != nil {
		return err
	}
	cps, err := a.deps.Points.ListCheckpoints(c.Request().Context(), caller(c), filter)
	if err != nil {
		return err
	}
	var out api.CheckpointList
	var last *agentfs.Checkpoint
	if out.Data, out.HasMore, last = page(cps, limit, render.Checkpoint); out.HasMore {
		out.NextCursor = nextCursor(last.CreatedAt, last.ID)
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
