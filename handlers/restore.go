package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// restoreBody is the body of POST /v1/restore.
type restoreBody struct {
	Prefix *string `json:"prefix"`
	To     *string `json:"to"`
	Force  bool    `json:"force"`
	DryRun bool    `json:"dry_run"`
}

// restorePoint is POST /v1/restore: put the files under a prefix back to
// their state at a point, as a durable batch (202; the key is required),
// or answer the plan with dry_run (200, nothing changed).
func (a *API) restorePoint(c echo.Context) error {
	var body restoreBody
	if _, err := readJSON(c, maxJSONBytes, &body, false); err != nil {
		return err
	}
	if body.To == nil || *body.To == "" {
		return problem.Validation("to", "is required: an event cursor, a checkpoint id or name, an RFC 3339 time or now")
	}
	if body.Prefix == nil {
		return problem.Validation("prefix", `is required ("" for every file)`)
	}
	req := agentfs.RestoreRequest{Force: body.Force}
	var err error
	if *body.Prefix != "" {
		if req.Prefix, err = normalizePrefix(*body.Prefix); err != nil {
			return err
		}
	}
	if req.To, err = agentfs.ParsePoint("to", *body.To, caller(c).Subject); err != nil {
		return err
	}
	if body.DryRun {
		changes, to, err := a.deps.Writes.PlanRestorePoint(c.Request().Context(), caller(c), req)
		if err != nil {
			return err
		}
		out := api.RestorePlan{Object: "restore_plan", Prefix: req.Prefix, To: to.Cursor(caller(c).Subject).String(),
			Items: make([]api.Change, 0, len(changes))}
		for _, ch := range changes {
			out.Items = append(out.Items, render.Change(ch))
		}
		return c.JSON(http.StatusOK, out)
	}
	if key, _ := c.Get(keyKey).(string); key == "" {
		return problem.New(problem.IdempotencyKeyRequired, "POST /v1/restore runs only with an Idempotency-Key")
	}
	res, err := a.deps.Writes.RestorePoint(c.Request().Context(), caller(c), req)
	return writeResult(c, res, err)
}
