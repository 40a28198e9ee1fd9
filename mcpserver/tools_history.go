package mcpserver

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// historyPage is file_history's page size.
const historyPage = 100

// maxVersion is the largest version number the API takes.
const maxVersion = math.MaxInt32

// versionProperty bounds the version property to the version numbers the
// API takes.
func versionProperty(s *jsonschema.Schema) {
	s.Properties["version"].Minimum = ptr(1.0)
	s.Properties["version"].Maximum = ptr(float64(maxVersion))
}

// rfc3339 formats the times the tools' text shows.
const rfc3339 = time.RFC3339

type moveFileIn struct {
	Source      string `json:"source" jsonschema:"the live file to move, e.g. drafts/report.md"`
	Destination string `json:"destination" jsonschema:"its new path, e.g. reports/final.md; no live file may hold it"`
}

func moveFileTool() *toolSpec {
	return define(tool("move_file"), nil, func(ctx context.Context, tb *toolbox, in *moveFileIn, cc *callContext) (*reply[File], error) {
		src, err := filePath("source", in.Source)
		if err != nil {
			return nil, err
		}
		dst, err := filePath("destination", in.Destination)
		if err != nil {
			return nil, err
		}
		cc.path = src
		f, err := tb.fileAt(ctx, src)
		if err != nil {
			return nil, err
		}
		cc.dest = dst
		m, err := tb.b.Move(ctx, f.ID, dst, WriteOptions{})
		if err != nil {
			return nil, err
		}
		if src == dst {
			return &reply[File]{Text: fmt.Sprintf("No change: the file is already at %s. %s", dst, summarize(m)), Out: *m}, nil
		}
		return &reply[File]{Text: fmt.Sprintf("Moved %s to %s. Now %s", src, dst, summarize(m)), Out: *m}, nil
	})
}

type fileHistoryIn struct {
	Path   string `json:"path" jsonschema:"the live file whose versions to list, e.g. reports/summary.md"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, for the next page"`
}

// FileHistory is file_history's structured output.
type FileHistory struct {
	Path   string `json:"path"`
	FileID string `json:"file_id"`
	// Versions are newest first.
	Versions   []FileVersion `json:"versions"`
	HasMore    bool          `json:"has_more"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

func fileHistoryTool() *toolSpec {
	return define(tool("file_history"), cursorProperty, func(ctx context.Context, tb *toolbox, in *fileHistoryIn, cc *callContext) (*reply[FileHistory], error) {
		p, f, err := tb.fileArg(ctx, cc, in.Path)
		if err != nil {
			return nil, err
		}
		l, err := tb.b.Versions(ctx, f.ID, VersionPage{Limit: historyPage, Cursor: in.Cursor})
		if err != nil {
			return nil, err
		}
		out := FileHistory{Path: p, FileID: f.ID, Versions: l.Versions, HasMore: l.HasMore, NextCursor: l.NextCursor}
		if out.Versions == nil {
			out.Versions = []FileVersion{}
		}
		return &reply[FileHistory]{Text: historyText(out), Out: out}, nil
	})
}

func historyText(h FileHistory) string {
	var b strings.Builder
	if len(h.Versions) == 0 {
		fmt.Fprintf(&b, "No versions of %s (%s) on this page.", h.Path, h.FileID)
	} else {
		fmt.Fprintf(&b, "Versions of %s (%s), newest first:\n", h.Path, h.FileID)
	}
	for _, v := range h.Versions {
		current := ""
		if v.Current {
			current = " (current)"
		}
		fmt.Fprintf(&b, "version %d%s: %d bytes, %s, etag %s, %s", v.Version, current, v.SizeBytes, v.ContentType, v.ETag,
			v.CreatedAt.Format(rfc3339))
		if v.AgentID != nil {
			fmt.Fprintf(&b, ", agent %s", *v.AgentID)
		}
		if v.RunID != nil {
			fmt.Fprintf(&b, ", run %s", *v.RunID)
		}
		b.WriteString("\n")
	}
	if h.HasMore {
		fmt.Fprintf(&b, "[Older versions follow: call file_history with the same path and cursor=%q.]\n", h.NextCursor)
	}
	if len(h.Versions) > 0 {
		b.WriteString("revert_file with a version makes its content current again; share_file with a version shares it.")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

type revertFileIn struct {
	Path           string `json:"path" jsonschema:"the live file to revert, e.g. reports/summary.md"`
	Version        int64  `json:"version" jsonschema:"the version whose content becomes current again (file_history lists them)"`
	ExpectedETag   string `json:"expected_etag,omitempty" jsonschema:"revert only if the file still has this etag (from get_file_info or file_history), so a change made since is not undone unseen"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"names this revert: repeating the call with the same key and arguments never reverts twice and returns the first result"`
}

func revertFileTool() *toolSpec {
	return define(tool("revert_file"), func(s *jsonschema.Schema) {
		versionProperty(s)
		keyProperty(s)
	}, func(ctx context.Context, tb *toolbox, in *revertFileIn, cc *callContext) (*reply[File], error) {
		p, err := filePath("path", in.Path)
		if err != nil {
			return nil, err
		}
		cc.path, cc.key = p, in.IdempotencyKey
		before, err := tb.fileAt(ctx, p)
		if err != nil {
			return nil, err
		}
		cc.version = in.Version
		f, err := tb.b.Revert(ctx, before.ID, in.Version, WriteOptions{IfMatch: quoteETag(in.ExpectedETag), IdempotencyKey: in.IdempotencyKey})
		if err != nil {
			return nil, err
		}
		var text string
		switch {
		case f.Version < before.Version:
			text = fmt.Sprintf("Already done: idempotency_key %q holds this revert, which made %s version %d; it was not reverted again, and the file has changed since (now version %d). "+
				"(To revert it again, call revert_file with a new idempotency_key.)", in.IdempotencyKey, p, f.Version, before.Version)
		case f.Version == before.Version && f.ETag == before.ETag:
			text = fmt.Sprintf("No change: %s already has the content of version %d; nothing was written. %s", p, in.Version, summarize(f))
		default:
			text = fmt.Sprintf("Reverted %s to the content of version %d. Now %s", p, in.Version, summarize(f))
		}
		return &reply[File]{Text: text, Out: *f}, nil
	})
}
