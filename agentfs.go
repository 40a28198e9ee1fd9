// Package agentfs holds the domain vocabulary of AgentFS: files, subjects,
// the errors every layer speaks, and the embedded API contract. Adapters
// (storage, handlers, the CLI) import it; it imports none of them.
package agentfs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// OpenAPI is the API contract served at /openapi.yaml; tests hold the
// router and every response to it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// File is a stored file as the API shows it. Its content lives in an
// immutable blob; a replace points the file at a new blob.
type File struct {
	ID          string
	Subject     string
	Path        string
	SizeBytes   int64
	ContentType string
	SHA256      string // lowercase hex of the whole content
	Version     int
	BlobKey     string
	AgentID     string // of the creating request
	RunID       string
	LastAgentID string // of the latest write
	LastRunID   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeletedAt   *time.Time // also set once ExpiresAt passed, before the sweeper records it
	PurgeAfter  *time.Time
	ExpiresAt   *time.Time
	Blocked     bool
	BlockReason string
	// Mode is the file's POSIX permission bits (0644 unless set), MTime
	// the client's modification time (UpdatedAt unless set) and Kind what
	// a mount shows it as (KindFile, KindSymlink, KindDirectory).
	Mode  int
	MTime time.Time
	Kind  string
	// ForkedFromID and ForkedFromVersion name the file and version a
	// fork copied this file from ("" and 0: not a fork's copy).
	ForkedFromID      string
	ForkedFromVersion int
}

// ETag names the file's content: the quoted SHA-256 hex, so the same bytes
// always carry the same etag.
func (f *File) ETag() string { return `"` + f.SHA256 + `"` }

// Live reports whether the file is not deleted.
func (f *File) Live() bool { return f.DeletedAt == nil }

// Attribution is who asked for a write: the optional X-Agent-ID and X-Run-ID
// headers, stored on what the request creates and tagged on its blobs.
type Attribution struct {
	AgentID string
	RunID   string
}

// Caller is who asks for a write or a read, with what its token may do,
// and under which Idempotency-Key: what every door (an HTTP route, a batch
// item, an MCP tool) hands the admission core with the write itself, and
// the read gate with a read. Both check the operation against the grant
// (Allow) before anything runs, and hold what it touches to the grant's
// prefixes.
type Caller struct {
	Subject string
	// Grant is what the caller's token may do.
	Grant Grant
	// Key is the Idempotency-Key, "" for a write without one.
	Key string
	By  Attribution
	// TokenID is the token the request came with (Principal.TokenID): a
	// replayed secret is shown only to it.
	TokenID string
	// RequestID names the request that carries the write, for what the
	// write records (events, the problems of batch items).
	RequestID string
	// RequestURI is the path and query of the REST request that carries
	// the write ("" at the other doors): its key records it, so a run's
	// recovery names the exact request to send again when the write's
	// claim was abandoned.
	RequestURI string
}

// Sentinel errors shared by storage and handlers; problem maps them to
// statuses and codes.
var (
	ErrNotFound           = errors.New("not found")
	ErrPreconditionFailed = errors.New("precondition failed")
	ErrUnavailable        = errors.New("storage unavailable")
	ErrChecksumMismatch   = errors.New("checksum mismatch")
	ErrTooLarge           = errors.New("payload too large")
	ErrBlocked            = errors.New("content blocked")
	// ErrBodyStalled says the request body stopped arriving for longer than
	// the idle limit.
	ErrBodyStalled = errors.New("request body stalled")
	// ErrBadBody says the request body could not be read (a malformed
	// chunked encoding, a client gone mid-body).
	ErrBadBody = errors.New("request body unreadable")
)

// BodyError classifies a failure to read a request body: too large,
// stalled, over the quota and unavailable (the quota could not be
// reserved) keep their meaning; anything else (a malformed chunked
// encoding, a client gone mid-body) is ErrBadBody.
func BodyError(err error) error {
	var (
		tooBig *http.MaxBytesError
		quota  *QuotaExceededError
	)
	if err == nil || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBodyStalled) || errors.Is(err, ErrUnavailable) ||
		errors.As(err, &tooBig) || errors.As(err, &quota) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadBody, err)
}

// QuotaExceededError says a write would take its subject past the bytes it
// may write per window (the byte quota, kept across instances): refused
// before its body is read when its declared length does not fit, or cut
// off when a body of unknown length outgrows what is left. Nothing of the
// write is stored. RetryAfter is how long until the window ends and the
// quota is whole again.
type QuotaExceededError struct {
	Used, Limit int64 // bytes reserved in the window, and the quota
	Window      time.Duration
	RetryAfter  time.Duration
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("byte quota exceeded: %d of %d bytes per %v used", e.Used, e.Limit, e.Window)
}

// ConflictError says an Idempotency-Key was used for a different request.
type ConflictError struct{ Key string }

func (e *ConflictError) Error() string {
	return "Idempotency-Key " + e.Key + " was used for a different request"
}

// InProgressError says the first request with an Idempotency-Key is still
// running; RetryAfter is how long until it may have finished.
type InProgressError struct {
	Key        string
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return "a request with Idempotency-Key " + e.Key + " is in progress"
}

// PathExistsError says a live file already holds the path.
type PathExistsError struct {
	Path           string
	ExistingFileID string
}

func (e *PathExistsError) Error() string {
	return fmt.Sprintf("path %q is held by live file %s", e.Path, e.ExistingFileID)
}

// BlockedError says an operator blocked the file; Reason is shown to callers.
type BlockedError struct {
	FileID string
	Reason string
}

func (e *BlockedError) Error() string { return "file " + e.FileID + " is blocked: " + e.Reason }

// Is lets errors.Is(err, ErrBlocked) match.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

type callerKey struct{}

// ContextWithCaller returns ctx carrying the request's caller (with its
// token's scopes), for a door that is served below the HTTP door's
// authentication (the /mcp tools).
func ContextWithCaller(ctx context.Context, who Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, who)
}

// CallerFromContext returns the caller ContextWithCaller put in ctx; ok is
// false when there is none.
func CallerFromContext(ctx context.Context) (who Caller, ok bool) {
	who, ok = ctx.Value(callerKey{}).(Caller)
	return who, ok
}
