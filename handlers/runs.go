package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// listRuns is GET /v1/runs: the subject's runs, newest activity first,
// each a Run, paged by the position of a run's latest event (the cursor
// is an event cursor of it, so it is the subject's own and expires with
// the events).
func (a *API) listRuns(c echo.Context) error {
	q := c.QueryParams()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	var before int64
	if v := q.Get("cursor"); v != "" {
		cur, err := agentfs.ParseEventCursor(v, principal(c).Subject)
		if err != nil {
			return problem.Invalid("cursor", err.Error())
		}
		before = cur.Position
	}
	runs, err := a.deps.Ledger.ListRuns(c.Request().Context(), caller(c), before, limit+1)
	if err != nil {
		return err
	}
	out := api.RunList{}
	var last *agentfs.RunSummary
	out.Data, out.HasMore, last = page(runs, limit, render.Run)
	if out.HasMore {
		next := agentfs.EventCursor{Subject: principal(c).Subject, Position: last.LastPosition, At: last.LastAt}.String()
		out.NextCursor = &next
	}
	return c.JSON(http.StatusOK, out)
}

// planRevertRun answers POST /v1/runs/{run_id}/revert with dry_run: the
// revert's items as they would be planned now (200), nothing changed.
func (a *API) planRevertRun(c echo.Context, runID string, force bool) error {
	items, err := a.deps.Writes.PlanRevertRun(c.Request().Context(), caller(c), runID, force)
	if err != nil {
		return err
	}
	out := api.RunRevertPlan{Object: "run_revert_plan", RunID: runID, Items: make([]api.RunRevertStep, 0, len(items))}
	for _, it := range items {
		out.Items = append(out.Items, render.RunRevertStep(it))
	}
	return c.JSON(http.StatusOK, out)
}
