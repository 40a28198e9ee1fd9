// Package api holds every JSON object the HTTP API answers with, each
// documented as the response of its routes, and how each is made from the
// domain's values. Handlers, the admission core (which records responses
// for replay), the batch runner, the MCP tools and the tests all render and
// read these same types.
package api

import (
	"encoding/json"
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
		DeletedAt: utc(f.DeletedAt), PurgeAfter: utc(f.PurgeAfter), Blocked: f.Blocked,
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
	Items       []BatchItem `json:"items"`
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
	out := Batch{ID: b.ID, Object: "batch", Status: b.Status, Items: make([]BatchItem, 0, len(b.Items)),
		CreatedAt: b.CreatedAt.UTC(), StartedAt: utc(b.StartedAt), CompletedAt: utc(b.CompletedAt)}
	out.Counts.Total = len(b.Items)
	out.Counts.Succeeded, out.Counts.Failed, out.Counts.Pending = b.Counts()
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
	CreatedAt      time.Time             `json:"created_at"`
	CompletedAt    *time.Time            `json:"completed_at"`
	ExpiresAt      *time.Time            `json:"expires_at"`
}

// NewOperation shows what a key holds.
func NewOperation(r *idempotency.Record) Operation {
	out := Operation{
		Object: "operation", IdempotencyKey: r.Key, Status: "in_progress", Method: r.Method, Route: r.Route,
		Response: json.RawMessage("null"), CreatedAt: r.CreatedAt.UTC(),
		CompletedAt: utc(r.CompletedAt), ExpiresAt: utc(r.ExpiresAt),
	}
	if r.Completed {
		out.Status = "completed"
		status := r.Outcome.Status
		out.ResponseStatus = &status
		out.Response = json.RawMessage(r.Outcome.Body)
		if r.Outcome.Resource.ID != "" {
			res := r.Outcome.Resource
			out.Resource = &res
		}
	}
	return out
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
