// Package api holds the wire types of the HTTP API: every JSON object a
// route answers with, each documented as the response of its routes. It
// imports only the standard library, so that both sides can share it: the
// server renders these types (package render makes them from the domain's
// values), the Go client decodes them (its types are aliases of these),
// and a test holds them, openapi.yaml and the Python SDK's models to each
// other.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// File is the File object: the response of POST /v1/files, GET, HEAD and
// DELETE /v1/files/{id}, POST /v1/files/{id}/restore, /revert and /move,
// PATCH /v1/files/{id} and POST /v1/uploads/{id}/complete, and an element
// of every file listing.
type File struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Path        string `json:"path"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type"`
	// SHA256 is the lowercase hex SHA-256 of the whole content.
	SHA256 string `json:"sha256"`
	// ETag is the quoted SHA256, as the ETag header carries it.
	ETag    string `json:"etag"`
	Version int64  `json:"version"`
	// URL is the stable content URL; it survives replaces.
	URL string `json:"url"`
	// AgentID and RunID are those of the request that created the file
	// (what the listing filters match); nil when it sent none.
	AgentID *string `json:"agent_id"`
	RunID   *string `json:"run_id"`
	// LastAgentID and LastRunID are those of the latest write.
	LastAgentID *string    `json:"last_agent_id"`
	LastRunID   *string    `json:"last_run_id"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	DeletedAt   *time.Time `json:"deleted_at"`
	PurgeAfter  *time.Time `json:"purge_after"`
	// ExpiresAt is when the file stops being served and counts as
	// deleted; nil: never.
	ExpiresAt *time.Time `json:"expires_at"`
	Blocked   bool       `json:"blocked"`
	// Mode is the file's POSIX permission bits (0644 unless a write set
	// them), kept for a mount's chmod.
	Mode int32 `json:"mode"`
	// MTime is the client's modification time; updated_at unless a write
	// set it.
	MTime time.Time `json:"mtime"`
	// Kind is file, symlink (the content is the target) or directory (a
	// zero-byte marker that keeps an empty folder).
	Kind string `json:"kind"`
	// ForkedFrom names the file and version a fork copied this file from
	// (absent: not a fork's copy).
	ForkedFrom *FileVersionRef `json:"forked_from,omitempty"`
}

// FileVersionRef names one version of a file.
type FileVersionRef struct {
	FileID  string `json:"file_id"`
	Version int64  `json:"version"`
}

// FileList is a page of files, newest first: the response of
// GET /v1/files.
type FileList struct {
	Data    []File `json:"data"`
	HasMore bool   `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
	// Prefixes are the folders directly under the listing's prefix, with
	// delimiter=/ (each the prefix, a segment and "/", in byte order, paged
	// with Data); absent otherwise.
	Prefixes []string `json:"prefixes,omitempty"`
}

// Upload is the Upload object, a multipart upload session: a file of
// SizeBytes bytes sent in PartCount parts of PartSize bytes (the last
// holds the rest), then assembled into a file. The response of
// POST /v1/uploads, GET /v1/uploads/{id} and DELETE /v1/uploads/{id}.
type Upload struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Path        string `json:"path"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type"`
	// IfExists is "error" or "replace": what the complete does when a live
	// file holds the path.
	IfExists string `json:"if_exists"`
	// SHA256 is the whole file's SHA-256 declared at the start; nil when
	// none was.
	SHA256 *string `json:"sha256"`
	// PartSize is chosen by the server: every part but the last has
	// exactly this many bytes.
	PartSize  int64 `json:"part_size"`
	PartCount int   `json:"part_count"`
	// Status is one of the upload session states of the domain
	// (agentfs.UploadPending, ...): pending, completing, completed,
	// aborted, expired or failed.
	Status string `json:"status"`
	// Parts are the parts received so far, by part number: what a resume
	// need not send again. Their Object and UploadID are empty.
	Parts     []UploadPart `json:"parts"`
	ExpiresAt time.Time    `json:"expires_at"`
	// File is the file the session completed into; nil until completed.
	File *File `json:"file"`
	// Error is the problem that failed the session (CHECKSUM_MISMATCH);
	// nil unless failed.
	Error *Problem `json:"error"`
	// ExpiresIn is the expiry, in seconds, that the file gets when the
	// session completes; nil for none.
	ExpiresIn *int64    `json:"expires_in"`
	AgentID   *string   `json:"agent_id"`
	RunID     *string   `json:"run_id"`
	CreatedAt time.Time `json:"created_at"`
}

// UploadPart is the UploadPart object, one stored part of an upload
// session: the response of PUT /v1/uploads/{id}/parts/{n}, and (without
// Object and UploadID) an element of Upload.Parts.
type UploadPart struct {
	Object     string `json:"object,omitempty"`
	UploadID   string `json:"upload_id,omitempty"`
	PartNumber int    `json:"part_number"`
	SizeBytes  int64  `json:"size_bytes"`
	// SHA256 is the lowercase hex SHA-256 of the part as the server stored it.
	SHA256 string `json:"sha256"`
}

// UploadList is a page of upload sessions, newest first: the response of
// GET /v1/uploads.
type UploadList struct {
	Data    []Upload `json:"data"`
	HasMore bool     `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// Batch is the Batch object, many operations run in order in the
// background: the response of POST /v1/batch, GET /v1/batch/{id},
// POST /v1/batch/{id}/cancel and POST /v1/runs/{run_id}/revert.
type Batch struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Status is BatchQueued or BatchRunning until it is terminal:
	// BatchSucceeded, BatchPartiallySucceeded, BatchFailed or
	// BatchCanceled.
	Status string      `json:"status"`
	Counts BatchCounts `json:"counts"`
	// Items are the operations and their outcomes; nil (absent) in a
	// listing, which counts them only.
	Items       []BatchItem `json:"items,omitempty"`
	CreatedAt   time.Time   `json:"created_at"`
	StartedAt   *time.Time  `json:"started_at"`
	CompletedAt *time.Time  `json:"completed_at"`
}

// Batch and batch item states.
const (
	BatchQueued             = "queued"
	BatchRunning            = "running"
	BatchSucceeded          = "succeeded"
	BatchPartiallySucceeded = "partially_succeeded"
	BatchFailed             = "failed"
	BatchCanceled           = "canceled"
	BatchItemPending        = "pending"
	BatchItemSucceeded      = "succeeded"
	BatchItemFailed         = "failed"
	BatchItemCanceled       = "canceled"
)

// Terminal reports whether the batch has ended: every item has run, or
// the batch was canceled and nothing runs any more.
func (b *Batch) Terminal() bool {
	switch b.Status {
	case BatchSucceeded, BatchPartiallySucceeded, BatchFailed, BatchCanceled:
		return true
	}
	return false
}

// FailedItems returns the items that failed, in order.
func (b *Batch) FailedItems() []BatchItem {
	var out []BatchItem
	for _, it := range b.Items {
		if it.Status == BatchItemFailed {
			out = append(out, it)
		}
	}
	return out
}

// BatchCounts are a batch's items by status; Total is the sum of the rest.
type BatchCounts struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Pending   int `json:"pending"`
	// Canceled counts the items a cancel stopped before they ran.
	Canceled int `json:"canceled"`
}

// BatchItem is one operation of a batch and its outcome.
type BatchItem struct {
	// Index is the operation's position in the request, from 0.
	Index int    `json:"index"`
	Op    string `json:"op"`
	// Path is a put's or copy's target; nil for delete and restore.
	Path *string `json:"path"`
	// Status is BatchItemPending, BatchItemSucceeded, BatchItemFailed or
	// BatchItemCanceled.
	Status string `json:"status"`
	// Replayed: the put's idempotency_key already held this outcome.
	Replayed bool `json:"replayed"`
	// File is the file the item left; nil unless it succeeded.
	File *File `json:"file"`
	// Error is the problem a standalone request would have returned
	// (PATH_EXISTS, NOT_FOUND, ...); nil unless the item failed.
	Error *Problem `json:"error"`
}

// BatchList is a page of batches, newest first, without their items: the
// response of GET /v1/batch.
type BatchList struct {
	Data    []Batch `json:"data"`
	HasMore bool    `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// Operation is the Operation object, what an Idempotency-Key holds for
// the calling subject: the request that claimed it and, once completed,
// its recorded response. The response of GET /v1/operations/{key}.
type Operation struct {
	Object         string `json:"object"`
	IdempotencyKey string `json:"idempotency_key"`
	// Status is OperationInProgress, OperationCompleted or
	// OperationAbandoned.
	Status string `json:"status"`
	Method string `json:"method"`
	// Route is the server's route template, e.g. "/v1/files/:id/restore".
	Route string `json:"route"`
	// ResponseStatus and Response are the recorded answer; nil while in
	// progress. Outcome decodes them.
	ResponseStatus *int               `json:"response_status"`
	Response       json.RawMessage    `json:"response"`
	Resource       *OperationResource `json:"resource"`
	// Redacted names the members of Response shown null because they hold
	// a secret (a share link's url): only the request itself, sent again
	// with the same key by the token that made it, answers them.
	Redacted    []string   `json:"redacted"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

// Operation statuses.
const (
	OperationInProgress = "in_progress"
	OperationCompleted  = "completed"
	// OperationAbandoned is a claim whose owner died: its lease lapsed with
	// nothing recorded, so nothing happened under the key, and the same
	// request may be sent again with it (DESIGN §6).
	OperationAbandoned = "abandoned"
)

// errNotCompleted is Operation.Outcome's answer while a key is in progress.
var errNotCompleted = errors.New("the operation is still in progress")

// RecordedStatus is the status of a completed operation's recorded
// answer; a recorded error comes back as its *Problem.
func (o *Operation) RecordedStatus() (int, error) {
	if o.Status != OperationCompleted {
		return 0, errNotCompleted
	}
	if o.ResponseStatus == nil {
		return 0, errors.New("completed operation without a response status")
	}
	status := *o.ResponseStatus
	if status >= 400 {
		p := &Problem{}
		if err := json.Unmarshal(o.Response, p); err != nil {
			return 0, fmt.Errorf("recorded %d response: %w", status, err)
		}
		p.Status = status
		return 0, p
	}
	return status, nil
}

// Outcome decodes a completed operation's recorded response: a 2xx body
// into v (a *File for file writes), a recorded error as its *Problem.
func (o *Operation) Outcome(v any) error {
	status, err := o.RecordedStatus()
	if err != nil {
		return err
	}
	if err := json.NewDecoder(bytes.NewReader(o.Response)).Decode(v); err != nil {
		return fmt.Errorf("decode %d response: %w", status, err)
	}
	return nil
}

// OperationResource is the resource an operation produced or acted on.
type OperationResource struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// FileVersion is the FileVersion object, one version of a file's content
// (every write that changed the bytes or the content type made one): the
// response of GET /v1/files/{id}/versions/{n}, and an element of the
// version listing.
type FileVersion struct {
	Object      string `json:"object"`
	FileID      string `json:"file_id"`
	Version     int64  `json:"version"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type"`
	// SHA256 is the lowercase hex SHA-256 of this version's content.
	SHA256 string `json:"sha256"`
	// ETag is the quoted SHA256.
	ETag string `json:"etag"`
	// URL serves this version's bytes, with a token.
	URL string `json:"url"`
	// AgentID and RunID are those of the write that made this version.
	AgentID   *string   `json:"agent_id"`
	RunID     *string   `json:"run_id"`
	CreatedAt time.Time `json:"created_at"`
	// Current: this version is the file's content now.
	Current bool `json:"current"`
}

// VersionList is a page of a file's versions, newest first: the response
// of GET /v1/files/{id}/versions.
type VersionList struct {
	Data    []FileVersion `json:"data"`
	HasMore bool          `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// Link is the Link object, a share link (a URL that serves one file's
// content without a token until it expires or is revoked): the response
// of POST /v1/files/{id}/links (the only time URL is shown) and
// DELETE /v1/links/{id}, and an element of GET /v1/files/{id}/links.
type Link struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	FileID string `json:"file_id"`
	// Version is the version the link serves; nil: always the file's
	// current content.
	Version *int64 `json:"version"`
	// URL is PUBLIC_URL/s/{secret}. It is shown once, in the answer that
	// created the link (and a replay of it); listings never carry it.
	URL       *string    `json:"url"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// LinkList is a file's links, newest first: the response of
// GET /v1/files/{id}/links.
type LinkList struct {
	Data []Link `json:"data"`
}

// Event is the Event object, one effect on a file, committed in the same
// transaction as the effect itself: an element of GET /v1/events.
type Event struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Type is one of the Event* constants.
	Type   string `json:"type"`
	FileID string `json:"file_id"`
	Path   string `json:"path"`
	// PreviousPath is the path a move left; nil for other events.
	PreviousPath *string `json:"previous_path"`
	// Version, SizeBytes and SHA256 describe the content the event left;
	// nil for events that leave none (a delete, a purge).
	Version   *int64  `json:"version"`
	SizeBytes *int64  `json:"size_bytes"`
	SHA256    *string `json:"sha256"`
	// AgentID and RunID are those of the request that caused the event.
	AgentID        *string `json:"agent_id"`
	RunID          *string `json:"run_id"`
	IdempotencyKey *string `json:"idempotency_key"`
	RequestID      *string `json:"request_id"`
	// BatchID is the batch whose item caused the event, if any.
	BatchID *string   `json:"batch_id"`
	At      time.Time `json:"at"`
	// CheckpointID names the checkpoint of a checkpoint.created or
	// checkpoint.deleted event (whose file_id is empty and path is the
	// checkpoint's prefix); nil for file events.
	CheckpointID *string `json:"checkpoint_id"`
	// ForkID names the fork of an event a fork or a merge wrote, and
	// Origin says which ("fork" or "merge"); nil for every other event.
	ForkID *string `json:"fork_id"`
	Origin *string `json:"origin"`
}

// Event types (Event.Type).
const (
	EventFileCreated  = "file.created"
	EventFileReplaced = "file.replaced"
	EventFileDeleted  = "file.deleted"
	EventFileRestored = "file.restored"
	EventFileMoved    = "file.moved"
	EventFileReverted = "file.reverted"
	EventFileExpired  = "file.expired"
	EventFilePurged   = "file.purged"
	// Checkpoints (DESIGN §18) name no file.
	EventCheckpointCreated = "checkpoint.created"
	EventCheckpointDeleted = "checkpoint.deleted"
)

// EventList is a page of events, oldest first: the response of
// GET /v1/events.
type EventList struct {
	Data    []Event `json:"data"`
	HasMore bool    `json:"has_more"`
	// NextCursor is always set: the cursor to continue after this page,
	// or to wait for the next events when Data was empty.
	NextCursor string `json:"next_cursor"`
}

// Run is the Run object, what one run did, from its events: the response
// of GET /v1/runs/{run_id}.
type Run struct {
	Object string `json:"object"`
	RunID  string `json:"run_id"`
	// AgentIDs are the X-Agent-IDs its requests carried.
	AgentIDs []string  `json:"agent_ids"`
	FirstAt  time.Time `json:"first_at"`
	LastAt   time.Time `json:"last_at"`
	Counts   RunCounts `json:"counts"`
	// BytesWritten adds up the sizes of the versions its creates and
	// replaces made.
	BytesWritten int64 `json:"bytes_written"`
	// LiveFiles counts the files it created or last wrote that are live
	// now.
	LiveFiles int `json:"live_files"`
}

// RunList is a page of runs, newest activity first: the response of
// GET /v1/runs.
type RunList struct {
	Data    []Run `json:"data"`
	HasMore bool  `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// RunRevertPlan is what reverting a run would do, changing nothing: the
// response of POST /v1/runs/{run_id}/revert with dry_run. Its items are
// the revert batch's, newest change first.
type RunRevertPlan struct {
	Object string          `json:"object"`
	RunID  string          `json:"run_id"`
	Items  []RunRevertStep `json:"items"`
}

// RunRevertStep is one file of a run revert's plan: what the file becomes.
type RunRevertStep struct {
	FileID string `json:"file_id"`
	// Path is where the file is put back (for a delete, where it is).
	Path string `json:"path"`
	// Action is delete (the run created or restored it) or put_back (it
	// gets back its path, content and life from before the run).
	Action string `json:"action"`
	// Version is the version whose content it gets back; nil when the
	// run did not change its content.
	Version *int `json:"version"`
}

// RunCounts are a run's effects by kind.
type RunCounts struct {
	Created  int `json:"created"`
	Replaced int `json:"replaced"`
	Deleted  int `json:"deleted"`
	Restored int `json:"restored"`
	Moved    int `json:"moved"`
	Reverted int `json:"reverted"`
}

// Problem is an RFC 9457 problem document (application/problem+json): the
// body of every error answer, and the error of a failed upload session or
// batch item. Its Code is the stable thing to branch on; /problems/{code}
// explains each one. It is an error, so a client can return it as one.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	RequestID string `json:"request_id"`
	// Errors names the offending fields, with VALIDATION_FAILED and others.
	Errors []FieldError `json:"errors,omitempty"`
	// ExistingFileID is the live file holding the path, with PATH_EXISTS.
	ExistingFileID string `json:"existing_file_id,omitempty"`
	// MissingParts lists the parts an upload still lacks, with PARTS_MISSING.
	MissingParts []int `json:"missing_parts,omitempty"`
	// MissingScope names the scope the token lacks, with FORBIDDEN.
	MissingScope string `json:"missing_scope,omitempty"`
	// Conflicts lists every path changed on both sides, with MERGE_CONFLICT.
	Conflicts []MergeConflict `json:"conflicts,omitempty"`
	// RetryAfter is the answer's Retry-After header as a client read it
	// (zero when absent); it is no member of the document.
	RetryAfter time.Duration `json:"-"`
}

// Error reads like "409 PATH_EXISTS: a live file already holds path
// "a.txt" (request req_…)". It names no program: the program that prints
// it adds its own prefix, once.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", p.Status)
	if p.Code != "" {
		b.WriteString(" " + p.Code)
	}
	switch {
	case p.Detail != "":
		b.WriteString(": " + p.Detail)
	case p.Title != "":
		b.WriteString(": " + p.Title)
	}
	if p.ExistingFileID != "" {
		b.WriteString(" (existing_file_id " + p.ExistingFileID + ")")
	}
	if p.RequestID != "" {
		b.WriteString(" (request " + p.RequestID + ")")
	}
	return b.String()
}

// FieldError is one offending field, query parameter or header of a
// request, as a problem's errors list it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ProblemType is the ProblemType object, what a problem code means: the
// response of GET /problems/{code}.
type ProblemType struct {
	Code        string `json:"code"`
	Status      int    `json:"status"`
	Title       string `json:"title"`
	Retryable   bool   `json:"retryable"`
	Description string `json:"description"`
}

// Health is the Health object: the response of GET /healthz ("ok") and
// GET /readyz ("ready").
type Health struct {
	Status string `json:"status"`
}

// Protocol is the Protocol object, what the server guarantees (its
// idempotency rules, recommended retry policy, limits and MCP door): the
// response of GET /v1/protocol. Members here and below are in
// alphabetical order, the order the answer has always had.
type Protocol struct {
	APIVersion  string              `json:"api_version"`
	Idempotency ProtocolIdempotency `json:"idempotency"`
	Limits      ProtocolLimits      `json:"limits"`
	// MCP says where the MCP tools are served; nil when they are not.
	MCP *ProtocolMCP `json:"mcp"`
	// OAuth says where an OAuth client learns how to get an access token
	// for this server.
	OAuth ProtocolOAuth `json:"oauth"`
	Retry ProtocolRetry `json:"retry"`
	// Grants is the grant model every token is held to.
	Grants ProtocolGrants `json:"grants"`
	// Raw is the document as a client received it, including members
	// this package does not name; it is no member of the document.
	Raw json.RawMessage `json:"-"`
}

// ProtocolIdempotency describes Idempotency-Key.
type ProtocolIdempotency struct {
	Header           string   `json:"header"`
	KeyPattern       string   `json:"key_pattern"`
	ReplayHeader     string   `json:"replay_header"`
	RequiredOn       []string `json:"required_on"`
	RetentionSeconds int64    `json:"retention_seconds"`
	Scope            string   `json:"scope"`
}

// ProtocolLimits are the server's limits.
type ProtocolLimits struct {
	// Batches: the largest body, the largest decoded content of one item,
	// the most items.
	BatchMaxBytes     int64 `json:"batch_max_bytes"`
	BatchMaxItemBytes int64 `json:"batch_max_item_bytes"`
	BatchMaxItems     int   `json:"batch_max_items"`
	// BodyIdleTimeoutSeconds is how long a request body may stall before
	// the request is 408 REQUEST_TIMEOUT (0: no bound).
	BodyIdleTimeoutSeconds  int64 `json:"body_idle_timeout_seconds"`
	DeletedRetentionSeconds int64 `json:"deleted_retention_seconds"`
	// EventRetentionSeconds is how long events are kept;
	// EventsWaitMaxSeconds the longest wait of GET /v1/events.
	EventRetentionSeconds int64 `json:"event_retention_seconds"`
	EventsWaitMaxSeconds  int   `json:"events_wait_max_seconds"`
	// The bounds of a file's expires_in, and of a share link's (with its
	// default).
	ExpiresInMaxSeconds         int64 `json:"expires_in_max_seconds"`
	ExpiresInMinSeconds         int64 `json:"expires_in_min_seconds"`
	LinkExpiresInDefaultSeconds int64 `json:"link_expires_in_default_seconds"`
	LinkExpiresInMaxSeconds     int64 `json:"link_expires_in_max_seconds"`
	LinkExpiresInMinSeconds     int64 `json:"link_expires_in_min_seconds"`
	ListLimitDefault            int   `json:"list_limit_default"`
	ListLimitMax                int   `json:"list_limit_max"`
	MaxPathBytes                int   `json:"max_path_bytes"`
	// MaxPendingUploads is how many upload sessions a subject may have
	// open at once (0: no bound; past it a new session is 429
	// QUOTA_EXCEEDED).
	MaxPendingUploads int `json:"max_pending_uploads"`
	// MaxUploadBytes bounds one POST /v1/files; larger files go through
	// upload sessions, up to MaxUploadSessionBytes.
	MaxUploadBytes        int64 `json:"max_upload_bytes"`
	MaxUploadSessionBytes int64 `json:"max_upload_session_bytes"`
	// MaxVersions and VersionRetentionSeconds bound the non-current
	// versions kept of a file (0: no bound).
	MaxVersions int `json:"max_versions"`
	// QuotaBytes bounds the bytes a subject writes per
	// QuotaWindowSeconds (0: no quota).
	QuotaBytes         int64 `json:"quota_bytes"`
	QuotaWindowSeconds int64 `json:"quota_window_seconds"`
	// RateLimitBurst and RateLimitPerSecond bound a subject's requests
	// (0: no limit), kept as RateLimitScope says.
	RateLimitBurst     int     `json:"rate_limit_burst"`
	RateLimitPerSecond float64 `json:"rate_limit_per_second"`
	RateLimitScope     string  `json:"rate_limit_scope"`
	// Upload sessions: the most parts, the preferred part size, how long
	// a session lives.
	UploadMaxParts          int   `json:"upload_max_parts"`
	UploadPartSize          int64 `json:"upload_part_size"`
	UploadTTLSeconds        int64 `json:"upload_ttl_seconds"`
	VersionRetentionSeconds int64 `json:"version_retention_seconds"`
	// WriteIdleTimeoutSeconds is how long a download may take nothing
	// before it is cut (0: no bound).
	WriteIdleTimeoutSeconds int64 `json:"write_idle_timeout_seconds"`
}

// ProtocolGrants describes the grant model: the scopes a token may carry,
// how its prefixes match, and where child tokens are made.
type ProtocolGrants struct {
	Scopes      []string `json:"scopes"`
	Prefixes    string   `json:"prefixes"`
	MaxPrefixes int      `json:"max_prefixes"`
	Pins        []string `json:"pins"`
	Delegation  string   `json:"delegation"`
}

// ProtocolMCP says where and how the MCP tools are served.
type ProtocolMCP struct {
	Auth      string `json:"auth"`
	Endpoint  string `json:"endpoint"`
	Stateless bool   `json:"stateless"`
	Transport string `json:"transport"`
}

// ProtocolOAuth points OAuth clients at the protected resource metadata
// (RFC 9728) and the authorization servers it names.
type ProtocolOAuth struct {
	// AuthorizationServers are the issuers whose JWT access tokens the
	// server takes beside its own tokens; empty when it takes none.
	AuthorizationServers []string `json:"authorization_servers"`
	// ResourceMetadata is the URL of the protected resource metadata.
	ResourceMetadata string `json:"resource_metadata"`
}

// ProtectedResource is the protected resource metadata of RFC 9728, which
// OAuth clients (MCP clients among them) discover the authorization
// server by: the response of GET /.well-known/oauth-protected-resource and
// of its form under /mcp's path.
type ProtectedResource struct {
	// Resource is the resource identifier tokens must be meant for (their
	// aud, RFC 8707): the public URL, or /mcp's under its path.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers of the access tokens taken;
	// empty when the server takes only its own tokens.
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

// ProtocolRetry is the server's recommended retry policy.
type ProtocolRetry struct {
	InitialDelayMS    int64    `json:"initial_delay_ms"`
	Jitter            string   `json:"jitter"`
	MaxAttempts       int      `json:"max_attempts"`
	MaxDelayMS        int64    `json:"max_delay_ms"`
	RetryableStatuses []int    `json:"retryable_statuses"`
	SafeOperations    []string `json:"safe_operations"`
}

// SearchResults is the SearchResults object, one page of a content
// search: the response of GET /v1/search.
type SearchResults struct {
	Object  string        `json:"object"`
	Data    []SearchMatch `json:"data"`
	HasMore bool          `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
	// FilesMatched and FilesSearched count the files with a match and
	// the text files whose lines were read, over the pages so far.
	FilesMatched  int64         `json:"files_matched"`
	FilesSearched int64         `json:"files_searched"`
	FilesSkipped  SearchSkipped `json:"files_skipped"`
	// IndexComplete is false while files written before the search index
	// existed are still being indexed (some may not be searched yet).
	IndexComplete bool `json:"index_complete"`
}

// SearchSkipped counts the files in a search's scope that are not
// searched: binary (not UTF-8, or holding a NUL), or too large.
type SearchSkipped struct {
	Binary   int64 `json:"binary"`
	TooLarge int64 `json:"too_large"`
}

// SearchMatch is one matching line of a file, with its context.
type SearchMatch struct {
	FileID  string `json:"file_id"`
	Path    string `json:"path"`
	Version int64  `json:"version"`
	// Line is 1-based; Column the 1-based byte offset of the first match.
	Line      int64    `json:"line"`
	Column    int64    `json:"column"`
	Text      string   `json:"text"`
	Truncated bool     `json:"truncated"`
	Before    []string `json:"before"`
	After     []string `json:"after"`
}

// Token is the Token object: a bearer token as its holder and its
// ancestors see it (POST /v1/tokens, GET /v1/tokens[/{id}], DELETE
// /v1/tokens/{id}). Its grant is what it may do; Token, the secret, is
// shown only in the answer that made it (and a replay of that answer to
// the same token).
type Token struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Token is the bearer token itself: only in the answer to POST
	// /v1/tokens; null everywhere else.
	Token *string `json:"token"`
	Name  string  `json:"name"`
	// Scopes are of read, write, share, delegate.
	Scopes []string `json:"scopes"`
	// Prefixes are the folders the token sees and touches; empty: every
	// path of its subject.
	Prefixes []string `json:"prefixes"`
	RunID    *string  `json:"run_id"`
	AgentID  *string  `json:"agent_id"`
	// ExpiresAt is when it stops authenticating; null: never.
	ExpiresAt *time.Time `json:"expires_at"`
	// MaxBytes is how many bytes it may write in all; null: no limit.
	MaxBytes *int64 `json:"max_bytes"`
	// BytesWritten is what it has written of MaxBytes.
	BytesWritten int64 `json:"bytes_written"`
	// ParentID is the token that made it; null for one an operator made.
	ParentID  *string    `json:"parent_id"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// TokenList is the caller's token and its descendants, oldest first: the
// response of GET /v1/tokens.
type TokenList struct {
	Data []Token `json:"data"`
}

// Checkpoint is a named point of a subject's history (DESIGN §18): the
// response of POST and GET /v1/checkpoints/{id_or_name}.
type Checkpoint struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Name is unique per subject; nil for an unnamed checkpoint.
	Name   *string `json:"name"`
	Prefix string  `json:"prefix"`
	Note   string  `json:"note"`
	// Cursor is the checkpoint's position as an event cursor: a point.
	Cursor    string    `json:"cursor"`
	AgentID   *string   `json:"agent_id"`
	RunID     *string   `json:"run_id"`
	CreatedAt time.Time `json:"created_at"`
}

// CheckpointList is a page of checkpoints, newest first.
type CheckpointList struct {
	Data    []Checkpoint `json:"data"`
	HasMore bool         `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// ChangeSide is a file's content at one point of a diff.
type ChangeSide struct {
	Version   int64  `json:"version"`
	SHA256    string `json:"sha256"`
	SizeBytes int64  `json:"size_bytes"`
}

// Change is one file that differs between the two points of a diff.
type Change struct {
	Path string `json:"path"`
	// Change is added, modified, deleted or moved.
	Change string `json:"change"`
	FileID string `json:"file_id"`
	// PreviousPath is the path at from of a moved file; nil otherwise.
	PreviousPath *string     `json:"previous_path"`
	From         *ChangeSide `json:"from"`
	To           *ChangeSide `json:"to"`
}

// RestorePlan is what a restore would do, changing nothing: the response
// of POST /v1/restore with dry_run. Each item is a change since the point
// the restore would undo, in the order its batch would run them.
type RestorePlan struct {
	Object string `json:"object"`
	Prefix string `json:"prefix"`
	// To is the point as an event cursor.
	To    string   `json:"to"`
	Items []Change `json:"items"`
}

// DiffList is a page of a diff, by path: the response of GET /v1/diff.
type DiffList struct {
	Object  string   `json:"object"`
	Data    []Change `json:"data"`
	HasMore bool     `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// Webhook is a receiver of the subject's matching events (DESIGN §23):
// the response of POST, GET, PATCH and DELETE /v1/webhooks/{id} and of
// rotate-secret and replay. Secret is shown only in the answers that made
// or rotated it (and a replay of those to the same token).
type Webhook struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	URL    string `json:"url"`
	// Types are the event types delivered; empty: every type.
	Types []string `json:"types"`
	// Prefix bounds the paths whose events are delivered; "" for all.
	Prefix      string  `json:"prefix"`
	RunID       *string `json:"run_id"`
	Description string  `json:"description"`
	// Secret is the signing secret ("whsec_…"); null except where made.
	Secret *string `json:"secret"`
	// Status is active or disabled.
	Status string `json:"status"`
	// DisabledReason says why a disabled webhook stopped; null when active.
	DisabledReason *string `json:"disabled_reason"`
	// Cursor is the event cursor of the last event the receiver
	// acknowledged: delivery continues after it.
	Cursor string `json:"cursor"`
	// FailedAttempts counts the failed attempts at the next event;
	// NextAttemptAt is when the next is due (null when none is waiting).
	FailedAttempts int64      `json:"failed_attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// WebhookList is the response of GET /v1/webhooks, oldest first.
type WebhookList struct {
	Data    []Webhook `json:"data"`
	HasMore bool      `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// Fork is a copy-on-write copy of the files under one prefix (DESIGN §19):
// the response of POST /v1/forks and GET /v1/forks/{id}.
type Fork struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	From   string `json:"from"`
	To     string `json:"to"`
	// Base is the point forked, then that of the last merge, as an event
	// cursor.
	Base string `json:"base"`
	// Files is how many files the fork copied.
	Files     int64      `json:"files"`
	AgentID   *string    `json:"agent_id"`
	RunID     *string    `json:"run_id"`
	CreatedAt time.Time  `json:"created_at"`
	MergedAt  *time.Time `json:"merged_at"`
}

// ForkList is a page of forks, newest first: the response of GET
// /v1/forks.
type ForkList struct {
	Data    []Fork `json:"data"`
	HasMore bool   `json:"has_more"`
	// NextCursor is the cursor of the next page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// WebhookDelivery is one attempt to deliver one event: an entry of GET
// /v1/webhooks/{id}/deliveries.
type WebhookDelivery struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	EventID string `json:"event_id"`
	// Attempt counts the attempts at this event, from 1.
	Attempt int64 `json:"attempt"`
	// Status is succeeded (a 2xx) or failed.
	Status string `json:"status"`
	// StatusCode is the receiver's HTTP status; null when none came.
	StatusCode *int64 `json:"status_code"`
	// Error says why the attempt failed; null when it succeeded.
	Error     *string   `json:"error"`
	LatencyMS int64     `json:"latency_ms"`
	At        time.Time `json:"at"`
}

// WebhookDeliveryList is the response of GET
// /v1/webhooks/{id}/deliveries, newest first.
type WebhookDeliveryList struct {
	Data    []WebhookDelivery `json:"data"`
	HasMore bool              `json:"has_more"`
	// NextCursor is the cursor of the next (older) page; nil on the last.
	NextCursor *string `json:"next_cursor"`
}

// MergeSide is one side of a merge at a path: a file's version and
// content.
type MergeSide struct {
	FileID  string `json:"file_id"`
	Version int64  `json:"version"`
	SHA256  string `json:"sha256"`
}

// MergeConflict is a path changed on both sides of a merge to different
// bytes; a side that holds no file there is nil.
type MergeConflict struct {
	// Path is the target's path.
	Path   string     `json:"path"`
	Base   *MergeSide `json:"base"`
	Fork   *MergeSide `json:"fork"`
	Target *MergeSide `json:"target"`
	// Resolution is the side a merge kept ("fork" or "target"); nil when
	// nothing was merged.
	Resolution *string `json:"resolution"`
}

// Merge is a merge of a fork back into its source: the response of POST
// /v1/forks/{id}/merge (with dry_run, what it would do).
type Merge struct {
	Object string `json:"object"`
	ForkID string `json:"fork_id"`
	// Base is the fork's base after the merge, as an event cursor (with
	// dry_run, the base it has).
	Base    string   `json:"base"`
	DryRun  bool     `json:"dry_run"`
	Applied []Change `json:"applied"`
	// Conflicts are the paths changed on both sides, with the side kept.
	Conflicts []MergeConflict `json:"conflicts"`
}

// RunRecovery is the RunRecovery object (GET /v1/runs/{run_id}/recovery,
// DESIGN §25): what a run left behind, true at AsOf, with the next safe
// request for each thing it left open, for the worker that takes it over.
type RunRecovery struct {
	Object string `json:"object"`
	RunID  string `json:"run_id"`
	// AsOf is the event cursor everything in the answer holds at: a
	// follower of GET /v1/events continues from exactly there.
	AsOf       string            `json:"as_of"`
	Confirmed  RecoveryConfirmed `json:"confirmed"`
	Operations []RecoveryOp      `json:"operations"`
	InFlight   RecoveryInFlight  `json:"in_flight"`
	// NextActions are the requests still to send, in order.
	NextActions []Next `json:"next_actions"`
	// PredatesRunRecord counts the caller's kept keys claimed before keys
	// recorded their run: any of them may be this run's, and none is
	// listed.
	PredatesRunRecord int     `json:"predates_run_record"`
	HasMore           bool    `json:"has_more"`
	NextCursor        *string `json:"next_cursor"`
}

// RecoveryConfirmed is what the run's events confirm happened.
type RecoveryConfirmed struct {
	Events int `json:"events"`
	// LastEventCursor is the cursor at the run's last event; nil: none.
	LastEventCursor *string   `json:"last_event_cursor"`
	LiveFiles       int       `json:"live_files"`
	Counts          RunCounts `json:"counts"`
}

// RecoveryOp is one key the run's requests claimed.
type RecoveryOp struct {
	IdempotencyKey string `json:"idempotency_key"`
	Method         string `json:"method"`
	Route          string `json:"route"`
	// Status is OperationCompleted, OperationInProgress or
	// OperationAbandoned.
	Status         string             `json:"status"`
	Resource       *OperationResource `json:"resource"`
	ResponseStatus *int               `json:"response_status"`
	At             time.Time          `json:"at"`
	Next           Next               `json:"next"`
}

// RecoveryInFlight are the run's upload sessions and batches not yet
// ended.
type RecoveryInFlight struct {
	Uploads []RecoveryUpload `json:"uploads"`
	Batches []RecoveryBatch  `json:"batches"`
}

// RecoveryUpload is an upload session of the run still open.
type RecoveryUpload struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	Status string `json:"status"`
	// SizeBytes is the whole file's size; IfExists ("error" or
	// "replace") what its complete does when a live file holds the path:
	// what a successor that writes the file another way needs.
	SizeBytes     int64  `json:"size_bytes"`
	IfExists      string `json:"if_exists"`
	PartsReceived []int  `json:"parts_received"`
	PartCount     int    `json:"part_count"`
	MissingParts  []int  `json:"missing_parts"`
	Next          Next   `json:"next"`
}

// RecoveryBatch is a batch of the run not yet terminal.
type RecoveryBatch struct {
	ID     string      `json:"id"`
	Status string      `json:"status"`
	Counts BatchCounts `json:"counts"`
	Next   Next        `json:"next"`
}

// Next is the next safe step for something a run left: a short sentence
// for a person or a model, and the exact request a program sends.
type Next struct {
	Text   string `json:"text"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// IdempotencyKey is the key to send the request with (omitted: none).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// AfterSeconds is how long to wait before sending it (omitted: now).
	AfterSeconds int `json:"after_seconds,omitempty"`
}
