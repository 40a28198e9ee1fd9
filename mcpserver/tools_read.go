package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLines bounds head and tail; any larger count reads the whole budget
// anyway.
const maxLines = 1 << 30

type readTextFileIn struct {
	Path string `json:"path" jsonschema:"the file's path, e.g. reports/summary.md"`
	Head int    `json:"head,omitempty" jsonschema:"return only the first N lines"`
	Tail int    `json:"tail,omitempty" jsonschema:"return only the last N lines"`
	AsOf string `json:"as_of,omitempty" jsonschema:"read the file as it was at this point: a checkpoint id or name, an event cursor, an RFC 3339 time, or now"`
}

// TextFile is read_text_file's structured output.
type TextFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Start and End are the byte range of the file that Content covers.
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	SizeBytes int64  `json:"size_bytes"`
	ETag      string `json:"etag"`
	Truncated bool   `json:"truncated"`
	Note      string `json:"note,omitempty"`
}

func readTextFileTool() *toolSpec {
	return define(tool("read_text_file"), func(s *jsonschema.Schema) {
		lines(s, "head")
		lines(s, "tail")
	}, func(ctx context.Context, tb *toolbox, in *readTextFileIn, cc *callContext) (*reply[TextFile], error) {
		p, err := cc.pathArg(filePath, in.Path)
		if err != nil {
			return nil, err
		}
		if in.Head > 0 && in.Tail > 0 {
			return nil, validation("tail", "give head or tail, not both")
		}
		ctx = withAsOf(ctx, in.AsOf)
		_, r, err := tb.readTextAt(ctx, p, in.Head, in.Tail, tb.opts.MaxReadBytes)
		if err != nil {
			return nil, err
		}
		out := TextFile{Path: p, Content: r.Text, Start: r.Start, End: r.End, SizeBytes: r.Size, ETag: r.ETag,
			Truncated: r.Truncated, Note: r.Note}
		rep := &reply[TextFile]{Text: r.Text, Out: out}
		if r.Note != "" {
			rep.Extra = []mcp.Content{&mcp.TextContent{Text: r.Note}}
		}
		return rep, nil
	})
}

// lines makes property name a positive line count.
func lines(s *jsonschema.Schema, name string) {
	s.Properties[name].Minimum = ptr(1.0)
	s.Properties[name].Maximum = ptr(float64(maxLines))
}

// fileAt is Backend.FileAt, with a NOT_FOUND that names the path; with a
// point in ctx (withAsOf), the file that held the path then.
func (tb *toolbox) fileAt(ctx context.Context, path string) (*File, error) {
	if point := asOfIn(ctx); point != "" {
		page, err := tb.b.List(ctx, ListFilter{Path: path, Limit: 1, AsOf: point})
		if err != nil {
			return nil, err
		}
		if len(page.Files) == 0 {
			return nil, notFound(fmt.Sprintf("no file at %s as of %s", path, point))
		}
		return &page.Files[0], nil
	}
	f, err := tb.b.FileAt(ctx, path)
	var p *Problem
	if errors.As(err, &p) && p.Code == CodeNotFound {
		return nil, notFound(fmt.Sprintf("no live file at %s", path))
	}
	return f, err
}

type readMediaFileIn struct {
	Path string `json:"path" jsonschema:"the file's path, e.g. charts/loss.png"`
}

// MediaFile is read_media_file's structured output; the bytes themselves
// are the result's image, audio or resource content.
type MediaFile struct {
	Path      string `json:"path"`
	MIMEType  string `json:"mime_type"`
	Type      string `json:"type" jsonschema:"image, audio or blob: the kind of content block that carries the bytes"`
	SizeBytes int64  `json:"size_bytes"`
	ETag      string `json:"etag"`
}

func readMediaFileTool() *toolSpec {
	return define(tool("read_media_file"), nil, func(ctx context.Context, tb *toolbox, in *readMediaFileIn, cc *callContext) (*reply[MediaFile], error) {
		p, err := filePath("path", in.Path)
		if err != nil {
			return nil, err
		}
		cc.path, cc.limit = p, tb.opts.MaxMediaBytes
		f, err := tb.fileAt(ctx, p)
		if err != nil {
			return nil, err
		}
		maxRaw := tb.opts.MaxMediaBytes / 4 * 3
		if f.SizeBytes > maxRaw {
			return nil, mediaTooLarge(f.Path, f.SizeBytes, tb.opts.MaxMediaBytes)
		}
		c, err := tb.b.Read(ctx, ReadRequest{FileID: f.ID, Length: maxRaw})
		if err != nil {
			return nil, err
		}
		if c.Size > maxRaw {
			return nil, mediaTooLarge(f.Path, c.Size, tb.opts.MaxMediaBytes)
		}
		mt := mediaType(c.ContentType, c.Data)
		out := MediaFile{Path: p, MIMEType: mt, SizeBytes: c.Size, ETag: c.ETag}
		var block mcp.Content
		switch {
		case strings.HasPrefix(mt, "image/"):
			out.Type, block = "image", &mcp.ImageContent{Data: c.Data, MIMEType: mt}
		case strings.HasPrefix(mt, "audio/"):
			out.Type, block = "audio", &mcp.AudioContent{Data: c.Data, MIMEType: mt}
		default:
			out.Type, block = "blob", &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: f.URL, MIMEType: mt, Blob: c.Data}}
		}
		text := fmt.Sprintf("%s: %s, %d bytes, etag %s", p, mt, c.Size, c.ETag)
		return &reply[MediaFile]{Text: text, Out: out, Extra: []mcp.Content{block}}, nil
	})
}

func mediaTooLarge(path string, size, limit int64) *Problem {
	return tooLarge(fmt.Sprintf("%s is %d bytes, %d bytes as base64, above the limit of %d", path, size,
		base64.StdEncoding.EncodedLen(int(min(size, 1<<40))), limit))
}

// mediaType is the MIME type (without parameters) to label bytes with:
// the stored content type, or one sniffed from the bytes when the stored
// one says nothing.
func mediaType(stored string, data []byte) string {
	mt, _, err := mime.ParseMediaType(stored)
	if err != nil || mt == "" || mt == "application/octet-stream" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	return mt
}

type readMultipleFilesIn struct {
	Paths []string `json:"paths" jsonschema:"the files' paths"`
}

// maxMultiplePaths bounds read_multiple_files.
const maxMultiplePaths = 100

// MultipleFiles is read_multiple_files' structured output.
type MultipleFiles struct {
	Files []MultipleFile `json:"files"`
}

// MultipleFile is one file of read_multiple_files: its text or its error.
type MultipleFile struct {
	Path      string   `json:"path"`
	Content   string   `json:"content,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	Note      string   `json:"note,omitempty"`
	ETag      string   `json:"etag,omitempty"`
	Error     *Problem `json:"error,omitempty"`
}

func readMultipleFilesTool() *toolSpec {
	t := tool("read_multiple_files")
	return define(t, func(s *jsonschema.Schema) {
		s.Properties["paths"].MinItems = ptr(1)
		s.Properties["paths"].MaxItems = ptr(maxMultiplePaths)
	}, func(ctx context.Context, tb *toolbox, in *readMultipleFilesIn, cc *callContext) (*reply[MultipleFiles], error) {
		budget := tb.opts.MaxReadBytes
		out := MultipleFiles{Files: []MultipleFile{}}
		var text []string
		for _, arg := range in.Paths {
			mf := tb.readOneOfMany(ctx, arg, &budget)
			if mf.Error != nil && mf.Error.Code == CodeForbidden {
				return nil, mf.Error // the token's, not the file's: no file reads
			}
			out.Files = append(out.Files, mf)
			switch {
			case mf.Error != nil:
				text = append(text, fmt.Sprintf("%s: Error - %s", arg, errorText(callContext{tool: t.Name, path: mf.Path}, mf.Error)))
			case mf.Note != "":
				text = append(text, fmt.Sprintf("%s:\n%s\n%s", mf.Path, mf.Content, mf.Note))
			default:
				text = append(text, fmt.Sprintf("%s:\n%s", mf.Path, mf.Content))
			}
		}
		return &reply[MultipleFiles]{Text: strings.Join(text, "\n---\n"), Out: out}, nil
	})
}

// readOneOfMany reads one file of read_multiple_files within what is left
// of the call's budget, and takes what it read from the budget.
func (tb *toolbox) readOneOfMany(ctx context.Context, arg string, budget *int64) MultipleFile {
	mf := MultipleFile{Path: arg}
	fail := func(err error) MultipleFile {
		var p *Problem
		if !errors.As(err, &p) {
			p = internal()
		}
		mf.Error = p
		return mf
	}
	p, err := filePath("paths", arg)
	if err != nil {
		return fail(err)
	}
	mf.Path = p
	if *budget < 1 {
		mf.Truncated = true
		mf.Note = fmt.Sprintf("[Not read: this call already returned %d bytes; read %s with read_text_file.]", tb.opts.MaxReadBytes, p)
		return mf
	}
	_, r, err := tb.readTextAt(ctx, p, 0, 0, *budget)
	if err != nil {
		return fail(err)
	}
	*budget -= int64(len(r.Text))
	mf.Content, mf.Truncated, mf.Note, mf.ETag = r.Text, r.Truncated, r.Note, r.ETag
	return mf
}

type getFileInfoIn struct {
	Path string `json:"path" jsonschema:"a file's or directory's path"`
}

// FileInfo is get_file_info's structured output.
type FileInfo struct {
	Path string `json:"path"`
	Type string `json:"type" jsonschema:"file or directory"`
	// File is the file's metadata; nil for a directory.
	File *File `json:"file"`
}

func getFileInfoTool() *toolSpec {
	return define(tool("get_file_info"), nil, func(ctx context.Context, tb *toolbox, in *getFileInfoIn, cc *callContext) (*reply[FileInfo], error) {
		p, err := cc.pathArg(filePath, in.Path)
		if err != nil {
			return nil, err
		}
		f, err := tb.fileAt(ctx, p)
		var prob *Problem
		if errors.As(err, &prob) && prob.Code == CodeNotFound {
			page, lerr := tb.b.List(ctx, ListFilter{Prefix: p + "/", Limit: 1})
			if lerr != nil {
				return nil, lerr
			}
			if len(page.Files) > 0 {
				return &reply[FileInfo]{Text: fmt.Sprintf("path: %s\ntype: directory", p), Out: FileInfo{Path: p, Type: "directory"}}, nil
			}
		}
		if err != nil {
			return nil, err
		}
		return &reply[FileInfo]{Text: "type: file\n" + describeFile(f), Out: FileInfo{Path: p, Type: "file", File: f}}, nil
	})
}

// describeFile renders a file's metadata as "name: value" lines.
func describeFile(f *File) string {
	var b strings.Builder
	line := func(name string, v any) { fmt.Fprintf(&b, "%s: %v\n", name, v) }
	line("path", f.Path)
	line("id", f.ID)
	line("size_bytes", f.SizeBytes)
	line("content_type", f.ContentType)
	line("version", f.Version)
	line("etag", f.ETag)
	line("sha256", f.SHA256)
	line("created_at", f.CreatedAt.Format("2006-01-02T15:04:05Z07:00"))
	line("updated_at", f.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"))
	for _, v := range []struct {
		name string
		v    *string
	}{{"agent_id", f.AgentID}, {"run_id", f.RunID}, {"last_agent_id", f.LastAgentID}, {"last_run_id", f.LastRunID}} {
		if v.v != nil {
			line(v.name, *v.v)
		}
	}
	if f.DeletedAt != nil {
		line("deleted_at", f.DeletedAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	if f.PurgeAfter != nil {
		line("purge_after", f.PurgeAfter.Format("2006-01-02T15:04:05Z07:00"))
	}
	if f.ExpiresAt != nil {
		line("expires_at", f.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	if f.Blocked {
		line("blocked", true)
	}
	line("url", f.URL)
	return strings.TrimSuffix(b.String(), "\n")
}
