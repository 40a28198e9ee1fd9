package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/problem"
)

// OAuth verifies the JWT access tokens of the authorization server
// AGENTFS_OAUTH_ISSUER names (package oauth), beside AgentFS's own tokens.
type OAuth interface {
	// Issuer is the issuer identifier the protected resource metadata
	// names.
	Issuer() string
	// Authenticate returns the principal of a JWT meant for one of
	// audiences: an *oauth.InvalidTokenError when it is refused,
	// oauth.ErrUnavailable when the issuer's keys cannot be fetched.
	Authenticate(ctx context.Context, token string, audiences []string) (agentfs.Principal, error)
	// Trusted answers from the keys already fetched only, like
	// Tokens.Trusted.
	Trusted(token string, audiences []string) (agentfs.Principal, bool)
}

// The well-known URIs of the protected resource metadata (RFC 9728 §3):
// the server's, and /mcp's with its path appended.
const (
	resourceMetadataPath    = "/.well-known/oauth-protected-resource"
	mcpResourceMetadataPath = resourceMetadataPath + "/mcp"
	mcpPath                 = "/mcp"
)

// oauthScopes are the scopes a token of this server may carry, as the
// metadata lists them.
var oauthScopes = []string{agentfs.ScopeRead, agentfs.ScopeWrite}

// lookupToken is the principal a bearer token stands for: a JWT asks the
// OAuth verifier when an issuer is configured, anything else AgentFS's
// token store.
func (a *API) lookupToken(c echo.Context, token string) (agentfs.Principal, error) {
	if a.deps.OAuth != nil && oauth.LooksLikeJWT(token) {
		return a.deps.OAuth.Authenticate(c.Request().Context(), token, a.audiences(c))
	}
	return a.deps.Tokens.Authenticate(c.Request().Context(), token)
}

// trustedToken is lookupToken from what this instance already holds.
func (a *API) trustedToken(c echo.Context, token string) (agentfs.Principal, bool) {
	if a.deps.OAuth != nil && oauth.LooksLikeJWT(token) {
		return a.deps.OAuth.Trusted(token, a.audiences(c))
	}
	return a.deps.Tokens.Trusted(token)
}

// refusedToken turns the answer of lookupToken into the 401 of a token
// that is refused (ok), or nil when err says something else: a 503 when
// the issuer's keys cannot be fetched.
func refusedToken(err error) (p *problem.Problem, ok bool) {
	var bad *oauth.InvalidTokenError
	switch {
	case errors.Is(err, agentfs.ErrNotFound):
		return problem.New(problem.Unauthenticated, "the token is unknown or revoked"), true
	case errors.As(err, &bad):
		return problem.New(problem.Unauthenticated, "the access token is refused: "+bad.Reason), true
	case errors.Is(err, oauth.ErrUnavailable):
		return problem.New(problem.StorageUnavailable, "the authorization server's keys could not be fetched to verify the access token; retry later"), false
	}
	return nil, false
}

// audiences are the resources a token of this request may be meant for:
// the public URL, and at /mcp also /mcp's own URL (the resource its
// metadata names).
func (a *API) audiences(c echo.Context) []string {
	if c.Path() == mcpPath {
		return []string{a.deps.PublicURL, a.deps.PublicURL + mcpPath}
	}
	return []string{a.deps.PublicURL}
}

// protectedResource is GET /.well-known/oauth-protected-resource[/mcp]:
// the protected resource metadata (RFC 9728), public, from any origin.
func (a *API) protectedResource(c echo.Context) error {
	resource := a.deps.PublicURL
	if c.Path() == mcpResourceMetadataPath {
		resource += mcpPath
	}
	c.Response().Header().Set(echo.HeaderAccessControlAllowOrigin, "*")
	return c.JSON(http.StatusOK, api.ProtectedResource{
		Resource: resource, AuthorizationServers: a.authorizationServers(), ScopesSupported: oauthScopes,
		BearerMethodsSupported: []string{"header"}, ResourceName: "AgentFS",
	})
}

func (a *API) authorizationServers() []string {
	if a.deps.OAuth == nil {
		return []string{}
	}
	return []string{a.deps.OAuth.Issuer()}
}

// oauthProtocol is /v1/protocol's oauth member.
func (a *API) oauthProtocol() api.ProtocolOAuth {
	return api.ProtocolOAuth{ResourceMetadata: a.deps.PublicURL + resourceMetadataPath,
		AuthorizationServers: a.authorizationServers()}
}

// challenge adds the WWW-Authenticate header an OAuth client follows to
// p: on a 401 the protected resource metadata and the scopes the request
// needs (RFC 9728 §5.1; invalid_token when a token was sent, RFC 6750
// §3.1), on a 403 for a missing scope insufficient_scope with the scopes
// to ask for (step-up authorization).
func (a *API) challenge(c echo.Context, p *problem.Problem) {
	var params []string
	switch {
	case p.Status == http.StatusUnauthorized:
		if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
			params = append(params, `error="invalid_token"`)
		}
	case p.Status == http.StatusForbidden && p.MissingScope != "":
		params = append(params, `error="insufficient_scope"`)
	default:
		return
	}
	params = append(params, `scope="`+strings.Join(a.neededScopes(c, p.MissingScope), " ")+`"`,
		`resource_metadata="`+a.resourceMetadataURL(c)+`"`)
	p.WithHeader("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
}

// neededScopes are the scopes the request's route needs (with missing,
// the one a refusal named), or for /mcp every scope its tools may use.
func (a *API) neededScopes(c echo.Context, missing string) []string {
	var need []string
	if op, ok := a.ops[c.Request().Method+" "+c.Path()]; ok {
		need, _ = agentfs.ScopesFor(op)
	} else {
		need = slices.Clone(oauthScopes)
	}
	if missing != "" && !slices.Contains(need, missing) {
		need = append(need, missing)
	}
	return need
}

func (a *API) resourceMetadataURL(c echo.Context) string {
	if c.Path() == mcpPath {
		return a.deps.PublicURL + mcpResourceMetadataPath
	}
	return a.deps.PublicURL + resourceMetadataPath
}
