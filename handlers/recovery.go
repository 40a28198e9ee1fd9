package handlers

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// defaultRecoveryLimit is the keys of a recovery page when limit is not
// given.
const defaultRecoveryLimit = 100

// getRunRecovery is GET /v1/runs/{run_id}/recovery: what a run left
// behind, true at one point, with the next safe request for each thing it
// left open (DESIGN §25).
func (a *API) getRunRecovery(c echo.Context) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	filter := agentfs.RecoveryFilter{Limit: defaultRecoveryLimit}
	if v := q.Get("limit"); v != "" {
		if filter.Limit, err = parseLimit(v); err != nil {
			return err
		}
	}
	if filter.After, err = parseKeyCursor(q.Get("cursor")); err != nil {
		return err
	}
	r, err := a.deps.Ledger.RunRecovery(c.Request().Context(), caller(c), id, filter)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Recovery(r))
}

// parseKeyCursor reads the cursor of a recovery page (Cursor.String of
// the last key of the page before); "" is the first page.
func parseKeyCursor(v string) (*agentfs.Cursor, error) {
	if v == "" {
		return nil, nil
	}
	bad := problem.Invalid("cursor", agentfs.ErrInvalidCursor.Error())
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) > 200 {
		return nil, bad
	}
	micros, key, _ := strings.Cut(string(raw), "|")
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil || us < 0 {
		return nil, bad
	}
	if _, err := idempotency.ParseKey(key); err != nil {
		return nil, bad
	}
	return &agentfs.Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: key}, nil
}
