package handlers

import (
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// childParams are the only query parameters a listing by delimiter takes.
var childParams = map[string]bool{"delimiter": true, "prefix": true, "limit": true, "cursor": true, "fields": true}

// listChildren is GET /v1/files?delimiter=/: the files directly under
// prefix and the folders under it (prefixes), in byte order, keyset-paged.
func (a *API) listChildren(c echo.Context) error {
	q := c.QueryParams()
	if q.Get("delimiter") != "/" {
		return problem.Validation("delimiter", "must be /")
	}
	for k := range q {
		if !childParams[k] {
			return problem.Validation(k, "is not taken with delimiter; a listing by delimiter takes prefix, limit and cursor")
		}
	}
	f := agentfs.ChildFilter{}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return err
	}
	if f.Prefix, err = normalizePrefix(q.Get("prefix")); err != nil {
		return err
	}
	if v := q.Get("cursor"); v != "" {
		if f.After, err = agentfs.ParseChildCursor(v); err != nil {
			return problem.Invalid("cursor", err.Error())
		}
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	fields, err := parseFields(q)
	if err != nil {
		return err
	}
	entries, err := a.deps.Files.ListChildren(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	out := api.FileList{Data: []api.File{}, Prefixes: []string{}}
	if len(entries) > limit {
		entries, out.HasMore = entries[:limit], true
		next := agentfs.ChildCursor(entries[limit-1].Name())
		out.NextCursor = &next
	}
	for _, e := range entries {
		if e.File != nil {
			out.Data = append(out.Data, render.File(a.deps.PublicURL, e.File))
		} else {
			out.Prefixes = append(out.Prefixes, e.Prefix)
		}
	}
	return writeFileList(c, out, fields)
}

// bindMeta reads an upload's mode (octal), mtime (RFC 3339) and kind
// (file, symlink, directory) from its query; a directory marker has no
// content.
func bindMeta(q url.Values, size int64) (agentfs.FileMeta, error) {
	var m agentfs.FileMeta
	if v := q.Get("mode"); v != "" {
		n, err := agentfs.ParseMode(v)
		if err != nil {
			return m, problem.Validation("mode", err.Error())
		}
		m.Mode = &n
	}
	if v := q.Get("mtime"); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return m, problem.Validation("mtime", "must be an RFC 3339 time")
		}
		m.MTime = &at
	}
	if m.Kind = q.Get("kind"); m.Kind != "" && !agentfs.ValidKind(m.Kind) {
		return m, problem.Validation("kind", agentfs.ErrBadKind.Error())
	}
	if m.Kind == agentfs.KindDirectory && size > 0 {
		return m, problem.Validation("kind", "a directory marker has no content; send an empty body")
	}
	return m, nil
}
