package client

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// FolderOptions page ListFolder; its Limit counts files and folders
// together.
type FolderOptions = PageOptions

// ListFolder returns one page of the folder prefix (GET
// /v1/files?delimiter=/): the live files directly under it in Data and the
// folders below it in Prefixes (each prefix, a segment and "/"), in byte
// order of their names. It costs the server one index seek per entry,
// whatever lies deeper, which is what a mount's readdir needs.
func (c *Client) ListFolder(ctx context.Context, prefix string, opts FolderOptions) (*FileList, error) {
	q := url.Values{"delimiter": {"/"}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	r := newRequest(routeListFiles, "/v1/files")
	r.query = q
	return callJSON[FileList](ctx, c, r)
}

// MetaOptions adjust SetMetadata.
type MetaOptions struct {
	// Mode sets the permission bits (0-0o7777) when not nil.
	Mode *int
	// MTime sets the modification time when not nil.
	MTime *time.Time
	// IfMatch changes the file only while it has this ETag (412 otherwise).
	IfMatch string
	// IdempotencyKey names this change; generated when empty.
	IdempotencyKey string
}

// SetMetadata sets a live file's mode and mtime without a new version
// (PATCH /v1/files/{id} {"mode", "mtime"}), as chmod and touch do on a
// mount, and returns it. A repeat sets the same values, so it is safe.
func (c *Client) SetMetadata(ctx context.Context, fileID string, opts MetaOptions) (*File, error) {
	body := map[string]any{}
	if opts.Mode != nil {
		body["mode"] = *opts.Mode
	}
	if opts.MTime != nil {
		body["mtime"] = opts.MTime.UTC().Format(time.RFC3339Nano)
	}
	return c.changeFile(ctx, routePatchFile, filePath(fileID), opts.IdempotencyKey, opts.IfMatch, body)
}
