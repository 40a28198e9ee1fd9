package client

import (
	"context"
	"iter"
	"net/url"
	"strconv"

	"github.com/agentfs/agentfs/api"
)

// SearchResults is one page of a content search (GET /v1/search).
type SearchResults = api.SearchResults

// SearchMatch is one matching line of a file, with its context.
type SearchMatch = api.SearchMatch

// SearchOptions narrow and shape a content search; the zero value
// searches every live text file for the pattern as an RE2 regular
// expression.
type SearchOptions struct {
	// Literal makes the pattern a fixed string; IgnoreCase matches it
	// case-insensitively.
	Literal, IgnoreCase bool
	// Prefix, Glob and RunID narrow the files searched (the glob of the
	// MCP tool search_files, ** allowed).
	Prefix, Glob, RunID string
	// Context is the lines shown before and after each match (0-10).
	Context int
	// Limit is the most matches per page (1-1000; 0: the server's 100).
	Limit int
	// Cursor continues from a page's NextCursor.
	Cursor string
}

// Search answers one page of the lines of the caller's live text files
// that match pattern, ordered by path then line (DESIGN §17): exactly
// what rg -n answers over the same files for a pattern both dialects
// share. A search that cannot finish within the server's search timeout
// is a *Problem with code SEARCH_TOO_BROAD; narrow it and search again.
func (c *Client) Search(ctx context.Context, pattern string, opts SearchOptions) (*SearchResults, error) {
	q := url.Values{"q": {pattern}}
	for name, v := range map[string]string{"prefix": opts.Prefix, "glob": opts.Glob, "run_id": opts.RunID, "cursor": opts.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	for name, v := range map[string]bool{"literal": opts.Literal, "ignore_case": opts.IgnoreCase} {
		if v {
			q.Set(name, "true")
		}
	}
	if opts.Context != 0 {
		q.Set("context", strconv.Itoa(opts.Context))
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	r := newRequest(routeSearch, "/v1/search")
	r.query = q
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var page SearchResults
	if err := decodeJSON(res, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// SearchPages iterates over the pages of a search, from opts.Cursor on. It
// stops at the first error, which it yields with a nil page. The last
// page's counts (FilesMatched, FilesSearched) are the whole search's.
//
//	for page, err := range c.SearchPages(ctx, "TODO", client.SearchOptions{Prefix: "src/"}) {
//		if err != nil { return err }
//		for _, m := range page.Data { fmt.Printf("%s:%d:%s\n", m.Path, m.Line, m.Text) }
//	}
func (c *Client) SearchPages(ctx context.Context, pattern string, opts SearchOptions) iter.Seq2[*SearchResults, error] {
	return func(yield func(*SearchResults, error) bool) {
		for {
			page, err := c.Search(ctx, pattern, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) || !page.HasMore || page.NextCursor == nil {
				return
			}
			opts.Cursor = *page.NextCursor
		}
	}
}
