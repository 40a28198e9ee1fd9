package handlers

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/textdiff"
)

// writePatch answers changes as one git-style unified diff (text/x-diff)
// that git apply accepts for text files; the cursor of the next page, if
// any, is in a Link header.
func (a *API) writePatch(c echo.Context, changes []agentfs.Change, next string) error {
	open := func(ctx context.Context, key string, size int64) (io.ReadCloser, error) {
		return a.deps.Files.OpenBlob(ctx, key, 0, size)
	}
	patch, err := textdiff.GitPatch(c.Request().Context(), changes, open)
	if err != nil {
		return err
	}
	if next != "" {
		q := c.Request().URL.Query()
		q.Set("cursor", next)
		c.Response().Header().Set("Link", "<"+c.Request().URL.Path+"?"+q.Encode()+`>; rel="next"`)
	}
	return c.Blob(http.StatusOK, "text/x-diff; charset=utf-8", []byte(patch))
}
