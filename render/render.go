// Package render makes the API's wire objects (package api) from the
// domain's values. It is the one place that decides how a stored file,
// session, batch, version, link, event, run or recorded key is shown:
// the admission core renders the outcomes it records for replay with it,
// and the read paths of every door (the REST handlers, the MCP tools)
// render what they read with it, so a replay and a read show the same
// bytes.
package render

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// File shows f; base is the public URL the file's url starts with.
func File(base string, f *agentfs.File) api.File {
	return api.File{
		ID: f.ID, Object: "file", Path: f.Path, SizeBytes: f.SizeBytes, ContentType: f.ContentType,
		SHA256: f.SHA256, ETag: f.ETag(), Version: int64(f.Version), URL: base + "/v1/files/" + f.ID + "/content",
		AgentID: nullable(f.AgentID), RunID: nullable(f.RunID),
		LastAgentID: nullable(f.LastAgentID), LastRunID: nullable(f.LastRunID),
		CreatedAt: f.CreatedAt.UTC(), UpdatedAt: f.UpdatedAt.UTC(),
		DeletedAt: utc(f.DeletedAt), PurgeAfter: utc(f.PurgeAfter), ExpiresAt: utc(f.ExpiresAt), Blocked: f.Blocked,
		Mode: int32(f.Mode), MTime: f.MTime.UTC(), Kind: f.Kind,
		ForkedFrom: forkedFrom(f),
	}
}

// forkedFrom names the file and version a fork copied f from (nil: none).
func forkedFrom(f *agentfs.File) *api.FileVersionRef {
	if f.ForkedFromID == "" {
		return nil
	}
	return &api.FileVersionRef{FileID: f.ForkedFromID, Version: int64(f.ForkedFromVersion)}
}

// Part shows a part just received by upload uploadID.
func Part(uploadID string, p *agentfs.Part) api.UploadPart {
	return api.UploadPart{Object: "upload_part", UploadID: uploadID, PartNumber: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256}
}

// Upload shows u at time now; f is its file once completed (else nil)
// and requestID the request that asks, named by a failed session's error.
func Upload(base string, u *agentfs.Upload, f *agentfs.File, requestID string, now time.Time) api.Upload {
	out := api.Upload{
		ID: u.ID, Object: "upload", Path: u.Path, SizeBytes: u.SizeBytes, ContentType: u.ContentType,
		IfExists: "error", SHA256: nullable(u.SHA256), PartSize: u.PartSize, PartCount: u.PartCount,
		Status: u.Status, Parts: make([]api.UploadPart, 0, len(u.Parts)), ExpiresAt: u.ExpiresAt.UTC(),
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
		out.Parts = append(out.Parts, api.UploadPart{PartNumber: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256})
	}
	if f != nil {
		fj := File(base, f)
		out.File = &fj
	}
	if u.Status == agentfs.UploadFailed {
		p := problem.New(problem.ChecksumMismatch, "the assembled content does not match the declared sha256")
		p.RequestID = requestID
		p.Instance = "/v1/uploads/" + u.ID
		out.Error = Problem(p)
	}
	return out
}

// Batch shows b; files holds the files its items left, by id (an item
// whose file is missing there shows none; its status still says what
// happened).
func Batch(base string, b *agentfs.Batch, files map[string]*agentfs.File) api.Batch {
	out := api.Batch{ID: b.ID, Object: "batch", Status: b.Status,
		CreatedAt: b.CreatedAt.UTC(), StartedAt: utc(b.StartedAt), CompletedAt: utc(b.CompletedAt)}
	n := b.Counts()
	out.Counts = api.BatchCounts{Total: n.Total, Succeeded: n.Succeeded, Failed: n.Failed, Pending: n.Pending, Canceled: n.Canceled}
	if b.Items != nil {
		out.Items = make([]api.BatchItem, 0, len(b.Items))
	}
	for _, it := range b.Items {
		j := api.BatchItem{Index: it.Index, Op: it.Op, Path: nullable(it.Path), Status: it.Status,
			Replayed: it.Replayed, Error: itemProblem(it.Error)}
		if f := files[it.ResultID]; f != nil {
			fj := File(base, f)
			j.File = &fj
		}
		out.Items = append(out.Items, j)
	}
	return out
}

// itemProblem reads the problem a failed item recorded (problem.Encode's
// JSON, whose members api.Problem names one for one); nil for none.
func itemProblem(raw []byte) *api.Problem {
	if len(raw) == 0 {
		return nil
	}
	var p *api.Problem
	if err := json.Unmarshal(raw, &p); err != nil {
		return Problem(problem.New(problem.Internal, "the item's recorded problem cannot be read"))
	}
	return p
}

// Problem shows p as its document: the members an error answer carries,
// without the headers that go with it.
func Problem(p *problem.Problem) *api.Problem {
	doc := p.Problem
	return &doc
}

// ProblemType shows what a problem code means.
func ProblemType(k problem.Kind) api.ProblemType {
	return api.ProblemType{Code: k.Code, Status: k.Status, Title: k.Title, Retryable: k.Retryable, Description: k.Description}
}

// Operation shows what a key holds, its secrets redacted.
func Operation(r *idempotency.Record) api.Operation {
	out := api.Operation{
		Object: "operation", IdempotencyKey: r.Key, Status: api.OperationInProgress, Method: r.Method, Route: r.Route,
		Response: json.RawMessage("null"), Redacted: []string{}, CreatedAt: r.CreatedAt.UTC(),
		CompletedAt: utc(r.CompletedAt), ExpiresAt: utc(r.ExpiresAt),
	}
	if r.Abandoned {
		out.Status = api.OperationAbandoned
	}
	if r.Completed {
		out.Status = api.OperationCompleted
		status := r.Outcome.Status
		out.ResponseStatus = &status
		out.Response = json.RawMessage(r.Outcome.Body) // as recorded: its secrets are null
		if len(r.Outcome.Secrets) > 0 {
			out.Redacted = r.Outcome.Secrets
		}
		if res := r.Outcome.Resource; res.ID != "" {
			out.Resource = &api.OperationResource{Object: res.Object, ID: res.ID}
		}
	}
	return out
}

// FileVersion shows v; its url serves its bytes.
func FileVersion(base string, v *agentfs.FileVersion) api.FileVersion {
	return api.FileVersion{Object: "file_version", FileID: v.FileID, Version: int64(v.Version), SizeBytes: v.SizeBytes,
		ContentType: v.ContentType, SHA256: v.SHA256, ETag: v.ETag(),
		URL:     base + "/v1/files/" + v.FileID + "/versions/" + strconv.Itoa(v.Version) + "/content",
		AgentID: nullable(v.By.AgentID), RunID: nullable(v.By.RunID), CreatedAt: v.CreatedAt.UTC(), Current: v.Current}
}

// Link shows l; its url only when l carries its secret.
func Link(base string, l *agentfs.Link) api.Link {
	out := api.Link{ID: l.ID, Object: "link", FileID: l.FileID, ExpiresAt: l.ExpiresAt.UTC(),
		RevokedAt: utc(l.RevokedAt), CreatedAt: l.CreatedAt.UTC()}
	if l.Version != 0 {
		v := int64(l.Version)
		out.Version = &v
	}
	if l.Secret != "" {
		u := base + "/s/" + l.Secret
		out.URL = &u
	}
	return out
}

// Event shows e.
func Event(e *agentfs.Event) api.Event {
	out := api.Event{ID: e.ID, Object: "event", Type: e.Type, FileID: e.FileID, Path: e.Path,
		PreviousPath: nullable(e.PreviousPath), SHA256: nullable(e.SHA256),
		AgentID: nullable(e.Origin.By.AgentID), RunID: nullable(e.Origin.By.RunID),
		IdempotencyKey: nullable(e.Origin.Key), RequestID: nullable(e.Origin.RequestID), BatchID: nullable(e.Origin.BatchID),
		At: e.At.UTC(), CheckpointID: nullable(e.CheckpointID),
		ForkID: nullable(e.Origin.ForkID), Origin: nullable(e.Origin.Via)}
	if e.Version != 0 {
		v, n := int64(e.Version), e.SizeBytes
		out.Version, out.SizeBytes = &v, &n
	}
	return out
}

// Run shows a run's summary.
func Run(r *agentfs.RunSummary) api.Run {
	c := r.Counts
	agents := r.AgentIDs
	if agents == nil {
		agents = []string{}
	}
	return api.Run{Object: "run", RunID: r.RunID, AgentIDs: agents, FirstAt: r.FirstAt, LastAt: r.LastAt,
		BytesWritten: r.BytesWritten, LiveFiles: r.LiveFiles,
		Counts: api.RunCounts{Created: c[agentfs.EventCreated], Replaced: c[agentfs.EventReplaced], Deleted: c[agentfs.EventDeleted],
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

// SearchResults is the SearchResults object of a search page; next is
// the encoded cursor of the next page ("" on the last).
func SearchResults(p *agentfs.SearchPage, next string) api.SearchResults {
	out := api.SearchResults{Object: "search_results", Data: make([]api.SearchMatch, 0, len(p.Matches)),
		HasMore: next != "", FilesMatched: p.FilesMatched, FilesSearched: p.FilesSearched,
		FilesSkipped:  api.SearchSkipped{Binary: p.SkippedBinary, TooLarge: p.SkippedTooLarge},
		IndexComplete: p.IndexComplete}
	if next != "" {
		out.NextCursor = &next
	}
	for _, m := range p.Matches {
		out.Data = append(out.Data, SearchMatch(m))
	}
	return out
}

// Token shows t; its secret only when it has one (the answer that made
// it).
func Token(t *agentfs.Token) api.Token {
	g := t.Grant
	out := api.Token{ID: t.ID, Object: "token", Name: t.Name, Scopes: nonNil(g.Scopes), Prefixes: nonNil(g.Prefixes),
		RunID: optional(g.RunID), AgentID: optional(g.AgentID), ExpiresAt: utc(g.ExpiresAt), BytesWritten: t.BytesWritten,
		ParentID: optional(t.ParentID), CreatedAt: t.CreatedAt.UTC(), RevokedAt: utc(t.RevokedAt)}
	if t.Secret != "" {
		out.Token = &t.Secret
	}
	if g.MaxBytes > 0 {
		out.MaxBytes = &g.MaxBytes
	}
	return out
}

// SearchMatch is the wire form of one matching line.
func SearchMatch(m agentfs.SearchMatch) api.SearchMatch {
	before, after := m.Before, m.After
	if before == nil {
		before = []string{}
	}
	if after == nil {
		after = []string{}
	}
	return api.SearchMatch{FileID: m.FileID, Path: m.Path, Version: int64(m.Version), Line: int64(m.Line),
		Column: int64(m.Column), Text: m.Text, Truncated: m.Truncated, Before: before, After: after}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// optional is s, or nil when it is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Checkpoint shows a checkpoint; its cursor is its point.
func Checkpoint(c *agentfs.Checkpoint) api.Checkpoint {
	return api.Checkpoint{ID: c.ID, Object: "checkpoint", Name: nullable(c.Name), Prefix: c.Prefix, Note: c.Note,
		Cursor: c.Point().Cursor(c.Subject).String(), AgentID: nullable(c.By.AgentID), RunID: nullable(c.By.RunID),
		CreatedAt: c.CreatedAt.UTC()}
}

// Change shows one change of a diff.
func Change(c agentfs.Change) api.Change {
	side := func(s *agentfs.FileState) *api.ChangeSide {
		if s == nil {
			return nil
		}
		return &api.ChangeSide{Version: int64(s.Version), SHA256: s.SHA256, SizeBytes: s.SizeBytes}
	}
	return api.Change{Path: c.Path, Change: c.Kind, FileID: c.FileID, PreviousPath: nullable(c.PreviousPath),
		From: side(c.From), To: side(c.To)}
}

// RunRevertStep is one item of a run revert's plan, as the dry run shows
// it: a file the run created (or restored) is deleted, any other is put
// back as it was before the run.
func RunRevertStep(it agentfs.BatchItem) api.RunRevertStep {
	s := api.RunRevertStep{FileID: it.FileID, Path: it.Path, Action: "put_back"}
	if u := it.Undo; u != nil {
		if !u.Existed || !u.Live {
			s.Action = "delete"
		}
		if u.Version != 0 {
			v := u.Version
			s.Version = &v
		}
	}
	return s
}

// Fork shows a fork; its base is a point.
func Fork(f *agentfs.Fork) api.Fork {
	return api.Fork{ID: f.ID, Object: "fork", From: f.From, To: f.To,
		Base:  agentfs.Point{Position: f.Base, At: f.BaseAt}.Cursor(f.Subject).String(),
		Files: int64(f.Files), AgentID: nullable(f.By.AgentID), RunID: nullable(f.By.RunID),
		CreatedAt: f.CreatedAt.UTC(), MergedAt: utc(f.MergedAt)}
}

// Merge shows a merge of subject's fork.
func Merge(subject string, m *agentfs.Merge) api.Merge {
	out := api.Merge{Object: "merge", ForkID: m.ForkID, Base: m.Base.Cursor(subject).String(), DryRun: m.DryRun,
		Applied: make([]api.Change, 0, len(m.Applied)), Conflicts: problem.MergeConflicts(m.Conflicts)}
	for _, c := range m.Applied {
		out.Applied = append(out.Applied, Change(c))
	}
	return out
}
