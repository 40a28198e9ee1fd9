package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// createLinkBody is the body of POST /v1/files/{id}/links.
type createLinkBody struct {
	ExpiresIn *int64 `json:"expires_in"`
	Version   *int64 `json:"version"`
}

// createLink is POST /v1/files/{id}/links: 201 with the link; its url (the
// secret) is shown in this answer only.
func (a *API) createLink(c echo.Context) error {
	return writeBody(c, true, bindLink, a.deps.Writes.CreateLink)
}

// bindLink checks a link's body: both fields may be left out.
func bindLink(c echo.Context, body createLinkBody) (agentfs.NewLink, error) {
	req := agentfs.NewLink{FileID: c.Param("id"), ExpiresIn: agentfs.DefaultLinkExpiresIn}
	var err error
	if body.ExpiresIn != nil {
		if req.ExpiresIn, err = expiresIn("expires_in", *body.ExpiresIn, agentfs.MinLinkExpiresIn, agentfs.MaxLinkExpiresIn); err != nil {
			return req, err
		}
	}
	if body.Version != nil {
		if req.Version, err = parseVersion("version", strconv.FormatInt(*body.Version, 10)); err != nil {
			return req, err
		}
	}
	return req, nil
}

// listLinks is GET /v1/files/{id}/links: the file's links, without secrets.
func (a *API) listLinks(c echo.Context) error {
	links, err := a.deps.Files.Links(c.Request().Context(), caller(c), c.Param("id"))
	if err != nil {
		return err
	}
	out := api.LinkList{Data: make([]api.Link, 0, len(links))}
	for _, l := range links {
		out.Data = append(out.Data, render.Link(a.deps.PublicURL, l))
	}
	return c.JSON(http.StatusOK, out)
}

// revokeLink is DELETE /v1/links/{id}: revoke, safe to repeat.
func (a *API) revokeLink(c echo.Context) error {
	return writeByID(c, a.deps.Writes.RevokeLink)
}

// getShared is GET and HEAD /s/{secret}: what a share link shares, without
// a token. Every way a link can fail to serve (unknown, malformed, expired,
// revoked, its file deleted, its version swept) is the same 404. A guessed
// secret is looked up by its hash like any other, so it learns nothing; a
// link's own holder could tell from the time taken whether its file or
// version is gone (one or two more queries). A blocked file is 451. The secret
// is never logged (the route is logged as its template) nor shown in a
// problem (whose instance is the template too).
func (a *API) getShared(c echo.Context) error {
	problem.SetInstance(c, "/s/{secret}")
	counted := false
	defer func() {
		if !counted { // it panicked (a stream cut short returns a cutResponse)
			a.metrics.linkDownload(errDownloadCut)
		}
	}()
	err := a.serveShared(c)
	counted = true
	a.metrics.linkDownload(err)
	if errors.Is(err, agentfs.ErrLinkGone) {
		return problem.New(problem.NotFound, "this link is unknown, expired or revoked, or what it shared is gone")
	}
	return err
}

// errDownloadCut counts a share link download whose stream broke off.
var errDownloadCut = errors.New("share link download cut short")

func (a *API) serveShared(c echo.Context) error {
	shared, err := a.deps.Files.ResolveLink(c.Request().Context(), c.Param("secret"))
	if err != nil {
		return err
	}
	return a.serveContent(c, versionContent(shared.File, shared.Version))
}
