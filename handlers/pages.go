package handlers

import (
	"slices"
	"strings"

	"github.com/agentfs/agentfs/problem"
)

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

// optionalOneOf checks a listing's filter: v is empty (no filter) or one
// of allowed; otherwise the problem names them all.
func optionalOneOf(field, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	last := len(allowed) - 1
	return problem.Validation(field, "must be "+strings.Join(allowed[:last], ", ")+" or "+allowed[last])
}
