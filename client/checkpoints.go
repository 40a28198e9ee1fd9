package client

import (
	"context"
	"io"
	"net/url"

	"github.com/agentfs/agentfs/api"
)

// Checkpoint names a point of the subject's history (schema Checkpoint): a
// position, not a copy; its Cursor is a point for AsOf, Diff and Restore.
type Checkpoint = api.Checkpoint

// CheckpointList is one page of checkpoints, newest first.
type CheckpointList = api.CheckpointList

// Change is one file that differs between two points (schema Change).
type Change = api.Change

// DiffList is one page of a diff, by path (schema DiffList).
type DiffList = api.DiffList

// RestorePlan is what a restore would do (schema RestorePlan).
type RestorePlan = api.RestorePlan

// CheckpointOptions adjust CreateCheckpoint.
type CheckpointOptions struct {
	Name   string // unique per subject; "" for an unnamed checkpoint
	Prefix string // the folder whose versions it keeps; "" for all
	Note   string
	// IdempotencyKey names this create; generated when empty.
	IdempotencyKey string
}

// CreateCheckpoint makes a checkpoint of the present (POST
// /v1/checkpoints); a name in use is CHECKPOINT_EXISTS.
func (c *Client) CreateCheckpoint(ctx context.Context, opts CheckpointOptions) (*Checkpoint, error) {
	body := map[string]string{}
	for k, v := range map[string]string{"name": opts.Name, "prefix": opts.Prefix, "note": opts.Note} {
		if v != "" {
			body[k] = v
		}
	}
	r, err := newRequest(routeCreateCheckpoint, "/v1/checkpoints").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	return &cp, c.jsonCall(ctx, r, &cp)
}

// CheckpointListOptions filter and page ListCheckpoints.
type CheckpointListOptions struct {
	Prefix string
	Limit  int
	Cursor string
}

// ListCheckpoints returns one page of checkpoints, newest first (GET
// /v1/checkpoints).
func (c *Client) ListCheckpoints(ctx context.Context, opts CheckpointListOptions) (*CheckpointList, error) {
	r := newRequest(routeListCheckpoints, "/v1/checkpoints")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	if opts.Prefix != "" {
		r.query.Set("prefix", opts.Prefix)
	}
	var l CheckpointList
	return &l, c.jsonCall(ctx, r, &l)
}

// GetCheckpoint returns a checkpoint by id or name.
func (c *Client) GetCheckpoint(ctx context.Context, idOrName string) (*Checkpoint, error) {
	var cp Checkpoint
	return &cp, c.jsonCall(ctx, newRequest(routeCheckpoint, checkpointPath(idOrName)), &cp)
}

// DeleteCheckpoint forgets a checkpoint by id or name (the versions it
// kept become the sweeper's again); an unknown one is NOT_FOUND.
func (c *Client) DeleteCheckpoint(ctx context.Context, idOrName string) error {
	var cp Checkpoint
	return c.jsonCall(ctx, newRequest(routeDeleteCheckpoint, checkpointPath(idOrName)).withKey(c.keyFor("")), &cp)
}

func checkpointPath(idOrName string) string { return "/v1/checkpoints/" + url.PathEscape(idOrName) }

// FileAsOf returns a file as it was at a point (GET /v1/files/{id}?as_of=);
// NOT_FOUND when it was not live then.
func (c *Client) FileAsOf(ctx context.Context, id, point string) (*File, error) {
	r := newRequest(routeFile, filePath(id))
	r.query = url.Values{"as_of": {point}}
	return callJSON[File](ctx, c, r)
}

// FileContentAsOf opens the bytes a file had at a point.
func (c *Client) FileContentAsOf(ctx context.Context, id, point string, opts ContentOptions) (*Content, error) {
	r := newRequest(routeFileContent, filePath(id)+"/content")
	r.query = url.Values{"as_of": {point}}
	return c.openContent(ctx, r, opts)
}

// DiffOptions select a diff: To defaults to "now".
type DiffOptions struct {
	To     string
	Prefix string
	Limit  int
	Cursor string
}

func diffQuery(from string, opts DiffOptions) url.Values {
	q := pageQuery(opts.Limit, opts.Cursor)
	q.Set("from", from)
	for k, v := range map[string]string{"to": opts.To, "prefix": opts.Prefix} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Diff returns one page of what changed between the points from and
// opts.To under opts.Prefix, by path (GET /v1/diff).
func (c *Client) Diff(ctx context.Context, from string, opts DiffOptions) (*DiffList, error) {
	r := newRequest(routeDiff, "/v1/diff")
	r.query = diffQuery(from, opts)
	var l DiffList
	return &l, c.jsonCall(ctx, r, &l)
}

// DiffPatch returns the same diff as a unified diff that git apply
// accepts (format=patch), one page of up to opts.Limit changes (default
// 1000).
func (c *Client) DiffPatch(ctx context.Context, from string, opts DiffOptions) (string, error) {
	r := newRequest(routeDiff, "/v1/diff")
	r.query = diffQuery(from, opts)
	r.query.Set("format", "patch")
	res, err := c.do(ctx, r)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// RestorePointOptions adjust Restore.
type RestorePointOptions struct {
	// Force puts back files changed after the plan too (else their items
	// fail PRECONDITION_FAILED).
	Force bool
	// IdempotencyKey names this restore; generated when empty, also by a
	// client WithoutIdempotencyKeys, since the server requires one.
	IdempotencyKey string
	// Wait waits for the batch to end and returns it with every item's
	// outcome; ctx bounds the wait.
	Wait bool
}

// Restore puts the files under prefix back to their state at the point to
// (POST /v1/restore) and returns the batch that does it.
func (c *Client) Restore(ctx context.Context, prefix, to string, opts RestorePointOptions) (*Batch, error) {
	r, err := newRequest(routeRestore, "/v1/restore").withKey(requiredKey(opts.IdempotencyKey)).
		withJSON(map[string]any{"prefix": prefix, "to": to, "force": opts.Force})
	return c.startBatch(ctx, r, err, opts.Wait)
}

// PlanRestore is what Restore would do now, changing nothing (dry_run).
func (c *Client) PlanRestore(ctx context.Context, prefix, to string) (*RestorePlan, error) {
	r, err := newRequest(routeRestore, "/v1/restore").withJSON(map[string]any{"prefix": prefix, "to": to, "dry_run": true})
	if err != nil {
		return nil, err
	}
	var p RestorePlan
	return &p, c.jsonCall(ctx, r, &p)
}
