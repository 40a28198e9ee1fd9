package client

import (
	"context"
	"net/url"

	"github.com/agentfs/agentfs/api"
)

// Fork is a copy-on-write copy of a folder (schema Fork).
type Fork = api.Fork

// ForkList is one page of forks, newest first.
type ForkList = api.ForkList

// Merge is a merge of a fork back into its source (schema Merge).
type Merge = api.Merge

// MergeConflict is a path changed on both sides of a merge (schema
// MergeConflict); a MERGE_CONFLICT problem lists them in Conflicts.
type MergeConflict = api.MergeConflict

// ForkOptions adjust CreateFork.
type ForkOptions struct {
	// AsOf is the point to fork; "" is now.
	AsOf string
	// IdempotencyKey names this fork; generated when empty.
	IdempotencyKey string
}

// CreateFork copies the files under the folder from to the folder to as
// new files sharing their blobs (POST /v1/forks); a live file under to is
// PATH_EXISTS, nested or equal folders VALIDATION_FAILED.
func (c *Client) CreateFork(ctx context.Context, from, to string, opts ForkOptions) (*Fork, error) {
	body := map[string]string{"from": from, "to": to}
	if opts.AsOf != "" {
		body["as_of"] = opts.AsOf
	}
	r, err := newRequest(routeCreateFork, "/v1/forks").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	return callJSON[Fork](ctx, c, r)
}

// ListForks returns one page of forks, newest first (GET /v1/forks).
func (c *Client) ListForks(ctx context.Context, limit int, cursor string) (*ForkList, error) {
	r := newRequest(routeListForks, "/v1/forks")
	r.query = pageQuery(limit, cursor)
	return callJSON[ForkList](ctx, c, r)
}

// GetFork returns a fork by id.
func (c *Client) GetFork(ctx context.Context, id string) (*Fork, error) {
	return callJSON[Fork](ctx, c, newRequest(routeFork, forkPath(id)))
}

// DeleteFork forgets a fork (its files stay); an unknown one is NOT_FOUND.
func (c *Client) DeleteFork(ctx context.Context, id string) (*Fork, error) {
	return callJSON[Fork](ctx, c, newRequest(routeDeleteFork, forkPath(id)).withKey(c.keyFor("")))
}

// MergeOptions adjust Merge.
type MergeOptions struct {
	// OnConflict is fail (the default: any conflict is MERGE_CONFLICT and
	// nothing is merged), fork or target (the side that wins).
	OnConflict string
	// DryRun answers what the merge would do, changing nothing.
	DryRun bool
	// IdempotencyKey names this merge; generated when empty.
	IdempotencyKey string
}

// Merge merges a fork back into its source (POST /v1/forks/{id}/merge),
// every change in one transaction; with conflicts and OnConflict fail, a
// *Problem MERGE_CONFLICT whose Conflicts list every one.
func (c *Client) Merge(ctx context.Context, forkID string, opts MergeOptions) (*Merge, error) {
	body := map[string]any{}
	if opts.OnConflict != "" {
		body["on_conflict"] = opts.OnConflict
	}
	r := newRequest(routeMerge, forkPath(forkID)+"/merge")
	if opts.DryRun {
		body["dry_run"] = true
	} else {
		r = r.withKey(c.keyFor(opts.IdempotencyKey))
	}
	r, err := r.withJSON(body)
	if err != nil {
		return nil, err
	}
	return callJSON[Merge](ctx, c, r)
}

func forkPath(id string) string { return "/v1/forks/" + url.PathEscape(id) }
