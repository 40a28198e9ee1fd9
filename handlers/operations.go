package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// getOperation is GET /v1/operations/{key}: what the key holds. A key that
// holds nothing is 404, which proves that no effect happened under it.
func (a *API) getOperation(c echo.Context) error {
	key, err := idempotency.ParseKey(c.Param("idempotency_key"))
	if err != nil {
		return problem.New(problem.InvalidIdempotencyKey, err.Error())
	}
	rec, err := a.deps.Sessions.Operation(c.Request().Context(), caller(c), key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Operation(rec))
}

// writeResult answers with how a write ended: its outcome (replayed or
// not), or its error for problem to answer. A recorded problem is sent
// again as a problem of this request.
func writeResult(c echo.Context, res idempotency.Result, err error) error {
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set(idempotency.ReplayHeader, "true")
	}
	if len(res.Redacted) > 0 {
		c.Response().Header().Set(idempotency.RedactedHeader, strings.Join(res.Redacted, ", "))
	}
	out := res.Outcome
	if out.Status >= 400 {
		var p problem.Problem
		if err := json.Unmarshal(out.Body, &p); err != nil {
			return err
		}
		p.Instance = ""
		return &p
	}
	for k, v := range out.Header {
		c.Response().Header().Set(k, v)
	}
	return c.Blob(out.Status, echo.MIMEApplicationJSON, out.Body)
}

// writeByID runs a write on the resource the route's {id} names (a delete,
// a revoke, a cancel) and answers how it ended.
func writeByID(c echo.Context, write func(context.Context, agentfs.Caller, string) (idempotency.Result, error)) error {
	res, err := write(c.Request().Context(), caller(c), c.Param("id"))
	return writeResult(c, res, err)
}

// writeBody runs a write whose request is a JSON body: bind checks the
// decoded body (B's zero value when optional and absent) and builds the
// request, then write runs it and the answer says how it ended.
func writeBody[B, R any](c echo.Context, optional bool, bind func(echo.Context, B) (R, error),
	write func(context.Context, agentfs.Caller, R) (idempotency.Result, error)) error {
	var body B
	if _, err := readJSON(c, maxJSONBytes, &body, optional); err != nil {
		return err
	}
	req, err := bind(c, body)
	if err != nil {
		return err
	}
	res, err := write(c.Request().Context(), caller(c), req)
	return writeResult(c, res, err)
}
