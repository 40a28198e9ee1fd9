package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
)

// ClientBackend runs the tools against an AgentFS server through the Go
// client, so the client's retry policy applies to every call: it is the
// backend of `agentfs mcp`. The client's token is the subject, its agent
// and run ids the attribution.
type ClientBackend struct {
	c *client.Client
}

// NewClientBackend returns a backend over c.
func NewClientBackend(c *client.Client) (*ClientBackend, error) {
	if c == nil {
		return nil, errors.New("mcpserver: nil client")
	}
	return &ClientBackend{c: c}, nil
}

// FileAt finds the live file at path (GET /v1/files?path=).
func (cb *ClientBackend) FileAt(ctx context.Context, path string) (*File, error) {
	page, err := cb.c.ListFiles(ctx, client.ListOptions{Path: path, Limit: 1})
	if err != nil {
		return nil, problemOf(err, "")
	}
	if len(page.Data) == 0 {
		return nil, notFound("no live file at " + path)
	}
	return &page.Data[0], nil
}

// Read reads a range of a live file (GET /v1/files/{id}/content with
// Range), at most r.Length bytes.
func (cb *ClientBackend) Read(ctx context.Context, r ReadRequest) (*Content, error) {
	if r.Length < 1 {
		return nil, errors.New("mcpserver: Read of no bytes")
	}
	rng := fmt.Sprintf("bytes=%d-%d", r.Offset, r.Offset+r.Length-1)
	if r.Tail {
		rng = fmt.Sprintf("bytes=-%d", r.Length)
	}
	open := func(opts client.ContentOptions) (*client.Content, error) {
		if r.AsOf != "" {
			return cb.c.FileContentAsOf(ctx, r.FileID, r.AsOf, opts)
		}
		return cb.c.FileContent(ctx, r.FileID, opts)
	}
	content, err := open(client.ContentOptions{Range: rng})
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusRequestedRangeNotSatisfiable {
		// An empty file has no byte to name: read it whole.
		content, err = open(client.ContentOptions{})
	}
	if err != nil {
		return nil, problemOf(err, "")
	}
	defer content.Close()
	// One byte more than asked tells a cut from a whole file even when the
	// response does not say its length.
	data, err := io.ReadAll(io.LimitReader(content, r.Length+1))
	if err != nil {
		return nil, problemOf(err, "")
	}
	out := &Content{Data: data, Size: int64(len(data)), ETag: content.ETag, ContentType: content.ContentType}
	if int64(len(data)) > r.Length {
		out.Data = data[:r.Length]
	}
	if content.Status == http.StatusPartialContent {
		out.Offset, out.Size = parseContentRange(content.ContentRange)
	} else if content.Length > 0 {
		out.Size = content.Length
	}
	return out, nil
}

// parseContentRange reads "bytes a-b/size".
func parseContentRange(v string) (start, size int64) {
	v = strings.TrimPrefix(v, "bytes ")
	rng, total, _ := strings.Cut(v, "/")
	first, _, _ := strings.Cut(rng, "-")
	start, _ = strconv.ParseInt(first, 10, 64)
	size, _ = strconv.ParseInt(total, 10, 64)
	return start, size
}

// List lists live files (GET /v1/files).
func (cb *ClientBackend) List(ctx context.Context, f ListFilter) (*FileList, error) {
	opts := client.ListOptions{Prefix: f.Prefix, Path: f.Path, RunID: f.RunID, AgentID: f.AgentID, Limit: f.Limit, Cursor: f.Cursor}
	if f.AsOf != "" { // an as-of listing takes a prefix only
		opts = client.ListOptions{Prefix: cmp.Or(f.Path, f.Prefix), Limit: f.Limit, Cursor: f.Cursor, AsOf: f.AsOf}
	}
	page, err := cb.c.ListFiles(ctx, opts)
	if err != nil {
		return nil, problemOf(err, "")
	}
	if f.AsOf != "" && f.Path != "" {
		page.Data = slices.DeleteFunc(page.Data, func(x client.File) bool { return x.Path != f.Path })
	}
	out := &FileList{Files: page.Data, HasMore: page.HasMore}
	if page.NextCursor != nil {
		out.NextCursor = *page.NextCursor
	}
	return out, nil
}

// Folder lists one level of a folder (GET /v1/files?delimiter=/), asking
// for the files' paths only.
func (cb *ClientBackend) Folder(ctx context.Context, prefix, cursor string, limit int) (*Folder, error) {
	page, err := cb.c.ListFolder(ctx, prefix, client.FolderOptions{Limit: limit, Cursor: cursor, Fields: []string{"path"}})
	if err != nil {
		return nil, problemOf(err, "")
	}
	out := &Folder{Folders: page.Prefixes, HasMore: page.HasMore}
	for _, f := range page.Data {
		out.Files = append(out.Files, f.Path)
	}
	if page.NextCursor != nil {
		out.NextCursor = *page.NextCursor
	}
	return out, nil
}

// Put uploads the content (POST /v1/files). Without a key it generates
// one, the same for every retry of this call, so the client's retries can
// never write twice; a call whose outcome stays unknown reports that key.
func (cb *ClientBackend) Put(ctx context.Context, p PutArgs) (*File, error) {
	key := cmp.Or(p.IdempotencyKey, client.NewIdempotencyKey())
	f, err := cb.c.PutFile(ctx, p.Path, bytes.NewReader(p.Content), client.PutOptions{
		Replace: p.IfExists == IfExistsReplace, IfMatch: p.IfMatch, ContentType: p.ContentType, IdempotencyKey: key,
		ExpiresIn: time.Duration(p.ExpiresIn) * time.Second})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return f, nil
}

// keyed runs call with w's idempotency key, or a new one (so that the
// client's retries of this one call are one write), and words its
// failure for that key (problemOf).
func keyed[T any](w WriteOptions, call func(key string) (*T, error)) (*T, error) {
	key := cmp.Or(w.IdempotencyKey, client.NewIdempotencyKey())
	v, err := call(key)
	if err != nil {
		return nil, problemOf(err, key)
	}
	return v, nil
}

// Delete soft-deletes a file (DELETE /v1/files/{id}).
func (cb *ClientBackend) Delete(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	return keyed(w, func(key string) (*File, error) {
		return cb.c.DeleteFile(ctx, fileID, client.DeleteOptions{IfMatch: w.IfMatch, IdempotencyKey: key})
	})
}

// Restore undoes a delete (POST /v1/files/{id}/restore).
func (cb *ClientBackend) Restore(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	return keyed(w, func(key string) (*File, error) {
		return cb.c.RestoreFile(ctx, fileID, client.RestoreOptions{IdempotencyKey: key})
	})
}

// Operation asks what a key holds (GET /v1/operations/{key}).
func (cb *ClientBackend) Operation(ctx context.Context, key string) (*Operation, error) {
	op, err := cb.c.Operation(ctx, key)
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, problemOf(err, "")
	}
	out := &Operation{Key: key, Status: op.Status, Op: opOf(op.Method, op.Route)}
	if op.Status != client.OperationCompleted {
		return out, nil
	}
	var f File
	err = op.Outcome(&f)
	switch {
	case errors.As(err, &p):
		out.Problem = problemOf(p, "")
	case err != nil:
		return nil, problemOf(err, "")
	case recordsFile(out.Op):
		out.File = &f
	}
	return out, nil
}

// Move gives a file another path (POST /v1/files/{id}/move), never
// replacing a live file there.
func (cb *ClientBackend) Move(ctx context.Context, fileID, destination string, w WriteOptions) (*File, error) {
	return keyed(w, func(key string) (*File, error) {
		return cb.c.Move(ctx, fileID, destination, client.MoveOptions{IfMatch: w.IfMatch, IdempotencyKey: key})
	})
}

// Versions lists a file's versions (GET /v1/files/{id}/versions).
func (cb *ClientBackend) Versions(ctx context.Context, fileID string, page VersionPage) (*VersionList, error) {
	l, err := cb.c.ListVersions(ctx, fileID, client.VersionListOptions{Limit: page.Limit, Cursor: page.Cursor})
	if err != nil {
		return nil, problemOf(err, "")
	}
	out := &VersionList{Versions: l.Data, HasMore: l.HasMore}
	if l.NextCursor != nil {
		out.NextCursor = *l.NextCursor
	}
	return out, nil
}

// Revert makes a version's content current (POST /v1/files/{id}/revert).
func (cb *ClientBackend) Revert(ctx context.Context, fileID string, version int64, w WriteOptions) (*File, error) {
	return keyed(w, func(key string) (*File, error) {
		return cb.c.Revert(ctx, fileID, version, client.RevertOptions{IfMatch: w.IfMatch, IdempotencyKey: key})
	})
}

// Share makes a share link (POST /v1/files/{id}/links). The generated key
// makes the client's retries of one call answer one link.
func (cb *ClientBackend) Share(ctx context.Context, fileID string, s ShareArgs) (*Link, error) {
	if s.ExpiresIn < 0 || s.Version < 0 {
		return nil, errors.New("mcpserver: Share with a negative expiry or version")
	}
	key := cmp.Or(s.IdempotencyKey, client.NewIdempotencyKey())
	l, err := cb.c.CreateLink(ctx, fileID, client.LinkOptions{ExpiresIn: time.Duration(s.ExpiresIn) * time.Second,
		Version: s.Version, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	out := &Link{ID: l.ID, Object: l.Object, FileID: l.FileID, Version: l.Version, ExpiresAt: l.ExpiresAt,
		RevokedAt: l.RevokedAt, CreatedAt: l.CreatedAt}
	if l.URL != nil {
		out.URL = *l.URL
	}
	return out, nil
}

// Run summarizes a run (GET /v1/runs/{run_id}).
func (cb *ClientBackend) Run(ctx context.Context, runID string) (*Run, error) {
	if !agentfs.ValidTagValue(runID) {
		return nil, validation("run_id", tagValueSyntax)
	}
	r, err := cb.c.Run(ctx, runID)
	if err != nil {
		return nil, problemOf(err, "")
	}
	if r.AgentIDs == nil {
		r.AgentIDs = []string{}
	}
	return r, nil
}

// Search is one page of a content search (GET /v1/search).
func (cb *ClientBackend) Search(ctx context.Context, pattern string, opts SearchOptions) (*SearchPage, error) {
	page, err := cb.c.Search(ctx, pattern, opts)
	if err != nil {
		return nil, problemOf(err, "")
	}
	return page, nil
}

// problemOf converts the client's errors: the server's problem as it is;
// anything else (the server unreachable after the client's retries, a
// cancelled call) as UNREACHABLE, whose outcome is unknown, carrying key,
// the idempotency key of the write, if any.
func problemOf(err error, key string) *Problem {
	var cp *client.Problem
	if errors.As(err, &cp) {
		p := &Problem{Type: cp.Type, Title: cp.Title, Status: cp.Status, Detail: cp.Detail, Code: cp.Code,
			Retryable: cp.Retryable, RequestID: cp.RequestID, ExistingFileID: cp.ExistingFileID,
			MissingParts: cp.MissingParts, MissingScope: cp.MissingScope, RetryAfterSeconds: int64(cp.RetryAfter.Seconds())}
		for _, fe := range cp.Errors {
			p.Errors = append(p.Errors, FieldError{Field: fe.Field, Message: fe.Message})
		}
		if p.Code == "" { // not a problem document (a proxy's page, say)
			p.Code = CodeUnreachable
			p.Type = "/problems/" + p.Code
		}
		if p.Retryable {
			p.IdempotencyKey = key
		}
		return p
	}
	detail := "AgentFS did not answer: " + err.Error()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		detail = "the call ended before AgentFS answered"
	}
	p := NewProblem(http.StatusServiceUnavailable, CodeUnreachable, detail)
	p.IdempotencyKey = key
	return p
}
