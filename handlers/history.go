package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// listVersions is GET /v1/files/{id}/versions: newest first, in pages.
func (a *API) listVersions(c echo.Context) error {
	limit, err := parseLimit(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	filter := agentfs.VersionFilter{Limit: limit + 1}
	if v := c.QueryParam("cursor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return problem.Invalid("cursor", "is not a cursor this server issued")
		}
		filter.Before = n
	}
	versions, err := a.deps.Files.Versions(c.Request().Context(), caller(c), c.Param("id"), filter)
	if err != nil {
		return err
	}
	out := api.VersionList{}
	var last *agentfs.FileVersion
	out.Data, out.HasMore, last = page(versions, limit, func(v *agentfs.FileVersion) api.FileVersion {
		return render.FileVersion(a.deps.PublicURL, v)
	})
	if out.HasMore {
		next := strconv.Itoa(last.Version)
		out.NextCursor = &next
	}
	return c.JSON(http.StatusOK, out)
}

// parseVersion reads a version number: not a number is 400, a number that
// no version can have (also one too large for 64 bits) is 422.
func parseVersion(field, v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, problem.Invalid(field, "must be an integer")
	}
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, problem.Validation(field, "must be a version number, 1 or more")
	}
	return int(n), nil
}

// getVersion is GET /v1/files/{id}/versions/{n}.
func (a *API) getVersion(c echo.Context) error {
	n, err := parseVersion("version", c.Param("n"))
	if err != nil {
		return err
	}
	_, v, err := a.deps.Files.Version(c.Request().Context(), caller(c), c.Param("id"), n)
	if err != nil {
		return err
	}
	c.Response().Header().Set("ETag", v.ETag())
	return c.JSON(http.StatusOK, render.FileVersion(a.deps.PublicURL, v))
}

// getVersionContent is GET and HEAD /v1/files/{id}/versions/{n}/content:
// like /content, for any version kept (also of a deleted file).
func (a *API) getVersionContent(c echo.Context) error {
	n, err := parseVersion("version", c.Param("n"))
	if err != nil {
		return err
	}
	f, v, err := a.deps.Files.VersionContent(c.Request().Context(), caller(c), c.Param("id"), n)
	if err != nil {
		return err
	}
	return a.serveFileContent(c, versionContent(f, v))
}

// revertBody is the body of POST /v1/files/{id}/revert.
type revertBody struct {
	Version *int64 `json:"version"`
}

// revertFile is POST /v1/files/{id}/revert.
func (a *API) revertFile(c echo.Context) error {
	return writeBody(c, false, bindRevert, a.deps.Writes.Revert)
}

// bindRevert checks a revert's body: the version is required.
func bindRevert(c echo.Context, body revertBody) (agentfs.Revert, error) {
	if body.Version == nil {
		return agentfs.Revert{}, problem.Validation("version", "is required")
	}
	n, err := parseVersion("version", strconv.FormatInt(*body.Version, 10))
	return agentfs.Revert{FileID: c.Param("id"), Version: n, IfMatch: ifMatch(c)}, err
}

// moveBody is the body of POST /v1/files/{id}/move.
type moveBody struct {
	Path     *string `json:"path"`
	IfExists *string `json:"if_exists"`
}

// moveFile is POST /v1/files/{id}/move.
func (a *API) moveFile(c echo.Context) error {
	return writeBody(c, false, bindMove, a.deps.Writes.Move)
}

// bindMove checks a move's body: the path is required.
func bindMove(c echo.Context, body moveBody) (agentfs.Move, error) {
	if body.Path == nil {
		return agentfs.Move{}, problem.Validation("path", "is required")
	}
	p, err := cleanPath(*body.Path)
	if err != nil {
		return agentfs.Move{}, err
	}
	m := agentfs.Move{FileID: c.Param("id"), Path: p, IfMatch: ifMatch(c)}
	if body.IfExists != nil && *body.IfExists == "overwrite" {
		m.Overwrite = true
	} else if body.IfExists != nil {
		if m.Replace, err = parseIfExists(*body.IfExists); err != nil {
			return m, problem.Validation("if_exists", "must be error, replace or overwrite")
		}
	}
	return m, nil
}

// patchFile is PATCH /v1/files/{id}: any of {"expires_at": RFC 3339 |
// null, "mode": permission bits, "mtime": RFC 3339}, without a new version.
func (a *API) patchFile(c echo.Context) error {
	var body map[string]json.RawMessage
	if _, err := readJSON(c, maxJSONBytes, &body, false); err != nil {
		return err
	}
	e := agentfs.Expiry{FileID: c.Param("id"), IfMatch: ifMatch(c), KeepExpiry: true}
	if len(body) == 0 {
		return problem.Validation("expires_at", "PATCH needs at least one of expires_at, mode, mtime")
	}
	for k, raw := range body {
		var err error
		switch k {
		case "expires_at":
			e.KeepExpiry = false
			e.At, err = patchExpiry(raw)
		case "mode":
			e.Mode, err = patchMode(raw)
		case "mtime":
			e.MTime, err = patchTime(k, raw)
		default:
			err = problem.Validation(k, "cannot be changed; PATCH takes expires_at, mode and mtime")
		}
		if err != nil {
			return err
		}
	}
	res, err := a.deps.Writes.SetExpiry(c.Request().Context(), caller(c), e)
	return writeResult(c, res, err)
}

// patchExpiry reads a PATCH's expires_at: an RFC 3339 time from 60 seconds
// to 365 days ahead, or null (never).
func patchExpiry(raw json.RawMessage) (*time.Time, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	at, err := patchTime("expires_at", raw)
	if err != nil {
		return nil, problem.Validation("expires_at", "must be an RFC 3339 time or null")
	}
	if d := time.Until(*at); d < agentfs.MinExpiresIn-time.Second || d > agentfs.MaxExpiresIn+time.Minute {
		return nil, problem.Validation("expires_at", "must be between 60 seconds and 365 days from now; delete the file to remove it now")
	}
	return at, nil
}

// patchTime reads an RFC 3339 time member of a PATCH body.
func patchTime(field string, raw json.RawMessage) (*time.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, problem.Validation(field, "must be an RFC 3339 time")
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, problem.Validation(field, "must be an RFC 3339 time")
	}
	return &at, nil
}

// patchMode reads a PATCH's mode: permission bits as a number, 0 to 4095
// (0o7777).
func patchMode(raw json.RawMessage) (*int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < 0 || n > agentfs.MaxMode {
		return nil, problem.Validation("mode", "must be a whole number from 0 to 4095 (0o7777)")
	}
	return &n, nil
}

// parseExpiresIn reads an expires_in of seconds (60 s … 365 days): not a
// number is 400, out of range (also beyond 64 bits) 422; empty is none.
func parseExpiresIn(field, v string, lo, hi time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		n = math.MaxInt64 // out of range either way: expiresIn says so
	} else if err != nil {
		return 0, problem.Invalid(field, "must be a whole number of seconds")
	}
	return expiresIn(field, n, lo, hi)
}

func expiresIn(field string, n int64, lo, hi time.Duration) (time.Duration, error) {
	if n < int64(lo/time.Second) || n > int64(hi/time.Second) {
		return 0, problem.Validation(field, fmt.Sprintf("must be between %d and %d seconds", int64(lo/time.Second), int64(hi/time.Second)))
	}
	return time.Duration(n) * time.Second, nil
}

func ifMatch(c echo.Context) string { return strings.TrimSpace(c.Request().Header.Get("If-Match")) }

// cleanPath checks a path given in a body or a query and puts it in the
// form paths are stored in (NFC).
func cleanPath(p string) (string, error) {
	p, err := agentfs.NormalizePath(p)
	if err != nil {
		return "", pathProblem(err)
	}
	return p, nil
}

// parseLimit reads a page size: 1-1000, default 100.
func parseLimit(v string) (int, error) {
	return limitOf(v, defaultListLimit, maxListLimit)
}
