// Package api holds every JSON object the HTTP API answers with, each
// documented as the response of its routes, and how each is made from the
// domain's values. Handlers, the admission core (which records responses
// for replay), the batch runner, the MCP tools and the tests all render and
// read these same types.
package api

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// File is the File object: the response of POST /v1/files, GET, HEAD and
// DELETE /v1/files/{id}, POST /v1/files/{id}/restore and
// POST /v1/uploads/{id}/complete, and an element of every file listing.
type File struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Path        string     `json:"path"`
	SizeBytes   int64      `json:"size_bytes"`
	ContentType string     `json:"content_type"`
	SHA256      string     `json:"sha256"`
	ETag        string     `json:"etag"`
	Version     int        `json:"version"`
	URL         string     `json:"url"`
	AgentID     *string    `json:"agent_id"`
	RunID       *string    `json:"run_id"`
	LastAgentID *string    `json:"last_agent_id"`
	LastRunID   *string    `json:"last_run_id"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	DeletedAt   *time.Time `json:"deleted_at"`
	PurgeAfter  *time.Time `json:"purge_after"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Blocked     bool       `json:"blocked"`
}

// NewFile shows f; base is the public URL the file's url starts with.
func NewFile(base string, f *agentfs.File) File {
	return File{
		ID: f.ID, Object: "file", Path: f.Path, SizeBytes: f.SizeBytes, ContentType: f.ContentType,
		SHA256: f.SHA256, ETag: f.ETag(), Version: f.Version, URL: base + "/v1/files/" + f.ID + "/content",
		AgentID: nullable(f.AgentID), RunID: nullable(f.RunID),
		LastAgentID: nullable(f.LastAgentID), LastRunID: nullable(f.LastRunID),
		CreatedAt: f.CreatedAt.UTC(), UpdatedAt: f.UpdatedAt.UTC(),
		DeletedAt: utc(f.DeletedAt), PurgeAfter: utc(f.PurgeAfter), ExpiresAt: utc(f.ExpiresAt), Blocked: f.Blocked,
	}
}

// FileList is a page of files: the response of GET /v1/files.
type FileList struct {
	Data       []File  `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// Upload is the Upload object: the response of POST /v1/uploads,
// GET /v1/uploads/{id} and DELETE /v1/uploads/{id}.
type Upload struct {
	ID          string           `json:"id"`
	Object      string           `json:"object"`
	Path        string           `json:"path"`
	SizeBytes   int64            `json:"size_bytes"`
	ContentType string           `json:"content_type"`
	IfExists    string           `json:"if_exists"`
	SHA256      *string          `json:"sha256"`
	PartSize    int64            `json:"part_size"`
	PartCount   int              `json:"part_count"`
	Status      string           `json:"status"`
	Parts       []Part           `json:"parts"`
	ExpiresAt   time.Time        `json:"expires_at"`
	File        *File            `json:"file"`
	Error       *problem.Problem `json:"error"`
	ExpiresIn   *int64           `json:"expires_in"`
	AgentID     *string          `json:"agent_id"`
	RunID       *string          `json:"run_id"`
	CreatedAt   time.Time        `json:"created_at"`
}

// Part is one part of an upload session as the session lists it, and (with
// Object and UploadID set) the response of PUT /v1/uploads/{id}/parts/{n}.
type Part struct {
	Object     string `json:"object,omitempty"`
	UploadID   string `json:"upload_id,omitempty"`
	PartNumber int    `json:"part_number"`
	SizeBytes  int64  `json:"size_bytes"`
	SHA256     string `json:"sha256"`
}

// NewPart shows a part just received by upload uploadID.
func NewPart(uploadID string, p *agentfs.Part) Part {
	return Part{Object: "upload_part", UploadID: uploadID, PartNumber: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256}
}

// NewUpload shows u at time now; f is its file once completed (else nil)
// and requestID the request that asks, named by a failed session's error.
func NewUpload(base string, u *agentfs.Upload, f *agentfs.File, requestID string, now time.Time) Upload {
	out := Upload{
		ID: u.ID, Object: "upload", Path: u.Path, SizeBytes: u.SizeBytes, ContentType: u.ContentType,
		IfExists: "error", SHA256: nullable(u.SHA256), PartSize: u.PartSize, PartCount: u.PartCount,
		Status: u.Status, Parts: make([]Part, 0, len(u.Parts)), ExpiresAt: u.ExpiresAt.UTC(),
		AgentID: nullable(u.By.AgentID), RunID: nullable(u.By.RunID), CreatedAt: u.CreatedAt.UTC(),
	}
	if u.Replace {
		out.IfExists = "replace"
	}
	if u.ExpiresIn > 0 {
		secs := int64(u.ExpiresIn.Seconds())
		out.ExpiresIn = &secs
	}
	if out.Status == agentfs.UploadPending && !u.ExpiresAt.After(now) {
		out.Status = agentfs.UploadExpired // the sweeper has not got to it yet
	}
	for _, p := range u.Parts {
		out.Parts = append(out.Parts, Part{PartNumber: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256})
	}
	if f != nil {
		fj := NewFile(base, f)
		out.File = &fj
	}
	if u.Status == agentfs.UploadFailed {
		p := problem.New(problem.ChecksumMismatch, "the assembled content does not match the declared sha256")
		p.RequestID = requestID
		p.Instance = "/v1/uploads/" + u.ID
		out.Error = p
	}
	return out
}

// Batch is the Batch object: the response of POST /v1/batch and
// GET /v1/batch/{id}.
type Batch struct {
	ID          string      `json:"id"`
	Object      string      `json:"object"`
	Status      string      `json:"status"`
	Counts      BatchCounts `json:"counts"`
	Items       []BatchItem `json:"items,omitempty"` // absent when batches are listed
	CreatedAt   time.Time   `json:"created_at"`
	StartedAt   *time.Time  `json:"started_at"`
	CompletedAt *time.Time  `json:"completed_at"`
}

// BatchCounts tallies a batch's items by state.
type BatchCounts struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Pending   int `json:"pending"`
	Canceled  int `json:"canceled"`
}

// BatchItem is one item of a batch and its outcome.
type BatchItem struct {
	Index    int             `json:"index"`
	Op       string          `json:"op"`
	Path     *string         `json:"path"`
	Status   string          `json:"status"`
	Replayed bool            `json:"replayed"`
	File     *File           `json:"file"`
	Error    json.RawMessage `json:"error"`
}

// NewBatch shows b; files holds the files its items left, by id (an item
// whose file is missing there shows none; its status still says what
// happened).
func NewBatch(base string, b *agentfs.Batch, files map[string]*agentfs.File) Batch {
	out := Batch{ID: b.ID, Object: "batch", Status: b.Status,
		CreatedAt: b.CreatedAt.UTC(), StartedAt: utc(b.StartedAt), CompletedAt: utc(b.CompletedAt)}
	n := b.Counts()
	out.Counts = BatchCounts{Total: n.Total, Succeeded: n.Succeeded, Failed: n.Failed, Pending: n.Pending, Canceled: n.Canceled}
	if b.Items != nil {
		out.Items = make([]BatchItem, 0, len(b.Items))
	}
	for _, it := range b.Items {
		j := BatchItem{Index: it.Index, Op: it.Op, Path: nullable(it.Path), Status: it.Status,
			Replayed: it.Replayed, Error: json.RawMessage("null")}
		if f := files[it.ResultID]; f != nil {
			fj := NewFile(base, f)
			j.File = &fj
		}
		if len(it.Error) > 0 {
			j.Error = it.Error
		}
		out.Items = append(out.Items, j)
	}
	return out
}

// Operation is the Operation object: the response of
// GET /v1/operations/{idempotency_key}.
type Operation struct {
	Object         string                `json:"object"`
	IdempotencyKey string                `json:"idempotency_key"`
	Status         string                `json:"status"`
	Method         string                `json:"method"`
	Route          string                `json:"route"`
	ResponseStatus *int                  `json:"response_status"`
	Response       json.RawMessage       `json:"response"`
	Resource       *idempotency.Resource `json:"resource"`
	// Redacted names the members of Response shown null because they hold
	// a secret (a share link's url): only a replay of the request by the
	// token that made it shows them.
	Redacted    []string   `json:"redacted"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

// NewOperation shows what a key holds, its secrets redacted.
func NewOperation(r *idempotency.Record) Operation {
	out := Operation{
		Object: "operation", IdempotencyKey: r.Key, Status: "in_progress", Method: r.Method, Route: r.Route,
		Response: json.RawMessage("null"), Redacted: []string{}, CreatedAt: r.CreatedAt.UTC(),
		CompletedAt: utc(r.CompletedAt), ExpiresAt: utc(r.ExpiresAt),
	}
	if r.Completed {
		out.Status = "completed"
		status := r.Outcome.Status
		out.ResponseStatus = &status
		out.Response = json.RawMessage(r.Outcome.Body) // as recorded: its secrets are null
		if len(r.Outcome.Secrets) > 0 {
			out.Redacted = r.Outcome.Secrets
		}
		if r.Outcome.Resource.ID != "" {
			res := r.Outcome.Resource
			out.Resource = &res
		}
	}
	return out
}

// FileVersion is the FileVersion object: the response of
// GET /v1/files/{id}/versions/{n}, and an element of the version listing.
type FileVersion struct {
	Object      string    `json:"object"`
	FileID      string    `json:"file_id"`
	Version     int       `json:"version"`
	SizeBytes   int64     `json:"size_bytes"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
	ETag        string    `json:"etag"`
	URL         string    `json:"url"`
	AgentID     *string   `json:"agent_id"`
	RunID       *string   `json:"run_id"`
	CreatedAt   time.Time `json:"created_at"`
	Current     bool      `json:"current"`
}

// NewFileVersion shows v; its url serves its bytes.
func NewFileVersion(base string, v *agentfs.FileVersion) FileVersion {
	return FileVersion{Object: "file_version", FileID: v.FileID, Version: v.Version, SizeBytes: v.SizeBytes,
		ContentType: v.ContentType, SHA256: v.SHA256, ETag: v.ETag(),
		URL:     base + "/v1/files/" + v.FileID + "/versions/" + strconv.Itoa(v.Version) + "/content",
		AgentID: nullable(v.By.AgentID), RunID: nullable(v.By.RunID), CreatedAt: v.CreatedAt.UTC(), Current: v.Current}
}

// VersionList is a page of a file's versions, newest first: the response
// of GET /v1/files/{id}/versions.
type VersionList struct {
	Data       []FileVersion `json:"data"`
	HasMore    bool          `json:"has_more"`
	NextCursor *string       `json:"next_cursor"`
}

// Link is the Link object: the response of POST /v1/files/{id}/links (the
// only time url is shown) and DELETE /v1/links/{id}, and an element of
// GET /v1/files/{id}/links.
type Link struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	FileID    string     `json:"file_id"`
	Version   *int       `json:"version"`
	URL       *string    `json:"url"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// NewLink shows l; its url only when l carries its secret.
func NewLink(base string, l *agentfs.Link) Link {
	out := Link{ID: l.ID, Object: "link", FileID: l.FileID, ExpiresAt: l.ExpiresAt.UTC(),
		RevokedAt: utc(l.RevokedAt), CreatedAt: l.CreatedAt.UTC()}
	if l.Version != 0 {
		v := l.Version
		out.Version = &v
	}
	if l.Secret != "" {
		u := base + "/s/" + l.Secret
		out.URL = &u
	}
	return out
}

// LinkList is a file's links, newest first: the response of
// GET /v1/files/{id}/links.
type LinkList struct {
	Data []Link `json:"data"`
}

// UploadList is a page of upload sessions: the response of GET /v1/uploads.
type UploadList struct {
	Data       []Upload `json:"data"`
	HasMore    bool     `json:"has_more"`
	NextCursor *string  `json:"next_cursor"`
}

// BatchList is a page of batches, without their items: the response of
// GET /v1/batch.
type BatchList struct {
	Data       []Batch `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// Event is the Event object: one effect on a file, as GET /v1/events lists
// it.
type Event struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Type           string    `json:"type"`
	FileID         string    `json:"file_id"`
	Path           string    `json:"path"`
	PreviousPath   *string   `json:"previous_path"`
	Version        *int      `json:"version"`
	SizeBytes      *int64    `json:"size_bytes"`
	SHA256         *string   `json:"sha256"`
	AgentID        *string   `json:"agent_id"`
	RunID          *string   `json:"run_id"`
	IdempotencyKey *string   `json:"idempotency_key"`
	RequestID      *string   `json:"request_id"`
	BatchID        *string   `json:"batch_id"`
	At             time.Time `json:"at"`
}

// NewEvent shows e.
func NewEvent(e *agentfs.Event) Event {
	out := Event{ID: e.ID, Object: "event", Type: e.Type, FileID: e.FileID, Path: e.Path,
		PreviousPath: nullable(e.PreviousPath), SHA256: nullable(e.SHA256),
		AgentID: nullable(e.Origin.By.AgentID), RunID: nullable(e.Origin.By.RunID),
		IdempotencyKey: nullable(e.Origin.Key), RequestID: nullable(e.Origin.RequestID), BatchID: nullable(e.Origin.BatchID),
		At: e.At.UTC()}
	if e.Version != 0 {
		v, n := e.Version, e.SizeBytes
		out.Version, out.SizeBytes = &v, &n
	}
	return out
}

// EventList is a page of events, oldest first: the response of
// GET /v1/events. next_cursor is always present.
type EventList struct {
	Data       []Event `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor string  `json:"next_cursor"`
}

// Run is the Run object: what one run did, the response of
// GET /v1/runs/{run_id}.
type Run struct {
	Object       string    `json:"object"`
	RunID        string    `json:"run_id"`
	AgentIDs     []string  `json:"agent_ids"`
	FirstAt      time.Time `json:"first_at"`
	LastAt       time.Time `json:"last_at"`
	Counts       RunCounts `json:"counts"`
	BytesWritten int64     `json:"bytes_written"`
	LiveFiles    int       `json:"live_files"`
}

// RunCounts tallies a run's effects by kind.
type RunCounts struct {
	Created  int `json:"created"`
	Replaced int `json:"replaced"`
	Deleted  int `json:"deleted"`
	Restored int `json:"restored"`
	Moved    int `json:"moved"`
	Reverted int `json:"reverted"`
}

// NewRun shows a run's summary.
func NewRun(r *agentfs.RunSummary) Run {
	c := r.Counts
	agents := r.AgentIDs
	if agents == nil {
		agents = []string{}
	}
	return Run{Object: "run", RunID: r.RunID, AgentIDs: agents, FirstAt: r.FirstAt, LastAt: r.LastAt,
		BytesWritten: r.BytesWritten, LiveFiles: r.LiveFiles,
		Counts: RunCounts{Created: c[agentfs.EventCreated], Replaced: c[agentfs.EventReplaced], Deleted: c[agentfs.EventDeleted],
			Restored: c[agentfs.EventRestored], Moved: c[agentfs.EventMoved], Reverted: c[agentfs.EventReverted]}}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
