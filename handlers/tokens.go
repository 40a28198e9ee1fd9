package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// Bounds of a delegated token's life (expires_in, seconds).
const (
	minTokenExpiresIn = time.Minute
	maxTokenExpiresIn = 366 * 24 * time.Hour
)

// createTokenBody is the body of POST /v1/tokens.
type createTokenBody struct {
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Prefixes  []string `json:"prefixes"`
	RunID     string   `json:"run_id"`
	AgentID   string   `json:"agent_id"`
	ExpiresIn *int64   `json:"expires_in"`
	MaxBytes  *int64   `json:"max_bytes"`
}

// createToken is POST /v1/tokens: 201 with a child of the caller's token,
// its secret shown in this answer only (and a replay of it to the same
// token).
func (a *API) createToken(c echo.Context) error {
	return writeBody(c, false, newTokenOf, a.deps.Writes.CreateToken)
}

// newTokenOf checks the shape of a POST /v1/tokens body; the grant's own
// rules (known scopes, folders, pins) are agentfs.NormalizeGrant's, where
// the core holds it to the parent's.
func newTokenOf(_ echo.Context, body createTokenBody) (agentfs.NewToken, error) {
	switch {
	case len(body.Name) > agentfs.MaxTokenName:
		return agentfs.NewToken{}, problem.Validation("name", "at most 128 bytes")
	case len(body.Scopes) == 0:
		return agentfs.NewToken{}, problem.Validation("scopes", "name at least one of read, write, share, delegate")
	case body.ExpiresIn == nil:
		return agentfs.NewToken{}, problem.Validation("expires_in", "is required: how many seconds the token lives")
	case body.MaxBytes != nil && *body.MaxBytes <= 0:
		return agentfs.NewToken{}, problem.Validation("max_bytes", "must be a positive number of bytes")
	case body.Prefixes != nil && len(body.Prefixes) == 0:
		return agentfs.NewToken{}, problem.Validation("prefixes", "leave prefixes out for the parent's, or name at least one folder")
	}
	ttl, err := expiresIn("expires_in", *body.ExpiresIn, minTokenExpiresIn, maxTokenExpiresIn)
	if err != nil {
		return agentfs.NewToken{}, err
	}
	g := agentfs.Grant{Scopes: body.Scopes, Prefixes: body.Prefixes, RunID: body.RunID, AgentID: body.AgentID}
	if body.MaxBytes != nil {
		g.MaxBytes = *body.MaxBytes
	}
	if _, err := agentfs.NormalizeGrant(g); err != nil {
		return agentfs.NewToken{}, err
	}
	return agentfs.NewToken{Name: body.Name, Grant: g, ExpiresIn: ttl}, nil
}

// listTokens is GET /v1/tokens: the caller's token and its descendants,
// without secrets.
func (a *API) listTokens(c echo.Context) error {
	list, err := a.deps.Delegation.Tokens(c.Request().Context(), caller(c))
	if err != nil {
		return err
	}
	out := api.TokenList{Data: make([]api.Token, 0, len(list))}
	for _, t := range list {
		out.Data = append(out.Data, render.Token(t))
	}
	return c.JSON(http.StatusOK, out)
}

// getToken is GET /v1/tokens/{id}: the caller's token or a descendant.
func (a *API) getToken(c echo.Context) error {
	return getByID(c, a.deps.Delegation.Token, render.Token)
}

// revokeToken is DELETE /v1/tokens/{id}: revokes it and every descendant;
// safe to repeat.
func (a *API) revokeToken(c echo.Context) error {
	return writeByID(c, a.deps.Writes.RevokeToken)
}
