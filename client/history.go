package client

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"time"

	"github.com/agentfs/agentfs/api"
)

// FileVersion is one version of a file's content (schema FileVersion):
// every write that changed the bytes or the content type made one, and
// the previous ones stay readable until the server's version retention
// drops them.
type FileVersion = api.FileVersion

// VersionList is one page of a file's versions, newest first (schema
// VersionList); its NextCursor is VersionListOptions.Cursor for the next
// page.
type VersionList = api.VersionList

// PageOptions page a listing that takes nothing but a page size and a
// cursor.
type PageOptions struct {
	// Limit is the page size, 1-1000; zero means the server's default (100).
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
}

// VersionListOptions page ListVersions.
type VersionListOptions = PageOptions

// ListVersions returns one page of a file's versions, newest first (GET
// /v1/files/{id}/versions), also of a deleted file not purged yet.
func (c *Client) ListVersions(ctx context.Context, fileID string, opts VersionListOptions) (*VersionList, error) {
	r := newRequest(routeListVersions, filePath(fileID)+"/versions")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	return callJSON[VersionList](ctx, c, r)
}

// AllVersions iterates over every version of a file, newest first, page
// after page (opts.Limit is the page size). It stops at the first error,
// which it yields with a nil version.
func (c *Client) AllVersions(ctx context.Context, fileID string, opts VersionListOptions) iter.Seq2[*FileVersion, error] {
	versions := func(ctx context.Context, opts VersionListOptions) (*VersionList, error) {
		return c.ListVersions(ctx, fileID, opts)
	}
	return allPages(ctx, versions, &opts, &opts.Cursor)
}

// Version returns version n of a file (GET /v1/files/{id}/versions/{n});
// a version the retention dropped is NOT_FOUND.
func (c *Client) Version(ctx context.Context, fileID string, n int64) (*FileVersion, error) {
	return callJSON[FileVersion](ctx, c, newRequest(routeVersion, versionPath(fileID, n)))
}

// VersionContent opens the bytes of version n of a file (GET
// /v1/files/{id}/versions/{n}/content), with everything FileContent
// offers: a Range, If-Range, the ETag and SHA-256 of that version. The
// request is retried until the response starts; the caller reads the
// body as it streams and closes it.
func (c *Client) VersionContent(ctx context.Context, fileID string, n int64, opts ContentOptions) (*Content, error) {
	return c.openContent(ctx, newRequest(routeVersionContent, versionPath(fileID, n)+"/content"), opts)
}

func versionPath(fileID string, n int64) string {
	return filePath(fileID) + "/versions/" + strconv.FormatInt(n, 10)
}

// RevertOptions adjust Revert.
type RevertOptions struct {
	// IfMatch reverts only while the file's current content has this ETag
	// (412 otherwise), so a write made meanwhile is not undone unseen.
	IfMatch string
	// IdempotencyKey names this revert; generated when empty.
	IdempotencyKey string
}

// Revert makes version n's content the file's current content, as a new
// version (POST /v1/files/{id}/revert), and returns the file. Reverting
// to the content the file already has changes nothing. A deleted file is
// NOT_FOUND: restore it first.
func (c *Client) Revert(ctx context.Context, fileID string, n int64, opts RevertOptions) (*File, error) {
	return c.changeFile(ctx, routeRevert, filePath(fileID)+"/revert", opts.IdempotencyKey, opts.IfMatch,
		map[string]any{"version": n})
}

// MoveOptions adjust Move.
type MoveOptions struct {
	// Replace deletes (softly, history kept) a live file that holds the
	// new path, in the same transaction; without it that is PATH_EXISTS.
	Replace bool
	// Overwrite keeps a live file that holds the new path (its id and
	// history) and makes this file's content its next version, then
	// deletes this one softly: an editor's atomic save. The answer is the
	// file at the new path.
	Overwrite bool
	// IfMatch moves only while the file has this ETag (412 otherwise).
	IfMatch string
	// IdempotencyKey names this move; generated when empty.
	IdempotencyKey string
}

// Move gives a file the path newPath (POST /v1/files/{id}/move) and
// returns it: it keeps its id, url, version and history, and no bytes
// move. Moving a file to its own path changes nothing.
func (c *Client) Move(ctx context.Context, fileID, newPath string, opts MoveOptions) (*File, error) {
	ifExists := "error"
	if opts.Replace {
		ifExists = "replace"
	}
	if opts.Overwrite {
		ifExists = "overwrite"
	}
	return c.changeFile(ctx, routeMove, filePath(fileID)+"/move", opts.IdempotencyKey, opts.IfMatch,
		map[string]any{"path": newPath, "if_exists": ifExists})
}

// ExpiryOptions adjust SetExpiry.
type ExpiryOptions struct {
	// IfMatch changes the expiry only while the file has this ETag (412
	// otherwise).
	IfMatch string
	// IdempotencyKey names this change; generated when empty.
	IdempotencyKey string
}

// SetExpiry makes a live file expire at *at, or never when at is nil
// (PATCH /v1/files/{id} {"expires_at"}), and returns it. The server takes
// times from 60 seconds to 365 days ahead; from at on the file counts as
// deleted (DeleteFile removes it now). A repeat sets the same value, so
// it is safe.
func (c *Client) SetExpiry(ctx context.Context, fileID string, at *time.Time, opts ExpiryOptions) (*File, error) {
	var v any // JSON null: never
	if at != nil {
		v = at.UTC().Format(time.RFC3339Nano)
	}
	return c.changeFile(ctx, routePatchFile, filePath(fileID), opts.IdempotencyKey, opts.IfMatch,
		map[string]any{"expires_at": v})
}

// changeFile sends body as JSON to a file's route under the idempotency
// key (generated when empty) and If-Match when set, and returns the file:
// the one shape of every change of a file's history or metadata.
func (c *Client) changeFile(ctx context.Context, route, path, key, ifMatch string, body map[string]any) (*File, error) {
	r, err := newRequest(route, path).withKey(c.keyFor(key)).withJSON(body)
	if err != nil {
		return nil, err
	}
	setIf(r.header, "If-Match", ifMatch)
	return callJSON[File](ctx, c, r)
}

// pageQuery is the query of a keyset page.
func pageQuery(limit int, cursor string) url.Values {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// page is what every keyset listing answers (VersionList, UploadList,
// BatchList, RunList): a page of T, whether more follow, and the cursor
// of the next one.
type page[T any] = struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// listing is a listing's answer type, which is a page.
type listing[T any] interface{ ~page[T] }

// allPages iterates over every element of a newest-first keyset listing,
// from *cursor on: list answers the page of opts, whose cursor field
// cursor points at. The first error is yielded with a nil element and
// ends the iteration.
func allPages[T any, L listing[T], O any](ctx context.Context, list func(context.Context, O) (*L, error), opts *O, cursor *string) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		for {
			l, err := list(ctx, *opts)
			if err != nil {
				yield(nil, err)
				return
			}
			p := page[T](*l)
			for i := range p.Data {
				if !yield(&p.Data[i], nil) {
					return
				}
			}
			if !p.HasMore || p.NextCursor == nil {
				return
			}
			if *p.NextCursor == *cursor {
				yield(nil, fmt.Errorf("the server answered cursor %q with itself as the next one", *cursor))
				return
			}
			*cursor = *p.NextCursor
		}
	}
}
