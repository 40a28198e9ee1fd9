package handlers

import (
	"time"

	"github.com/agentfs/agentfs"
)

// fileJSON is the File object of the API.
type fileJSON struct {
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

func (a *API) fileJSON(f *agentfs.File) fileJSON { return fileJSONOf(a.deps.PublicURL, f) }

func fileJSONOf(publicURL string, f *agentfs.File) fileJSON {
	return fileJSON{
		ID: f.ID, Object: "file", Path: f.Path, SizeBytes: f.SizeBytes, ContentType: f.ContentType,
		SHA256: f.SHA256, ETag: f.ETag(), Version: f.Version, URL: publicURL + "/v1/files/" + f.ID + "/content",
		AgentID: nullable(f.AgentID), RunID: nullable(f.RunID),
		LastAgentID: nullable(f.LastAgentID), LastRunID: nullable(f.LastRunID),
		CreatedAt: f.CreatedAt.UTC(), UpdatedAt: f.UpdatedAt.UTC(),
		DeletedAt: utc(f.DeletedAt), PurgeAfter: utc(f.PurgeAfter), Blocked: f.Blocked,
	}
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

// fileListJSON is a page of files.
type fileListJSON struct {
	Data       []fileJSON `json:"data"`
	HasMore    bool       `json:"has_more"`
	NextCursor *string    `json:"next_cursor"`
}
