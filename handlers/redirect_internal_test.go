package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs/problem"
)

// FuzzRedirectParam: whatever the query holds, redirect is read without a
// panic: absent is false, exactly one true or false is that, and anything
// else is a 422 naming the parameter.
func FuzzRedirectParam(f *testing.F) {
	for _, q := range []string{"", "redirect=true", "redirect=false", "redirect=", "redirect=TRUE", "redirect=1",
		"redirect=true&redirect=true", "redirect=true&redirect=false", "x=1&redirect=true", "redirect=%00", "redirect=tru%65", "%zz"} {
		f.Add(q)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, q string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.RawQuery = q
		c := e.NewContext(req, httptest.NewRecorder())
		got, err := redirectParam(c)
		vals, _ := url.ParseQuery(q)
		v, present := vals["redirect"]
		switch {
		case !present:
			if got || err != nil {
				t.Fatalf("%q: %v %v without a redirect parameter", q, got, err)
			}
		case len(v) == 1 && (v[0] == "true" || v[0] == "false"):
			if err != nil || got != (v[0] == "true") {
				t.Fatalf("%q: %v %v", q, got, err)
			}
		default:
			var p *problem.Problem
			if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || len(p.Errors) != 1 || p.Errors[0].Field != "redirect" || got {
				t.Fatalf("%q: %v %v, want a 422 naming redirect", q, got, err)
			}
		}
	})
}
