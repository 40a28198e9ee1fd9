package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/quota"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/render"
)

// CoreBackend runs the tools in the API server's own process: writes go
// through the admission core (keys, preconditions and problems exactly as
// for the REST routes), reads through the read gate, and each checks the
// scopes its operation needs there, as for the REST routes. Each call acts
// as the caller the HTTP door authenticated (agentfs.CallerFromContext:
// the request's subject, attribution and token scopes), so one
// CoreBackend, and one MCP server on it, serves every request of the /mcp
// door.
type CoreBackend struct {
	Core  *admission.Core
	Reads *reads.Gate
	// MaxUploadBytes bounds a write's content, as POST /v1/files does.
	MaxUploadBytes int64
	// Quota, when Limit.Bytes is positive, is charged for the bytes a write
	// stores, as a REST write's body is; reads and failed writes cost
	// nothing.
	Quota quota.Store
	Limit quota.Limit
	// Log hears what a call survives (a quota release that failed); nil
	// discards it.
	Log *slog.Logger
}

// errNoCaller is a call that did not come through the HTTP door's
// authentication: a bug, answered INTERNAL.
var errNoCaller = errors.New("mcpserver: a call without the caller the /mcp door authenticated")

// who is the caller of this call.
func (b *CoreBackend) who(ctx context.Context) (agentfs.Caller, error) {
	who, ok := agentfs.CallerFromContext(ctx)
	if !ok {
		return agentfs.Caller{}, errNoCaller
	}
	return who, nil
}

// writer is the caller of this write, its Key the tool's key.
func (b *CoreBackend) writer(ctx context.Context, key string) (agentfs.Caller, error) {
	who, err := b.who(ctx)
	who.Key = key
	return who, err
}

// Attribution is the caller's agent and run, for the tools that default
// to them (list_run_files, run_summary).
func (b *CoreBackend) Attribution(ctx context.Context) (agentID, runID string) {
	who, _ := agentfs.CallerFromContext(ctx)
	return who.By.AgentID, who.By.RunID
}

// problemOfCore converts the core's and the store's errors through the
// API's one error table.
func problemOfCore(err error) *Problem {
	var mp *Problem
	if errors.As(err, &mp) {
		return mp
	}
	p, _ := problem.From(err)
	return problemFromAPI(p)
}

func problemFromAPI(p *problem.Problem) *Problem {
	out := &Problem{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail, Code: p.Code,
		Retryable: p.Retryable, RequestID: p.RequestID, ExistingFileID: p.ExistingFileID,
		MissingParts: p.MissingParts, MissingScope: p.MissingScope, RetryAfterSeconds: int64(p.RetryAfter)}
	for _, fe := range p.Errors {
		out.Errors = append(out.Errors, FieldError{Field: fe.Field, Message: fe.Message})
	}
	return out
}

// fileResult reads the File a write answered, or the problem it recorded.
func fileResult(res idempotency.Result, err error) (*File, error) {
	return recorded[File](res, err, "file")
}

// recorded reads the T (named what) a write answered, or the problem it
// recorded.
func recorded[T any](res idempotency.Result, err error, what string) (*T, error) {
	if err != nil {
		return nil, problemOfCore(err)
	}
	if res.Status >= 400 {
		var p problem.Problem
		if err := json.Unmarshal(res.Body, &p); err != nil {
			return nil, fmt.Errorf("mcpserver: recorded problem: %w", err)
		}
		return nil, problemFromAPI(&p)
	}
	var v T
	if err := json.Unmarshal(res.Body, &v); err != nil {
		return nil, fmt.Errorf("mcpserver: recorded %s: %w", what, err)
	}
	return &v, nil
}

// FileAt finds the subject's live file at path.
func (b *CoreBackend) FileAt(ctx context.Context, path string) (*File, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	files, err := b.Reads.ListFiles(ctx, who, agentfs.FileFilter{Path: path, Limit: 1})
	if err != nil {
		return nil, problemOfCore(err)
	}
	if len(files) == 0 {
		return nil, notFound("no live file at " + path)
	}
	return fileOfDomain(b.Core, files[0]), nil
}

// fileOfDomain shows a stored file as the API does.
func fileOfDomain(core *admission.Core, f *agentfs.File) *File {
	out := render.File(core.PublicURL(), f)
	return &out
}

// Read reads a range of a live file's content.
func (b *CoreBackend) Read(ctx context.Context, r ReadRequest) (*Content, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	if r.Length < 1 {
		return nil, errors.New("mcpserver: Read of no bytes")
	}
	var f *agentfs.File
	if r.AsOf != "" {
		spec, perr := agentfs.ParsePoint("as_of", r.AsOf, who.Subject)
		if perr != nil {
			return nil, problemOfCore(perr)
		}
		f, err = b.Reads.ContentAsOf(ctx, who, r.FileID, spec)
	} else {
		f, err = b.Reads.Content(ctx, who, r.FileID)
	}
	if err != nil {
		return nil, problemOfCore(err)
	}
	return b.readBlob(ctx, f, r)
}

// ReadAt is FileAt and Read of the file found, in one Postgres query: the
// file that holds path now and bytes of its content (r.FileID and r.AsOf
// are not used). A NOT_FOUND problem when no live file holds path.
func (b *CoreBackend) ReadAt(ctx context.Context, path string, r ReadRequest) (*File, *Content, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, nil, err
	}
	if r.Length < 1 {
		return nil, nil, errors.New("mcpserver: Read of no bytes")
	}
	f, err := b.Reads.ContentAt(ctx, who, path)
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil, nil, notFound("no live file at " + path)
	}
	if err != nil {
		return nil, nil, problemOfCore(err)
	}
	c, err := b.readBlob(ctx, f, r)
	if err != nil {
		return nil, nil, err
	}
	c.live = f
	return fileOfDomain(b.Core, f), c, nil
}

// readBlob reads the bytes r asks for of f's content.
func (b *CoreBackend) readBlob(ctx context.Context, f *agentfs.File, r ReadRequest) (*Content, error) {
	out := &Content{Size: f.SizeBytes, ETag: f.ETag(), ContentType: f.ContentType, Data: []byte{}}
	start := min(r.Offset, f.SizeBytes)
	if r.Tail {
		start = max(0, f.SizeBytes-r.Length)
	}
	length := min(r.Length, f.SizeBytes-start)
	out.Offset = start
	if length <= 0 {
		return out, nil
	}
	blob, err := b.Reads.OpenBlob(ctx, f.BlobKey, start, length)
	if err != nil {
		return nil, problemOfCore(err)
	}
	defer blob.Close()
	buf := make([]byte, length) // the length is known: one allocation
	n, err := io.ReadFull(blob, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, problemOfCore(err)
	}
	out.Data = buf[:n]
	return out, nil
}

// List lists the subject's live files, newest first.
func (b *CoreBackend) List(ctx context.Context, f ListFilter) (*FileList, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	if f.AsOf != "" {
		return b.listAsOf(ctx, who, f)
	}
	filter := agentfs.FileFilter{Prefix: f.Prefix, Path: f.Path, RunID: f.RunID, AgentID: f.AgentID, Limit: f.Limit + 1}
	if f.Cursor != "" {
		cur, err := agentfs.ParseCursor(f.Cursor, "file")
		if err != nil {
			return nil, problemFromAPI(problem.Invalid("cursor", "is not a cursor this server issued"))
		}
		filter.After = &cur
	}
	files, err := b.Reads.ListFiles(ctx, who, filter)
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &FileList{Files: make([]File, 0, len(files))}
	if len(files) > f.Limit {
		files, out.HasMore = files[:f.Limit], true
		last := files[len(files)-1]
		out.NextCursor = agentfs.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
	}
	for _, file := range files {
		out.Files = append(out.Files, *fileOfDomain(b.Core, file))
	}
	return out, nil
}

// Folder lists one level of a folder through the read gate's listing by
// delimiter, paths only: one Postgres statement, no file rows read.
func (b *CoreBackend) Folder(ctx context.Context, prefix, cursor string, limit int) (*Folder, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	filter := agentfs.ChildFilter{Prefix: prefix, Limit: limit + 1, PathsOnly: true}
	if cursor != "" {
		if filter.After, err = agentfs.ParseChildCursor(cursor); err != nil {
			return nil, problemFromAPI(problem.Invalid("cursor", "is not a cursor this server issued"))
		}
	}
	entries, err := b.Reads.ListChildren(ctx, who, filter)
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &Folder{}
	if len(entries) > limit {
		entries, out.HasMore = entries[:limit], true
		out.NextCursor = agentfs.ChildCursor(entries[limit-1].Name())
	}
	for _, e := range entries {
		if e.File != nil {
			out.Files = append(out.Files, e.File.Path)
		} else {
			out.Folders = append(out.Folders, e.Prefix)
		}
	}
	return out, nil
}

// Put stores content at a path through the admission core, under the
// tool's idempotency key when it has one.
func (b *CoreBackend) Put(ctx context.Context, p PutArgs) (*File, error) {
	who, err := b.writer(ctx, p.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	put := agentfs.Put{Subject: who.Subject, Path: p.Path, ContentType: p.ContentType,
		Replace: p.IfExists == IfExistsReplace, IfMatch: p.IfMatch, Size: int64(len(p.Content)),
		MaxBytes: b.MaxUploadBytes, By: who.By}
	if p.ExpiresIn > 0 {
		put.ExpiresIn = secondsOf(p.ExpiresIn)
	}
	// The core decides a put against the live file at its path before
	// the bytes go to S3. A replace that a read of this call found its file
	// for (edit_file) is decided against that file: the commit's own check
	// (the file's version) stands for the lookup, one Postgres statement
	// fewer. Any other put is the core's Put, which skips the lookup for a
	// small put that only creates (storage.PreparePut), as every door's.
	commit := func(body io.Reader) (idempotency.Result, error) {
		if p.seen != nil && p.seen.live != nil && p.seen.live.Path == put.Path {
			return b.Core.PutAgainst(ctx, who, put, body, p.seen.live)
		}
		return b.Core.Put(ctx, who, put, body)
	}
	if b.Limit.Bytes <= 0 || len(p.Content) == 0 {
		return fileResult(commit(bytes.NewReader(p.Content)))
	}
	body := quota.NewBody(ctx, io.NopCloser(bytes.NewReader(p.Content)), b.Quota, who.Subject, b.Limit,
		func() bool { return b.replays(ctx, who) })
	if err := body.ReserveDeclared(put.Size); err != nil {
		return nil, problemOfCore(err)
	}
	res, err := commit(body)
	if serr := body.Settle(err == nil && res.Status < 300 && !res.Replayed); serr != nil && b.Log != nil {
		b.Log.WarnContext(ctx, "release quota", "err", serr)
	}
	return fileResult(res, err)
}

// replays reports whether who's key already holds a completed write,
// which stores nothing and so is never refused by the quota.
func (b *CoreBackend) replays(ctx context.Context, who agentfs.Caller) bool {
	if who.Key == "" {
		return false
	}
	rec, err := b.Core.Operation(ctx, who.Subject, who.Key)
	return err == nil && rec.Completed
}

// Delete soft-deletes a file through the admission core.
func (b *CoreBackend) Delete(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return fileResult(b.Core.Delete(ctx, who, fileID, w.IfMatch))
}

// Restore undoes a delete through the admission core.
func (b *CoreBackend) Restore(ctx context.Context, fileID string, w WriteOptions) (*File, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return fileResult(b.Core.Restore(ctx, who, fileID))
}

// Move gives a file another path through the admission core, never
// replacing a live file there.
func (b *CoreBackend) Move(ctx context.Context, fileID, destination string, w WriteOptions) (*File, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return fileResult(b.Core.Move(ctx, who,
		agentfs.Move{FileID: fileID, Path: destination, IfMatch: w.IfMatch}))
}

// Versions lists one page of a file's versions, newest first.
func (b *CoreBackend) Versions(ctx context.Context, fileID string, page VersionPage) (*VersionList, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	filter := agentfs.VersionFilter{Limit: page.Limit + 1}
	if page.Cursor != "" {
		n, err := strconv.Atoi(page.Cursor)
		if err != nil || n < 1 {
			return nil, problemFromAPI(problem.Invalid("cursor", "is not a cursor this server issued"))
		}
		filter.Before = n
	}
	versions, err := b.Reads.Versions(ctx, who, fileID, filter)
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &VersionList{Versions: make([]FileVersion, 0, min(len(versions), page.Limit))}
	if len(versions) > page.Limit {
		versions, out.HasMore = versions[:page.Limit], true
		out.NextCursor = strconv.Itoa(versions[page.Limit-1].Version)
	}
	for _, v := range versions {
		out.Versions = append(out.Versions, render.FileVersion(b.Core.PublicURL(), v))
	}
	return out, nil
}

// Revert makes a version's content current through the admission core.
func (b *CoreBackend) Revert(ctx context.Context, fileID string, version int64, w WriteOptions) (*File, error) {
	who, err := b.writer(ctx, w.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if version < 1 || version > maxVersion {
		return nil, validation("version", "must be a version number, 1 or more")
	}
	return fileResult(b.Core.Revert(ctx, who,
		agentfs.Revert{FileID: fileID, Version: int(version), IfMatch: w.IfMatch}))
}

// Share makes a share link through the admission core.
func (b *CoreBackend) Share(ctx context.Context, fileID string, s ShareArgs) (*Link, error) {
	who, err := b.writer(ctx, s.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	req := agentfs.NewLink{FileID: fileID, ExpiresIn: agentfs.DefaultLinkExpiresIn}
	if s.ExpiresIn != 0 {
		req.ExpiresIn = secondsOf(s.ExpiresIn)
		if req.ExpiresIn < agentfs.MinLinkExpiresIn || req.ExpiresIn > agentfs.MaxLinkExpiresIn {
			return nil, validation("expires_in", "must be 60 to 604800 seconds")
		}
	}
	if s.Version < 0 || s.Version > maxVersion {
		return nil, validation("version", "must be a version number, 1 or more")
	}
	req.Version = int(s.Version)
	res, err := b.Core.CreateLink(ctx, who, req)
	if err != nil {
		return nil, problemOfCore(err)
	}
	if res.Status >= 400 {
		_, err := fileResult(res, nil)
		return nil, err
	}
	var l Link
	if err := json.Unmarshal(res.Body, &l); err != nil {
		return nil, fmt.Errorf("mcpserver: recorded link: %w", err)
	}
	return &l, nil
}

// Run summarizes what a run did, from its events.
func (b *CoreBackend) Run(ctx context.Context, runID string) (*Run, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	if !agentfs.ValidTagValue(runID) {
		return nil, validation("run_id", tagValueSyntax)
	}
	r, err := b.Reads.RunSummary(ctx, who, runID)
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := render.Run(r)
	return &out, nil
}

// Search is one page of a content search, through the read gate.
func (b *CoreBackend) Search(ctx context.Context, pattern string, opts SearchOptions) (*SearchPage, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	q := agentfs.Search{Pattern: pattern, Literal: opts.Literal, IgnoreCase: opts.IgnoreCase, Prefix: opts.Prefix,
		Glob: opts.Glob, RunID: opts.RunID, Context: opts.Context, Limit: cmp.Or(opts.Limit, 100)}
	page, next, err := b.Reads.Search(ctx, who, q, opts.Cursor)
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := render.SearchResults(page, next)
	return &out, nil
}

// Operation says what a key holds for the subject, or nil for nothing.
func (b *CoreBackend) Operation(ctx context.Context, key string) (*Operation, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := b.Reads.Operation(ctx, who, key)
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := &Operation{Key: key, Status: OperationInProgress, Op: opOf(rec.Method, rec.Route)}
	if rec.Abandoned {
		out.Status = OperationAbandoned
	}
	if !rec.Completed {
		return out, nil
	}
	out.Status = OperationCompleted
	f, err := fileResult(idempotency.Result{Outcome: rec.Outcome}, nil)
	var p *Problem
	switch {
	case errors.As(err, &p):
		out.Problem = p
	case err != nil:
		return nil, err
	case recordsFile(out.Op):
		out.File = f
	}
	return out, nil
}

func secondsOf(n int64) time.Duration { return time.Duration(n) * time.Second }
