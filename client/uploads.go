package client

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
)

// Upload is a multipart upload session (openapi.yaml, schema Upload): a
// file of SizeBytes bytes sent in PartCount parts of PartSize bytes (the
// last holds the rest), then assembled into a file by CompleteUpload.
type Upload = api.Upload

// UploadPart is one stored part of an upload session (schema UploadPart;
// Object and UploadID are set on the answer to PutPart only).
type UploadPart = api.UploadPart

// Upload session states (Upload.Status).
const (
	UploadPending    = agentfs.UploadPending
	UploadCompleting = agentfs.UploadCompleting
	UploadCompleted  = agentfs.UploadCompleted
	UploadAborted    = agentfs.UploadAborted
	UploadExpired    = agentfs.UploadExpired
	UploadFailed     = agentfs.UploadFailed
)

// CreateUploadOptions adjust CreateUpload.
type CreateUploadOptions struct {
	// ContentType is the file's media type; the server's default is
	// application/octet-stream.
	ContentType string
	// Replace makes the complete replace a live file at the path
	// (if_exists=replace) instead of failing with PATH_EXISTS.
	Replace bool
	// SHA256 is the whole file's SHA-256, lowercase hex: the assembled
	// content is checked against it.
	SHA256 string
	// IdempotencyKey names this create; generated when empty. A create is
	// safe to repeat without one too.
	IdempotencyKey string
	// ExpiresIn makes the completed file expire this long after the
	// complete (60 s to 365 days, whole seconds); zero sets nothing.
	ExpiresIn time.Duration
}

// CreateUpload starts an upload session for a file of size bytes at path
// (POST /v1/uploads). When the subject already has a live pending session
// with the same path, size, content type and SHA-256, that session comes
// back instead, with the parts it holds: send only the missing ones.
func (c *Client) CreateUpload(ctx context.Context, path string, size int64, opts CreateUploadOptions) (*Upload, error) {
	body := map[string]any{"path": path, "size_bytes": size}
	if opts.ContentType != "" {
		body["content_type"] = opts.ContentType
	}
	if opts.Replace {
		body["if_exists"] = "replace"
	}
	if opts.SHA256 != "" {
		body["sha256"] = opts.SHA256
	}
	secs, err := expiresInSeconds("CreateUpload", opts.ExpiresIn)
	if err != nil {
		return nil, err
	}
	if secs > 0 {
		body["expires_in"] = secs
	}
	r, err := newRequest(routeCreateUpload, "/v1/uploads").withKey(c.keyFor(opts.IdempotencyKey)).withJSON(body)
	if err != nil {
		return nil, err
	}
	return callJSON[Upload](ctx, c, r)
}

// Upload returns an upload session with the parts received so far (GET
// /v1/uploads/{id}). A pending session past its ExpiresAt shows as
// UploadExpired.
func (c *Client) Upload(ctx context.Context, id string) (*Upload, error) {
	return callJSON[Upload](ctx, c, newRequest(routeUpload, uploadPath(id)))
}

// PartOptions adjust PutPart.
type PartOptions struct {
	// ContentDigest is the part's RFC 9530 digest, "sha-256=:BASE64:" (see
	// Digest): a mismatching body is refused and the stored part kept, and
	// a keyed repeat is answered before the body is read.
	ContentDigest string
	// IdempotencyKey names this part upload; generated when empty. A part
	// is safe to repeat without one too.
	IdempotencyKey string
	// GetBody returns a fresh copy of the body for a repeat attempt, for a
	// body that is not an io.ReadSeeker.
	GetBody func() (io.ReadCloser, error)
}

// PutPart stores body, size bytes, as part n (from 1) of a pending session
// (PUT /v1/uploads/{id}/parts/{n}); sending a part again replaces it.
// Every part but the last must have exactly the session's PartSize bytes.
// An io.ReadSeeker body (io.NewSectionReader over a file, say) is rewound
// for every attempt and must hold exactly size bytes from its offset;
// any other reader is sent once.
func (c *Client) PutPart(ctx context.Context, id string, n int, body io.Reader, size int64, opts PartOptions) (*UploadPart, error) {
	r := newRequest(routeUploadPart, uploadPath(id)+"/parts/"+strconv.Itoa(n)).withKey(c.keyFor(opts.IdempotencyKey))
	r.body = newBody(body, opts.GetBody)
	switch {
	case size < 0:
		return nil, fmt.Errorf("part %d: negative size %d", n, size)
	case r.body.size < 0:
		r.body.size = size // a stream: sent with the length it was said to have
	case r.body.size != size:
		return nil, fmt.Errorf("part %d: the body holds %d bytes, not %d", n, r.body.size, size)
	}
	r.header.Set("Content-Type", "application/octet-stream")
	setIf(r.header, "Content-Digest", opts.ContentDigest)
	return callJSON[UploadPart](ctx, c, r)
}

// CompleteOptions adjust CompleteUpload; empty fields keep the session's.
type CompleteOptions struct {
	// IfExists overrides the session's if_exists: "error" or "replace".
	IfExists string
	// SHA256 overrides the whole-file SHA-256 declared at the start.
	SHA256 string
	// IfMatch completes only while the live file at the path has this
	// ETag (412 otherwise).
	IfMatch string
	// IdempotencyKey names this complete; generated when empty. A complete
	// is safe to repeat without one too.
	IdempotencyKey string
}

// CompleteUpload assembles the session's parts into the file at its path
// (POST /v1/uploads/{id}/complete) and returns the file. Completing a
// completed session returns the same file. PARTS_MISSING lists in
// MissingParts what to send first; a CHECKSUM_MISMATCH fails the session
// for good. Should the server answer that it finishes in the background
// (202), the session is polled until it ends.
func (c *Client) CompleteUpload(ctx context.Context, id string, opts CompleteOptions) (*File, error) {
	r := newRequest(routeComplete, uploadPath(id)+"/complete").withKey(c.keyFor(opts.IdempotencyKey))
	body := map[string]any{}
	if opts.IfExists != "" {
		body["if_exists"] = opts.IfExists
	}
	if opts.SHA256 != "" {
		body["sha256"] = opts.SHA256
	}
	if len(body) > 0 {
		if _, err := r.withJSON(body); err != nil {
			return nil, err
		}
	}
	setIf(r.header, "If-Match", opts.IfMatch)
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusAccepted {
		var f File
		if err := decodeJSON(res, &f); err != nil {
			return nil, err
		}
		return &f, nil
	}
	var u Upload
	if err := decodeJSON(res, &u); err != nil {
		return nil, err
	}
	return c.awaitCompletion(ctx, &u)
}

// awaitCompletion polls a session that completes in the background until
// it has a file or has failed.
func (c *Client) awaitCompletion(ctx context.Context, u *Upload) (*File, error) {
	wait := newPollInterval()
	for {
		switch {
		case u.Status == UploadCompleted && u.File != nil:
			return u.File, nil
		case u.Status == UploadFailed && u.Error != nil:
			return nil, u.Error
		case u.Status != UploadCompleting && u.Status != UploadCompleted:
			return nil, fmt.Errorf("upload %s ended %s while completing", u.ID, u.Status)
		}
		if err := wait.sleep(ctx); err != nil {
			return nil, err
		}
		var err error
		if u, err = c.Upload(ctx, u.ID); err != nil {
			return nil, err
		}
	}
}

// AbortOptions adjust AbortUpload.
type AbortOptions struct {
	// IdempotencyKey names this abort; generated when empty. An abort is
	// safe to repeat without one too.
	IdempotencyKey string
}

// AbortUpload aborts a session (DELETE /v1/uploads/{id}): its parts are
// removed and it takes no more. Aborting an aborted, expired or failed
// session returns it unchanged; a completed one is UPLOAD_COMPLETED.
func (c *Client) AbortUpload(ctx context.Context, id string, opts AbortOptions) (*Upload, error) {
	return callJSON[Upload](ctx, c, newRequest(routeAbortUpload, uploadPath(id)).withKey(c.keyFor(opts.IdempotencyKey)))
}

func uploadPath(id string) string { return "/v1/uploads/" + url.PathEscape(id) }

// UploadList is one page of upload sessions, newest first (schema
// UploadList); its NextCursor is UploadListOptions.Cursor for the next
// page.
type UploadList = api.UploadList

// UploadListOptions filter and page ListUploads.
type UploadListOptions struct {
	// Status keeps the sessions in this state (UploadPending, ...): the
	// pending ones are what an interrupted upload left to resume.
	Status string
	// Path keeps the sessions that target exactly this path.
	Path string
	// Limit is the page size, 1-1000; zero means the server's default (100).
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
}

// ListUploads returns one page of the subject's upload sessions, newest
// first (GET /v1/uploads).
func (c *Client) ListUploads(ctx context.Context, opts UploadListOptions) (*UploadList, error) {
	r := newRequest(routeListUploads, "/v1/uploads")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	setQuery(r.query, "status", opts.Status)
	setQuery(r.query, "path", opts.Path)
	return callJSON[UploadList](ctx, c, r)
}

// AllUploads iterates over every session that matches opts, newest first,
// page after page. It stops at the first error, which it yields with a
// nil session.
func (c *Client) AllUploads(ctx context.Context, opts UploadListOptions) iter.Seq2[*Upload, error] {
	return allPages(ctx, c.ListUploads, &opts, &opts.Cursor)
}

func setQuery(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

// pollInterval spaces the polls of something the server finishes in the
// background: 100 ms, growing by half up to 2 s.
type pollInterval struct{ next time.Duration }

// Bounds of pollInterval.
const (
	pollFirst = 100 * time.Millisecond
	pollMax   = 2 * time.Second
)

func newPollInterval() *pollInterval { return &pollInterval{next: pollFirst} }

// sleep waits for the next poll, or until ctx ends.
func (p *pollInterval) sleep(ctx context.Context) error {
	t := time.NewTimer(p.next)
	defer t.Stop()
	p.next = min(p.next*3/2, pollMax)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
