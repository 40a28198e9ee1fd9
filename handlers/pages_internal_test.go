package handlers

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/agentfs/agentfs/problem"
)

func TestPage(t *testing.T) {
	t.Parallel()
	render := func(n int) string { return strconv.Itoa(n) }
	for _, tc := range []struct {
		rows  []int
		limit int
		data  string
		more  bool
		last  int
	}{
		{nil, 2, "[]", false, 0},
		{[]int{1}, 2, "[1]", false, 0},
		{[]int{1, 2}, 2, "[1 2]", false, 0},
		{[]int{1, 2, 3}, 2, "[1 2]", true, 2}, // the row read past the limit says a next page exists
	} {
		data, more, last := page(tc.rows, tc.limit, render)
		if fmt.Sprint(data) != tc.data || more != tc.more || last != tc.last || data == nil {
			t.Errorf("page(%v, %d) = %v %v %v, want %s %v %v", tc.rows, tc.limit, data, more, last, tc.data, tc.more, tc.last)
		}
	}
}

func TestOptionalOneOf(t *testing.T) {
	t.Parallel()
	allowed := []string{"queued", "running", "failed"}
	for _, v := range []string{"", "queued", "running", "failed"} {
		if err := optionalOneOf("status", v, allowed...); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"Queued", "queued ", "canceled", "queued,running", "\x00"} {
		err := optionalOneOf("status", v, allowed...)
		p, _ := problem.From(err)
		if p.Code != problem.ValidationFailed || p.Detail != "status: must be queued, running or failed" {
			t.Errorf("%q: %+v (%v)", v, p, err)
		}
	}
}
