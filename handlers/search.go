package handlers

import (
	"context"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// Searcher answers content searches through the read gate (reads.Gate):
// a page after cursor ("" for the first), and the cursor of the next one.
type Searcher interface {
	Search(ctx context.Context, who agentfs.Caller, q agentfs.Search, cursor string) (*agentfs.SearchPage, string, error)
}

// Search page sizes (matches per page).
const defaultSearchLimit = 100

// search is GET /v1/search: the lines of the caller's live text files that
// match a pattern, in path order then line (DESIGN §17).
func (a *API) search(c echo.Context) error {
	q, cursor, err := bindSearch(c.QueryParams())
	if err != nil {
		return err
	}
	page, next, err := a.deps.Search.Search(c.Request().Context(), caller(c), q, cursor)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.SearchResults(page, next))
}

// bindSearch reads a search from its query parameters; the pattern and the
// ranges are checked by the store (agentfs.Search.Regexp), in the same
// words for every door.
func bindSearch(v url.Values) (agentfs.Search, string, error) {
	q := agentfs.Search{Pattern: v.Get("q"), Glob: v.Get("glob"), RunID: v.Get("run_id"), Limit: defaultSearchLimit}
	if !v.Has("q") {
		return q, "", problem.Validation("q", "is required: the pattern to search for")
	}
	for _, err := range []error{
		queryBool(v, "literal", &q.Literal), queryBool(v, "ignore_case", &q.IgnoreCase),
		queryInt(v, "context", &q.Context), queryInt(v, "limit", &q.Limit),
	} {
		if err != nil {
			return q, "", err
		}
	}
	if q.RunID != "" && !agentfs.ValidTagValue(q.RunID) {
		return q, "", problem.Validation("run_id", "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -")
	}
	var err error
	if q.Prefix, err = normalizePrefix(v.Get("prefix")); err != nil {
		return q, "", err
	}
	return q, v.Get("cursor"), nil
}
