package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

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
	return fileOf(&page.Data[0]), nil
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
	content, err := cb.c.FileContent(ctx, r.FileID, client.ContentOptions{Range: rng})
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusRequestedRangeNotSatisfiable {
		// An empty file has no byte to name: read it whole.
		content, err = cb.c.FileContent(ctx, r.FileID, client.ContentOptions{})
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
	page, err := cb.c.ListFiles(ctx, client.ListOptions{Prefix: f.Prefix, Path: f.Path, RunID: f.RunID,
		AgentID: f.AgentID, Limit: f.Limit, Cursor: f.Cursor})
	if err != nil {
		return nil, problemOf(err, "")
	}
	out := &FileList{Files: make([]File, 0, len(page.Data)), HasMore: page.HasMore}
	for i := range page.Data {
		out.Files = append(out.Files, *fileOf(&page.Data[i]))
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
	if p.ExpiresIn != 0 {
		return nil, validation("expires_in", "this AgentFS server does not support file expiry yet; omit expires_in")
	}
	key := cmpOr(p.IdempotencyKey, client.NewIdempotencyKey())
	f, err := cb.c.PutFile(ctx, p.Path, bytes.NewReader(p.Content), client.PutOptions{
		Replace: p.IfExists == IfExistsReplace, IfMatch: p.IfMatch, ContentType: p.ContentType, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return fileOf(f), nil
}

// Delete soft-deletes a file (DELETE /v1/files/{id}).
func (cb *ClientBackend) Delete(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	key := cmpOr(w.IdempotencyKey, client.NewIdempotencyKey())
	f, err := cb.c.DeleteFile(ctx, fileID, client.DeleteOptions{IfMatch: w.IfMatch, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return fileOf(f), nil
}

// Restore undoes a delete (POST /v1/files/{id}/restore).
func (cb *ClientBackend) Restore(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	key := cmpOr(w.IdempotencyKey, client.NewIdempotencyKey())
	f, err := cb.c.RestoreFile(ctx, fileID, client.RestoreOptions{IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return fileOf(f), nil
}

// clientOps names the operations of the routes the tools write through,
// as GET /v1/operations/{key} reports them.
var clientOps = map[string]string{
	"POST /v1/files":             OpPut,
	"DELETE /v1/files/:id":       OpDelete,
	"POST /v1/files/:id/restore": OpRestore,
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
	out := &Operation{Key: key, Status: op.Status, Op: clientOps[op.Method+" "+op.Route]}
	if out.Op == "" {
		out.Op = op.Method + " " + op.Route
	}
	if op.Status != client.OperationCompleted {
		return out, nil
	}
	var f client.File
	err = op.Outcome(&f)
	switch {
	case errors.As(err, &p):
		out.Problem = problemOf(p, "")
	case err != nil:
		return nil, problemOf(err, "")
	case out.Op == OpPut || out.Op == OpDelete || out.Op == OpRestore:
		out.File = fileOf(&f)
	}
	return out, nil
}

// fileOf converts the client's File.
func fileOf(f *client.File) *File {
	return &File{ID: f.ID, Object: f.Object, Path: f.Path, SizeBytes: f.SizeBytes, ContentType: f.ContentType,
		SHA256: f.SHA256, ETag: f.ETag, Version: f.Version, URL: f.URL, AgentID: f.AgentID, RunID: f.RunID,
		LastAgentID: f.LastAgentID, LastRunID: f.LastRunID, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt,
		DeletedAt: f.DeletedAt, PurgeAfter: f.PurgeAfter, Blocked: f.Blocked}
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
			MissingParts: cp.MissingParts, RetryAfterSeconds: int64(cp.RetryAfter.Seconds())}
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
