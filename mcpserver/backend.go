package mcpserver

import (
	"context"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
)

// Backend is what the tools need from AgentFS, in the domain's words: no
// HTTP types, so that the tools run the same over the Go client (the stdio
// door, ClientBackend) and in-process over the API server's admission core
// (the /mcp door). Every method acts as one subject, with the attribution
// (agent and run ids) that the backend was built with.
//
// Every error a method returns should be a *Problem: the backend converts
// its own failures into the API's problem (code, status, retryable, ...), so
// that a tool can tell the model what happened and what to do next. Any
// other error is answered as INTERNAL.
//
// The methods at the end (Move, Versions, Revert, Share, Run) serve the
// tools of file history, share links and the run ledger.
type Backend interface {
	// FileAt returns the live file at path, or a NOT_FOUND problem when
	// no live file holds it.
	FileAt(ctx context.Context, path string) (*File, error)
	// Read returns bytes of a live file's content: at most r.Length bytes
	// from r.Offset, or its last r.Length bytes when r.Tail is set. An empty
	// file reads as no bytes.
	Read(ctx context.Context, r ReadRequest) (*Content, error)
	// List returns one page of the subject's live files, newest first.
	List(ctx context.Context, f ListFilter) (*FileList, error)
	// Put stores content at a path (a new file, or a replace), under the
	// idempotency key of p when it has one.
	Put(ctx context.Context, p PutArgs) (*File, error)
	// Delete soft-deletes a file; deleting a deleted file is safe.
	Delete(ctx context.Context, fileID string, w WriteOptions) (*File, error)
	// Restore undoes a delete; restoring a live file is safe.
	Restore(ctx context.Context, fileID string, w WriteOptions) (*File, error)
	// Operation returns what an idempotency key holds for the subject, or
	// nil when it holds nothing (which proves that no write happened under
	// it).
	Operation(ctx context.Context, key string) (*Operation, error)

	// Move gives a live file the path destination, keeping its id, url,
	// version and history: a PATH_EXISTS problem (with ExistingFileID)
	// when a live file holds destination; moving a file to its own path
	// changes nothing.
	Move(ctx context.Context, fileID, destination string, w WriteOptions) (*File, error)
	// Versions returns one page of a file's versions, newest first.
	Versions(ctx context.Context, fileID string, page VersionPage) (*VersionList, error)
	// Revert makes version's content the live file's current content, as
	// a new version; content identical to the current one changes nothing.
	// A version that does not exist (or was dropped) is NOT_FOUND.
	Revert(ctx context.Context, fileID string, version int64, w WriteOptions) (*File, error)
	// Share makes a share link to a live file: a URL that serves its bytes
	// without a token until it expires. Every call makes a new link.
	Share(ctx context.Context, fileID string, s ShareArgs) (*Link, error)
	// Run summarizes what the run runID did, from its events; NOT_FOUND
	// when no event of the subject carries it.
	Run(ctx context.Context, runID string) (*Run, error)
	// Search answers one page of the lines of the subject's live text
	// files that match pattern (GET /v1/search).
	Search(ctx context.Context, pattern string, opts SearchOptions) (*SearchPage, error)
	PointsBackend
	ForksBackend
	RecoveryBackend
	UploadsBackend
}

// File is a stored file's metadata, with the API's field names (schema File
// of openapi.yaml): tools answer with it as their structured output. It is
// the Go client's type, which ClientBackend gets as it is and CoreBackend
// fills from the API's own.
type File = client.File

// FileList is one page of files, newest first.
type FileList struct {
	Files   []File
	HasMore bool
	// NextCursor continues the listing (ListFilter.Cursor); "" on the last
	// page.
	NextCursor string
}

// ListFilter selects the files List returns; filters combine with AND.
type ListFilter struct {
	// Prefix matches paths that start with it ("reports/").
	Prefix string
	// Path matches exactly one path.
	Path string
	// RunID and AgentID match the request that created the file.
	RunID   string
	AgentID string
	// Limit is the page size, 1-1000.
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
	// AsOf, when set, lists the files live at that point instead (in path
	// order; Prefix, Path, Limit and Cursor apply).
	AsOf string
}

// Folder is one page of a folder's entries, in byte order of their names:
// the paths of the live files directly in it and the folders below it.
type Folder struct {
	// Files are whole paths; Folders are prefixes (the folder's prefix, a
	// segment and "/").
	Files, Folders []string
	HasMore        bool
	// NextCursor continues the listing; "" on the last page.
	NextCursor string
}

// folderLister lists one level of a folder by delimiter, names only, one
// index seek per entry however much lies deeper (GET
// /v1/files?delimiter=/): what list_directory shows. A backend without it
// is listed by scanning every file under the folder.
type folderLister interface {
	Folder(ctx context.Context, prefix, cursor string, limit int) (*Folder, error)
}

// ReadRequest names the bytes Read returns.
type ReadRequest struct {
	FileID string
	// Offset is the first byte to read (ignored with Tail).
	Offset int64
	// Length is the most bytes to return.
	Length int64
	// Tail reads the last Length bytes instead.
	Tail bool
	// AsOf, when set, reads the content the file had at that point.
	AsOf string
}

// Content is bytes read from a file.
type Content struct {
	Data []byte
	// Offset is the position of Data[0] in the file.
	Offset int64
	// Size is the size of the whole content.
	Size int64
	// ETag names the content the bytes were read from; a conditional
	// replace with it fails if anyone wrote the file since.
	ETag        string
	ContentType string
	// live is the file the bytes were read of, as the store answered it
	// (CoreBackend.ReadAt): a write that replaces it is decided against it
	// (PutArgs.seen) instead of looking its path up again.
	live *agentfs.File
}

// If-exists policies of a put.
const (
	IfExistsError   = "error"
	IfExistsReplace = "replace"
)

// PutArgs is one write of a whole file.
type PutArgs struct {
	Path        string
	Content     []byte
	ContentType string
	// IfExists is IfExistsError (the default) or IfExistsReplace.
	IfExists string
	// IfMatch replaces only the live file with this etag (412 otherwise);
	// it needs IfExists replace.
	IfMatch string
	// ExpiresIn, when positive, makes the file expire after that many
	// seconds.
	ExpiresIn int64
	// IdempotencyKey names the write; a backend that retries generates one
	// when it is empty.
	IdempotencyKey string
	// seen is what a read of this call found at Path, when the write
	// replaces that file (edit_file): a backend that knows the file from
	// it need not look the path up again. Its IfMatch still decides.
	seen *Content
}

// WriteOptions adjust a write that acts on a file by id.
type WriteOptions struct {
	// IfMatch acts only while the file has this etag.
	IfMatch        string
	IdempotencyKey string
}

// Operation statuses.
const (
	OperationInProgress = "in_progress"
	OperationCompleted  = "completed"
	// OperationAbandoned: the claim's owner died with nothing recorded, so
	// the same key may be sent again.
	OperationAbandoned = "abandoned"
)

// Operations an idempotency key may hold (those the tools make).
const (
	OpPut     = "put"
	OpDelete  = "delete"
	OpRestore = "restore"
	OpMove    = "move"
	OpRevert  = "revert"
	OpShare   = "create_link"
)

// routeOps names the operations of the routes the tools write through, by
// the method and route a key records (and GET /v1/operations/{key}
// reports).
var routeOps = map[string]string{
	"POST /v1/files":             OpPut,
	"DELETE /v1/files/:id":       OpDelete,
	"POST /v1/files/:id/restore": OpRestore,
	"POST /v1/files/:id/move":    OpMove,
	"POST /v1/files/:id/revert":  OpRevert,
	"POST /v1/files/:id/links":   OpShare,
}

// opOf names the operation of a key's method and route: an Op constant,
// or "METHOD route" for a route the tools do not write through.
func opOf(method, route string) string {
	if op, ok := routeOps[method+" "+route]; ok {
		return op
	}
	return method + " " + route
}

// recordsFile says a completed op's recorded outcome is a File.
func recordsFile(op string) bool {
	return op == OpPut || op == OpDelete || op == OpRestore || op == OpMove || op == OpRevert
}

// Operation is what an idempotency key holds: the request that claimed it
// and, once completed, its recorded outcome.
type Operation struct {
	Key    string
	Status string // OperationInProgress, OperationCompleted or OperationAbandoned
	// Op names the operation that claimed the key: one of the Op
	// constants, or another operation's name.
	Op string
	// File is the recorded file of a completed successful write of a file
	// (put, delete, restore, move, revert); Problem the recorded failure.
	File    *File
	Problem *Problem
}

// VersionPage selects one page of a file's versions.
type VersionPage struct {
	// Limit is the page size, 1-1000.
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
}

// FileVersion is one version of a file's content, with the API's field
// names (schema FileVersion of openapi.yaml): the Go client's type.
type FileVersion = client.FileVersion

// VersionList is one page of a file's versions, newest first.
type VersionList struct {
	Versions []FileVersion
	HasMore  bool
	// NextCursor continues the listing (VersionPage.Cursor); "" on the
	// last page.
	NextCursor string
}

// ShareArgs adjust a new share link.
type ShareArgs struct {
	// ExpiresIn is how many seconds the link works (60 to 604800); zero
	// means the default, one hour.
	ExpiresIn int64
	// Version pins the link to one version; zero serves the file's current
	// content, whatever it is when the link is opened.
	Version int64
	// IdempotencyKey names the link's creation: a repeat with it answers
	// the same link and URL; a backend that retries generates one when it
	// is empty.
	IdempotencyKey string
}

// Link is a share link, with the API's field names (schema Link of
// openapi.yaml). Unlike the client's Link, whose URL is nil where the API
// leaves it out (listings), a Link here is always a new link's, with its
// URL.
type Link struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	FileID string `json:"file_id"`
	// Version is the version the link serves; nil: the current content.
	Version *int64 `json:"version"`
	// URL serves the bytes without a token. It holds the link's secret and
	// is only ever shown in the answer that created the link.
	URL       string     `json:"url"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// Run is what one run did, from its events, with the API's field names
// (schema Run of openapi.yaml): the Go client's type.
type Run = client.Run

// RunCounts are a run's effects on files, by kind.
type RunCounts = client.RunCounts
