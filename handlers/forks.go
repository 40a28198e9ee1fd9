package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// createForkBody is the body of POST /v1/forks.
type createForkBody struct {
	From *string `json:"from"`
	To   *string `json:"to"`
	AsOf *string `json:"as_of"`
}

// bindFork checks a fork's body: two folders, neither inside the other,
// and a point (now when absent).
func bindFork(c echo.Context, body createForkBody) (agentfs.NewFork, error) {
	var req agentfs.NewFork
	for _, f := range []struct {
		name string
		v    *string
		dst  *string
	}{{"from", body.From, &req.From}, {"to", body.To, &req.To}} {
		if f.v == nil || *f.v == "" {
			return req, problem.Validation(f.name, "is required: a folder such as src/")
		}
		p, err := agentfs.NormalizeFolder(*f.v)
		if err != nil {
			return req, problem.Validation(f.name, err.Error())
		}
		*f.dst = p
	}
	if err := agentfs.CheckForkPrefixes(req.From, req.To); err != nil {
		return req, err
	}
	asOf := "now"
	if body.AsOf != nil && *body.AsOf != "" {
		asOf = *body.AsOf
	}
	var err error
	req.AsOf, err = agentfs.ParsePoint("as_of", asOf, caller(c).Subject)
	return req, err
}

// createFork is POST /v1/forks: 201 with the fork.
func (a *API) createFork(c echo.Context) error {
	return writeBody(c, false, bindFork, a.deps.Writes.CreateFork)
}

// mergeBody is the body of POST /v1/forks/{id}/merge.
type mergeBody struct {
	OnConflict *string `json:"on_conflict"`
	DryRun     bool    `json:"dry_run"`
}

// bindMerge checks a merge's body.
func bindMerge(body mergeBody, forkID string) (agentfs.MergeRequest, error) {
	req := agentfs.MergeRequest{ForkID: forkID, OnConflict: agentfs.OnConflictFail, DryRun: body.DryRun}
	if body.OnConflict != nil {
		switch *body.OnConflict {
		case agentfs.OnConflictFail, agentfs.OnConflictFork, agentfs.OnConflictTarget:
			req.OnConflict = *body.OnConflict
		default:
			return req, problem.Validation("on_conflict", "must be fail, fork or target")
		}
	}
	return req, nil
}

// mergeFork is POST /v1/forks/{id}/merge: 200 with the merge (with
// dry_run, what it would do, nothing changed), or 409 MERGE_CONFLICT.
func (a *API) mergeFork(c echo.Context) error {
	var body mergeBody
	if _, err := readJSON(c, maxJSONBytes, &body, true); err != nil {
		return err
	}
	req, err := bindMerge(body, c.Param("id"))
	if err != nil {
		return err
	}
	if req.DryRun {
		m, err := a.deps.Writes.PlanMerge(c.Request().Context(), caller(c), req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, render.Merge(caller(c).Subject, m))
	}
	res, err := a.deps.Writes.Merge(c.Request().Context(), caller(c), req)
	return writeResult(c, res, err)
}

// listForks is GET /v1/forks: newest first.
func (a *API) listForks(c echo.Context) error {
	return createdList(c, "fork", nil, func(limit int, after *agentfs.Cursor) ([]*agentfs.Fork, error) {
		return a.deps.Points.ListForks(c.Request().Context(), caller(c), agentfs.ForkFilter{Limit: limit, After: after})
	}, render.Fork, func(f *agentfs.Fork) agentfs.Cursor { return agentfs.Cursor{CreatedAt: f.CreatedAt, ID: f.ID} },
		func(p createdPage[api.Fork]) api.ForkList { return api.ForkList(p) })
}

// getFork is GET /v1/forks/{id}.
func (a *API) getFork(c echo.Context) error {
	return getByID(c, a.deps.Points.Fork, render.Fork)
}

// deleteFork is DELETE /v1/forks/{id}: forgets the fork; its files stay.
func (a *API) deleteFork(c echo.Context) error {
	return writeByID(c, a.deps.Writes.DeleteFork)
}
