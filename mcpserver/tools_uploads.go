package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/problem"
)

// UploadsBackend finishes or ends an upload session another worker began
// (DESIGN §7, §25): what run_recovery names for a dead worker's sessions.
// Parts carry bytes, which no tool sends; a session missing parts is
// ended and its file written with write_file instead.
type UploadsBackend interface {
	// CompleteUpload assembles a session's parts into its file (POST
	// /v1/uploads/{id}/complete), waiting while the server finishes it in
	// the background; repeating it answers the same file.
	CompleteUpload(ctx context.Context, uploadID string, w WriteOptions) (*File, error)
	// AbortUpload ends a session without a file and drops its parts
	// (DELETE /v1/uploads/{id}); repeating it is safe.
	AbortUpload(ctx context.Context, uploadID string, w WriteOptions) (*Upload, error)
}

// Upload is an upload session (schema Upload of openapi.yaml).
type Upload = client.Upload

type uploadIDIn struct {
	UploadID string `json:"upload_id" jsonschema:"the upload session, e.g. upl_01jd8x2m4k9q7v3t5r6w8y0z1a (run_recovery names it)"`
}

func uploadIDSchema(s *jsonschema.Schema) {
	s.Properties["upload_id"].MinLength = ptr(1)
	s.Properties["upload_id"].MaxLength = ptr(64)
}

// endUploadTool is a tool that ends the upload session in.UploadID with
// end (complete_upload, abort_upload): the call counts for the path the
// session wrote or would have, and text says what came of it.
func endUploadTool[T any](name string, end func(UploadsBackend, context.Context, string, WriteOptions) (*T, error),
	path func(*T) string, text func(in *uploadIDIn, v *T) string) *toolSpec {
	return define(tool(name), uploadIDSchema, func(ctx context.Context, tb *toolbox, in *uploadIDIn, cc *callContext) (*reply[T], error) {
		v, err := end(tb.b, ctx, in.UploadID, WriteOptions{})
		if err != nil {
			return nil, err
		}
		cc.path = path(v)
		return &reply[T]{Text: text(in, v), Out: *v}, nil
	})
}

func completeUploadTool() *toolSpec {
	return endUploadTool("complete_upload", UploadsBackend.CompleteUpload, func(f *File) string { return f.Path },
		func(in *uploadIDIn, f *File) string { return "Completed " + in.UploadID + ": " + summarize(f) })
}

func abortUploadTool() *toolSpec {
	return endUploadTool("abort_upload", UploadsBackend.AbortUpload, func(u *Upload) string { return u.Path },
		func(_ *uploadIDIn, u *Upload) string {
			if u.Status == agentfs.UploadCompleted {
				return fmt.Sprintf("Upload %s (%s) had completed already: its file stays; nothing was aborted.", u.ID, u.Path)
			}
			return fmt.Sprintf("Upload %s (%s) is %s; it writes no file.", u.ID, u.Path, u.Status)
		})
}

// completeWait bounds how long CoreBackend.CompleteUpload waits for a
// session the server finishes in the background (DESIGN §7: 202).
const completeWait = 30 * time.Second

// CompleteUpload completes a session through the admission core; while
// the server finishes it in the background (202), it asks again (a
// complete is safe to repeat) until the file is there.
func (b *CoreBackend) CompleteUpload(ctx context.Context, uploadID string, w WriteOptions) (*File, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(completeWait)
	for {
		res, err := b.Core.CompleteUpload(ctx, who, uploadID, agentfs.CompleteRequest{})
		if err != nil || res.Status != http.StatusAccepted {
			return fileResult(res, err)
		}
		if time.Now().After(deadline) {
			p := problem.New(problem.OperationInProgress, uploadID+" is still being completed in the background: call complete_upload again")
			p.RetryAfter = 5
			return nil, problemFromAPI(p)
		}
		select {
		case <-ctx.Done():
			return nil, problemOfCore(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// AbortUpload ends a session through the admission core.
func (b *CoreBackend) AbortUpload(ctx context.Context, uploadID string, w WriteOptions) (*Upload, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	res, err := b.Core.AbortUpload(ctx, who, uploadID)
	return recorded[Upload](res, err, "upload")
}

// CompleteUpload completes a session through the Go client, which waits
// for a background completion.
func (cb *ClientBackend) CompleteUpload(ctx context.Context, uploadID string, w WriteOptions) (*File, error) {
	return keyed(w, func(key string) (*File, error) {
		return cb.c.CompleteUpload(ctx, uploadID, client.CompleteOptions{IdempotencyKey: key})
	})
}

// AbortUpload ends a session through the Go client.
func (cb *ClientBackend) AbortUpload(ctx context.Context, uploadID string, w WriteOptions) (*Upload, error) {
	return keyed(w, func(key string) (*Upload, error) {
		return cb.c.AbortUpload(ctx, uploadID, client.AbortOptions{IdempotencyKey: key})
	})
}
