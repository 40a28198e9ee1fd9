package client

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/agentfs/agentfs/api"
)

// Link is a share link (schema Link): a URL that serves one file's
// content without a token until it expires or is revoked, for people and
// tools that have no AgentFS token.
type Link = api.Link

// Bounds of LinkOptions.ExpiresIn (lifecycle).
const (
	MinLinkExpiresIn     = time.Minute
	MaxLinkExpiresIn     = 7 * 24 * time.Hour
	DefaultLinkExpiresIn = time.Hour
)

// LinkOptions adjust CreateLink.
type LinkOptions struct {
	// ExpiresIn is how long the link works, MinLinkExpiresIn to
	// MaxLinkExpiresIn in whole seconds (a fraction is rounded up); zero
	// means the server's default, DefaultLinkExpiresIn.
	ExpiresIn time.Duration
	// Version pins the link to one version; zero serves the current
	// content, whatever it is when the link is opened.
	Version int64
	// IdempotencyKey names this link's creation; generated when empty. A
	// retry with it gets the same link and URL back, never a second link.
	IdempotencyKey string
}

// CreateLink makes a share link to a file (POST /v1/files/{id}/links)
// and returns it with its URL, which only this answer shows: keep it.
func (c *Client) CreateLink(ctx context.Context, fileID string, opts LinkOptions) (*Link, error) {
	secs, err := expiresInSeconds("CreateLink", opts.ExpiresIn)
	if err != nil {
		return nil, err
	}
	if opts.Version < 0 {
		return nil, fmt.Errorf("CreateLink: Version %d is negative", opts.Version)
	}
	body := map[string]any{}
	if secs > 0 {
		body["expires_in"] = secs
	}
	if opts.Version > 0 {
		body["version"] = opts.Version
	}
	r, err := newRequest(routeCreateLink, filePath(fileID)+"/links").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	return callJSON[Link](ctx, c, r)
}

// Links returns a file's links, newest first, revoked and expired ones
// included, without their URLs (GET /v1/files/{id}/links).
func (c *Client) Links(ctx context.Context, fileID string) ([]Link, error) {
	var l struct {
		Data []Link `json:"data"`
	}
	if err := c.jsonCall(ctx, newRequest(routeLinks, filePath(fileID)+"/links"), &l); err != nil {
		return nil, err
	}
	return l.Data, nil
}

// RevokeLinkOptions adjust RevokeLink.
type RevokeLinkOptions struct {
	// IdempotencyKey names this revocation; generated when empty. Revoking
	// is safe to repeat without one too.
	IdempotencyKey string
}

// RevokeLink revokes a share link (DELETE /v1/links/{id}): its URL
// serves nothing from then on. It returns the link with RevokedAt set;
// revoking a revoked link returns it unchanged.
func (c *Client) RevokeLink(ctx context.Context, linkID string, opts RevokeLinkOptions) (*Link, error) {
	r := newRequest(routeRevokeLink, "/v1/links/"+url.PathEscape(linkID)).withKey(c.keyFor(opts.IdempotencyKey))
	return callJSON[Link](ctx, c, r)
}
