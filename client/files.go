package client

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/api"
)

// File is a stored file's metadata (openapi.yaml, schema File).
type File = api.File

// FileList is one page of files, newest first (schema FileList); its
// NextCursor is ListOptions.Cursor for the next page.
type FileList = api.FileList

// PutOptions adjust PutFile. The zero value creates a new file and fails
// with PATH_EXISTS if a live file holds the path.
type PutOptions struct {
	// Replace replaces the live file at the path (if_exists=replace): it
	// keeps its id and url. Replace uploads are safe to repeat.
	Replace bool
	// IfMatch replaces only the live file with this ETag (412 otherwise);
	// it needs Replace.
	IfMatch string
	// IfNoneMatchAny creates only when no live file holds the path (412
	// otherwise).
	IfNoneMatchAny bool
	// ContentType is stored as the file's content_type; the server's
	// default is application/octet-stream.
	ContentType string
	// ContentDigest is an RFC 9530 digest of the body, "sha-256=:BASE64:"
	// (see Digest). The server verifies it, and with an Idempotency-Key it
	// answers a replay before reading the body.
	ContentDigest string
	// IdempotencyKey names this logical upload; by default the client
	// generates one per call and sends it on every attempt.
	IdempotencyKey string
	// GetBody returns a fresh copy of the body for a repeat attempt, for a
	// body that is not an io.ReadSeeker. Without either, the body is sent
	// once only.
	GetBody func() (io.ReadCloser, error)
	// ExpiresIn makes the file expire this long after the write (from 60 s
	// to 365 days, whole seconds; a fraction is rounded up): from then on
	// it counts as deleted, so scratch output cleans itself up. Zero sets
	// nothing, and a replace then keeps the file's expires_at.
	ExpiresIn time.Duration
	// Mode sets the file's permission bits (0-0o7777); nil: 0644 for a new
	// file, kept by a replace.
	Mode *int
	// MTime sets the file's modification time; nil: its updated_at.
	MTime *time.Time
	// Kind is "file", "symlink" (the body is the target) or "directory"
	// (an empty body: a marker keeping an empty folder); empty: "file" for
	// a new file, kept by a replace.
	Kind string
}

// PutFile uploads body as the file at path (POST /v1/files) and returns
// its metadata. The body streams: an io.ReadSeeker (an *os.File, a
// bytes.Reader) is sent with its length from its current offset and
// rewound for every attempt; any other reader is sent chunked, once.
func (c *Client) PutFile(ctx context.Context, path string, body io.Reader, opts PutOptions) (*File, error) {
	q := url.Values{"path": {path}}
	if opts.Replace {
		q.Set("if_exists", "replace")
	}
	secs, err := expiresInSeconds("PutFile", opts.ExpiresIn)
	if err != nil {
		return nil, err
	}
	if secs > 0 {
		q.Set("expires_in", strconv.FormatInt(secs, 10))
	}
	if opts.Mode != nil {
		q.Set("mode", strconv.FormatInt(int64(*opts.Mode), 8))
	}
	if opts.MTime != nil {
		q.Set("mtime", opts.MTime.UTC().Format(time.RFC3339Nano))
	}
	if opts.Kind != "" {
		q.Set("kind", opts.Kind)
	}
	r := newRequest(routePutFile, "/v1/files").withKey(c.keyFor(opts.IdempotencyKey))
	r.query, r.Replace, r.body = q, opts.Replace, newBody(body, opts.GetBody)
	setIf(r.header, "Content-Type", opts.ContentType)
	setIf(r.header, "Content-Digest", opts.ContentDigest)
	setIf(r.header, "If-Match", opts.IfMatch)
	if opts.IfNoneMatchAny {
		r.header.Set("If-None-Match", "*")
	}
	return callJSON[File](ctx, c, r)
}

// Digest returns the RFC 9530 Content-Digest of content whose SHA-256 is
// sum: "sha-256=:BASE64:".
func Digest(sum []byte) string {
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum) + ":"
}

// expiresInSeconds turns an expiry delay into the whole seconds the API
// takes, rounding a fraction up; zero means none. The server checks the
// range.
func expiresInSeconds(what string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("%s: ExpiresIn %v is negative", what, d)
	}
	return int64((d + time.Second - 1) / time.Second), nil
}

// File returns a file's metadata (GET /v1/files/{id}), also of a deleted
// file that is not purged yet.
func (c *Client) File(ctx context.Context, id string) (*File, error) {
	return callJSON[File](ctx, c, newRequest(routeFile, filePath(id)))
}

// DeleteOptions adjust DeleteFile.
type DeleteOptions struct {
	// IfMatch deletes only while the file has this ETag (412 otherwise).
	IfMatch string
	// IdempotencyKey names this delete; generated when empty.
	IdempotencyKey string
}

// DeleteFile soft-deletes a file (DELETE /v1/files/{id}) and returns it
// with DeletedAt and PurgeAfter set. Deleting a deleted file is safe.
func (c *Client) DeleteFile(ctx context.Context, id string, opts DeleteOptions) (*File, error) {
	r := newRequest(routeDeleteFile, filePath(id)).withKey(c.keyFor(opts.IdempotencyKey))
	setIf(r.header, "If-Match", opts.IfMatch)
	return callJSON[File](ctx, c, r)
}

// RestoreOptions adjust RestoreFile.
type RestoreOptions struct {
	// IdempotencyKey names this restore; generated when empty.
	IdempotencyKey string
}

// RestoreFile undoes a delete (POST /v1/files/{id}/restore); a live file
// is returned unchanged. PATH_EXISTS means another file took the path.
func (c *Client) RestoreFile(ctx context.Context, id string, opts RestoreOptions) (*File, error) {
	r := newRequest(routeRestoreFile, filePath(id)+"/restore").withKey(c.keyFor(opts.IdempotencyKey))
	return callJSON[File](ctx, c, r)
}

func filePath(id string) string { return "/v1/files/" + url.PathEscape(id) }

func setIf(h http.Header, name, value string) {
	if value != "" {
		h.Set(name, value)
	}
}

// ListOptions filter and page ListFiles. Filters combine with AND.
type ListOptions struct {
	RunID   string // files whose creating request carried this X-Run-ID
	AgentID string // files whose creating request carried this X-Agent-ID
	// LastRunID: files whose latest write carried this X-Run-ID, which
	// is what a run left behind even in files it did not create.
	LastRunID string
	Prefix    string // paths starting with this string
	Path      string // exactly this path
	// IncludeDeleted includes deleted files that are not purged yet.
	IncludeDeleted bool
	// Limit is the page size, 1-1000; zero means the server's default (100).
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
	// AsOf lists the files live at this point (a checkpoint id or name,
	// an event cursor, an RFC 3339 time or "now"), in path order, each as
	// it was then; only Prefix, Limit and Cursor combine with it.
	AsOf string
	// Fields, when set, asks for only these members of each file
	// (fields=, by JSON name: "path", "size_bytes", ...): smaller pages,
	// and fewer columns read on the server. ID is always answered; the
	// members not asked for read as zero.
	Fields []string
}

// ListFiles returns one page of files, newest first (GET /v1/files).
func (c *Client) ListFiles(ctx context.Context, opts ListOptions) (*FileList, error) {
	q := url.Values{}
	for name, v := range map[string]string{"run_id": opts.RunID, "agent_id": opts.AgentID, "last_run_id": opts.LastRunID,
		"prefix": opts.Prefix, "path": opts.Path, "cursor": opts.Cursor, "as_of": opts.AsOf} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if opts.IncludeDeleted {
		q.Set("include_deleted", "true")
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	setFields(q, opts.Fields)
	r := newRequest(routeListFiles, "/v1/files")
	r.query = q
	return callJSON[FileList](ctx, c, r)
}

// AllFiles iterates over every file that matches opts, page after page
// (opts.Limit is the page size). It stops at the first error, which it
// yields with a nil file.
//
//	for f, err := range c.AllFiles(ctx, client.ListOptions{RunID: "run-1"}) {
//		if err != nil { return err }
//		fmt.Println(f.Path)
//	}
func (c *Client) AllFiles(ctx context.Context, opts ListOptions) iter.Seq2[*File, error] {
	return func(yield func(*File, error) bool) {
		for {
			page, err := c.ListFiles(ctx, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Data {
				if !yield(&page.Data[i], nil) {
					return
				}
			}
			if !page.HasMore || page.NextCursor == nil {
				return
			}
			opts.Cursor = *page.NextCursor
		}
	}
}

// ContentOptions adjust FileContent.
type ContentOptions struct {
	// Range asks for one byte range, "bytes=0-1023", "bytes=100-" or
	// "bytes=-100"; the answer is then 206 with ContentRange set.
	Range string
	// IfRange honours Range only while the file has this ETag; otherwise
	// the whole content comes back (200).
	IfRange string
	// Redirect asks the server for a presigned S3 URL of the content
	// (redirect=true) and reads the bytes from S3 itself, sending it no
	// AgentFS credentials; Content then describes them as the server
	// announced them (ETag, SHA256, Filename). A server without a public
	// S3 endpoint streams the bytes as usual. The S3 request is not
	// retried.
	Redirect bool
}

// Content is a file's bytes as they stream from the server, with what the
// response said about them. Close it when done.
type Content struct {
	io.ReadCloser
	// Status is 200 for the whole content, 206 for a range.
	Status      int
	ContentType string
	// Length is the number of bytes in this response, -1 if unknown.
	Length int64
	ETag   string
	// SHA256 is the lowercase hex SHA-256 of the whole content (from
	// Repr-Digest), also for a range.
	SHA256 string
	// ContentRange is "bytes a-b/size" for a range, else empty.
	ContentRange string
	// Filename is the last segment of the file's path.
	Filename     string
	LastModified time.Time
}

// FileContent opens a live file's content (GET /v1/files/{id}/content).
// The request is retried until the response starts; the caller reads
// the body as it streams.
func (c *Client) FileContent(ctx context.Context, id string, opts ContentOptions) (*Content, error) {
	return c.openContent(ctx, newRequest(routeFileContent, filePath(id)+"/content"), opts)
}

// openContent sends a content request and opens its body.
func (c *Client) openContent(ctx context.Context, r *request, opts ContentOptions) (*Content, error) {
	setIf(r.header, "Range", opts.Range)
	setIf(r.header, "If-Range", opts.IfRange)
	if opts.Redirect {
		askRedirect(r)
	}
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	h := res.Header
	if opts.Redirect && res.StatusCode == http.StatusTemporaryRedirect {
		if res, err = c.followBlobRedirect(ctx, res, opts); err != nil {
			return nil, err
		}
	}
	out := &Content{
		ReadCloser:   res.Body,
		Status:       res.StatusCode,
		ContentType:  h.Get("Content-Type"),
		Length:       res.ContentLength,
		ETag:         h.Get("ETag"),
		SHA256:       sha256OfDigest(h.Get("Repr-Digest")),
		ContentRange: res.Header.Get("Content-Range"),
	}
	if _, params, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil {
		out.Filename = params["filename"]
	}
	out.LastModified, _ = http.ParseTime(h.Get("Last-Modified"))
	return out, nil
}

// sha256OfDigest reads the sha-256 member of an RFC 9530 digest header as
// lowercase hex, or "" when there is none.
func sha256OfDigest(v string) string {
	for _, member := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(member), "=")
		if !ok || !strings.EqualFold(name, "sha-256") || len(val) < 2 || val[0] != ':' || val[len(val)-1] != ':' {
			continue
		}
		sum, err := base64.StdEncoding.DecodeString(val[1 : len(val)-1])
		if err == nil && len(sum) == 32 {
			return hex.EncodeToString(sum)
		}
	}
	return ""
}
