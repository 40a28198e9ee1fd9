package handlers

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

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

func TestReadStatusList(t *testing.T) {
	t.Parallel()
	good := *nextCursor(time.Unix(1700000000, 0).UTC(), "upl_"+strings.Repeat("a", 26))
	for _, tc := range []struct {
		name, query string
		limit       int
		status      string
		cursor      bool
		wantErr     string
	}{
		{"Defaults", "", defaultListLimit, "", false, ""},
		{"All", "limit=5&status=a&cursor=" + url.QueryEscape(good), 5, "a", true, ""},
		{"BadLimit", "limit=x&status=zzz", 0, "", false, "limit"},
		{"LimitOutOfRange", "limit=0", 0, "", false, "limit"},
		{"UnknownStatus", "status=zzz&cursor=bad", 0, "", false, "status"},
		{"BadCursor", "cursor=bad", 0, "", false, "cursor"},
		{"CursorOfAnotherKind", "cursor=" + url.QueryEscape(*nextCursor(time.Unix(1, 0), "batch_"+strings.Repeat("a", 26))), 0, "", false, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readStatusList(q, "upl", "a", "b")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a problem about %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.limit != tc.limit || got.status != tc.status || (got.after != nil) != tc.cursor {
				t.Fatalf("= %+v, %v; want limit %d status %q cursor %v", got, err, tc.limit, tc.status, tc.cursor)
			}
		})
	}
}
