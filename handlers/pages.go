package handlers

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
)

// getByID answers a GET of the resource the route's {id} names: 200 with
// its wire form.
func getByID[T, W any](c echo.Context, get func(context.Context, agentfs.Caller, string) (T, error), render func(T) W) error {
	v, err := get(c.Request().Context(), caller(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render(v))
}

// page cuts rows, read with one more than limit, to a page of limit and
// renders each: more says that a next page exists, and last is the final
// row kept, which its cursor names.
func page[T, W any](rows []T, limit int, render func(T) W) (data []W, more bool, last T) {
	if len(rows) > limit {
		rows, more = rows[:limit], true
		last = rows[limit-1]
	}
	data = make([]W, 0, len(rows))
	for _, r := range rows {
		data = append(data, render(r))
	}
	return data, more, last
}

// cursorPage is page for a listing in created_at order: next is the
// cursor of the page after (nil on the last page), made of the key of the
// last row kept.
func cursorPage[T, W any](rows []T, limit int, render func(T) W, key func(T) (time.Time, string)) (data []W, more bool, next *string) {
	data, more, last := page(rows, limit, render)
	if more {
		next = nextCursor(key(last))
	}
	return data, more, next
}

// createdPage is a page of a listing in created_at order, as each such
// listing's wire type (api.ForkList, ...) holds it.
type createdPage[W any] struct {
	Data       []W
	HasMore    bool
	NextCursor *string
}

// createdList answers a listing in created_at order: it reads the limit,
// then any filters (readFilters, if set), then the cursor of resources
// with this id prefix, in that order of complaint; lists limit+1 rows
// after the cursor; and answers the page (cursorPage) in its wire type.
func createdList[T, W, L any](c echo.Context, prefix string, readFilters func() error,
	list func(limit int, after *agentfs.Cursor) ([]T, error), render func(T) W, key func(T) agentfs.Cursor, wire func(createdPage[W]) L) error {
	limit, err := limitParam(c, defaultListLimit, maxListLimit)
	if err != nil {
		return err
	}
	if readFilters != nil {
		if err := readFilters(); err != nil {
			return err
		}
	}
	after, err := parseCursor(c.QueryParam("cursor"), prefix)
	if err != nil {
		return err
	}
	rows, err := list(limit+1, after)
	if err != nil {
		return err
	}
	var p createdPage[W]
	p.Data, p.HasMore, p.NextCursor = cursorPage(rows, limit, render, func(r T) (time.Time, string) {
		k := key(r)
		return k.CreatedAt, k.ID
	})
	return c.JSON(http.StatusOK, wire(p))
}

// statusList is what a listing filtered by status reads from its query.
type statusList struct {
	limit  int
	status string
	after  *agentfs.Cursor
}

// readStatusList reads limit, status (empty or one of allowed) and a
// cursor of the listing's kind, in that order of complaint.
func readStatusList(q url.Values, kind string, allowed ...string) (statusList, error) {
	var l statusList
	var err error
	if l.limit, err = parseLimit(q.Get("limit")); err != nil {
		return l, err
	}
	l.status = q.Get("status")
	if err := optionalOneOf("status", l.status, allowed...); err != nil {
		return l, err
	}
	l.after, err = parseCursor(q.Get("cursor"), kind)
	return l, err
}

// optionalOneOf checks a listing's filter: v is empty (no filter) or one
// of allowed; otherwise the problem names them all.
func optionalOneOf(field, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	last := len(allowed) - 1
	return problem.Validation(field, "must be "+strings.Join(allowed[:last], ", ")+" or "+allowed[last])
}
