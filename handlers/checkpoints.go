package handlers

import (
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
	return writeBody(c, true, bindCheckpoint, a.deps.Writes.CreateCheckpoint)
}

// bindCheckpoint checks a checkpoint's body: every field may be left out.
func bindCheckpoint(_ echo.Context, body createCheckpointBody) (agentfs.NewCheckpoint, error) {
	var req agentfs.NewCheckpoint
	if body.Name != nil {
		if err := agentfs.CheckCheckpointName(*body.Name); err != nil {
			return req, problem.Validation("name", err.Error())
		}
		req.Name = *body.Name
	}
	if body.Prefix != nil && *body.Prefix != "" {
		p, err := normalizePrefix(*body.Prefix)
		if err != nil {
			return req, err
		}
		req.Prefix = p
	}
	if body.Note != nil {
		if len(*body.Note) > agentfs.MaxCheckpointNote {
			return req, problem.Validation("note", "must be at most 4096 bytes")
		}
		req.Note = *body.Note
	}
	return req, nil
}

// listCheckpoints is GET /v1/checkpoints: newest first.
func (a *API) listCheckpoints(c echo.Context) error {
	var filter agentfs.CheckpointFilter
	readPrefix := func() (err error) {
		if v := c.QueryParam("prefix"); v != "" {
			filter.Prefix, err = normalizePrefix(v)
		}
		return err
	}
	return createdList(c, "ckpt", readPrefix, func(limit int, after *agentfs.Cursor) ([]*agentfs.Checkpoint, error) {
		filter.Limit, filter.After = limit, after
		return a.deps.Points.ListCheckpoints(c.Request().Context(), caller(c), filter)
	}, render.Checkpoint, func(cp *agentfs.Checkpoint) agentfs.Cursor { return agentfs.Cursor{CreatedAt: cp.CreatedAt, ID: cp.ID} },
		func(p createdPage[api.Checkpoint]) api.CheckpointList { return api.CheckpointList(p) })
}

// getCheckpoint is GET /v1/checkpoints/{id_or_name}.
func (a *API) getCheckpoint(c echo.Context) error {
	return getByID(c, a.deps.Points.Checkpoint, render.Checkpoint)
}

// deleteCheckpoint is DELETE /v1/checkpoints/{id_or_name}: safe to repeat.
func (a *API) deleteCheckpoint(c echo.Context) error {
	return writeByID(c, a.deps.Writes.DeleteCheckpoint)
}
