package client

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/agentfs/agentfs/api"
)

// Token is a bearer token and its grant (schema Token): what it may do,
// in which folders, for which run and agent, until when, and how many
// bytes it may write.
type Token = api.Token

// TokenOptions ask for a child of the client's token (CreateToken). What
// is left out is the parent's: its prefixes, pins and max_bytes; the
// child can never exceed its parent (the server answers 403 FORBIDDEN
// saying which part would).
type TokenOptions struct {
	Name string
	// Scopes are of read, write, share, delegate (required).
	Scopes []string
	// Prefixes are folders (reports/ covers reports/a.txt, never
	// reports-old/x), each inside one of the parent's.
	Prefixes []string
	RunID    string
	AgentID  string
	// ExpiresIn is how long the child lives (required, 1 minute to 366
	// days, no later than the parent).
	ExpiresIn time.Duration
	// MaxBytes is how many bytes it may write in all (0: the parent's).
	MaxBytes int64
	// IdempotencyKey names this creation; generated when empty. A retry
	// with it by the same token gets the same token and secret back.
	IdempotencyKey string
}

// CreateToken makes a child of the client's token for a sub-agent (POST
// /v1/tokens; needs the delegate scope) and returns it with its secret in
// Token.Token, which only this answer shows.
func (c *Client) CreateToken(ctx context.Context, opts TokenOptions) (*Token, error) {
	if len(opts.Scopes) == 0 {
		return nil, errors.New("CreateToken: Scopes are required")
	}
	secs, err := expiresInSeconds("CreateToken", opts.ExpiresIn)
	if err != nil {
		return nil, err
	}
	if secs == 0 {
		return nil, errors.New("CreateToken: ExpiresIn is required")
	}
	body := map[string]any{"scopes": opts.Scopes, "expires_in": secs}
	for k, v := range map[string]string{"name": opts.Name, "run_id": opts.RunID, "agent_id": opts.AgentID} {
		if v != "" {
			body[k] = v
		}
	}
	if len(opts.Prefixes) > 0 {
		body["prefixes"] = opts.Prefixes
	}
	if opts.MaxBytes > 0 {
		body["max_bytes"] = opts.MaxBytes
	}
	r, err := newRequest(routeCreateToken, "/v1/tokens").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	var t Token
	if err := c.jsonCall(ctx, r, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tokens lists the client's token and every token descended from it,
// oldest first, revoked ones included, without secrets (GET /v1/tokens).
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var l api.TokenList
	if err := c.jsonCall(ctx, newRequest(routeTokens, "/v1/tokens"), &l); err != nil {
		return nil, err
	}
	return l.Data, nil
}

// Token returns the client's token or one of its descendants (GET
// /v1/tokens/{id}).
func (c *Client) Token(ctx context.Context, id string) (*Token, error) {
	var t Token
	if err := c.jsonCall(ctx, newRequest(routeToken, "/v1/tokens/"+url.PathEscape(id)), &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// RevokeToken revokes a token (the client's own or a descendant) and every
// token descended from it (DELETE /v1/tokens/{id}); every server refuses
// them within a second. Safe to repeat.
func (c *Client) RevokeToken(ctx context.Context, id string) (*Token, error) {
	r := newRequest(routeRevokeToken, "/v1/tokens/"+url.PathEscape(id)).withKey(c.keyFor(""))
	var t Token
	if err := c.jsonCall(ctx, r, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
