package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs/console"
	"github.com/agentfs/agentfs/problem"
)

// consoleFiles serves the console's embedded files below /console.
var consoleFiles = http.StripPrefix("/console", console.Handler())

// serveConsole is GET /console/*: the console's page and assets; any
// other name is a 404 problem, like every unknown route.
func (a *API) serveConsole(c echo.Context) error {
	name := strings.TrimPrefix(c.Request().URL.Path, "/console/")
	if !console.Has(name) {
		return problem.New(problem.NotFound, "the console has no file "+name)
	}
	consoleFiles.ServeHTTP(c.Response(), c.Request())
	return nil
}
