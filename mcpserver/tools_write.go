package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
	"github.com/google/jsonschema-go/jsonschema"
)

// keyPattern is the Idempotency-Key syntax (the idempotency rules).
const keyPattern = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`

type writeFileIn struct {
	Path           string `json:"path" jsonschema:"where to write, e.g. reports/summary.md"`
	Content        string `json:"content" jsonschema:"the whole new content, as UTF-8 text"`
	IfExists       string `json:"if_exists,omitempty" jsonschema:"error (the default): fail with PATH_EXISTS if a file is there; replace: overwrite it, keeping its id"`
	ExpectedETag   string `json:"expected_etag,omitempty" jsonschema:"replace only if the file still has this etag (from get_file_info or read_text_file), so another writer's change is never overwritten"`
	ExpiresIn      int64  `json:"expires_in,omitempty" jsonschema:"seconds until the file expires (60 to 31536000) and counts as deleted, for scratch output; omit to keep the file's expiry (none for a new file)"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"names this write: repeating the call with the same key and arguments never writes twice and returns the first result"`
}

func writeFileTool() *toolSpec {
	return define(tool("write_file"), func(s *jsonschema.Schema) {
		s.Properties["if_exists"].Enum = []any{IfExistsError, IfExistsReplace}
		seconds(s, "expires_in", agentfs.MinExpiresIn, agentfs.MaxExpiresIn)
		keyProperty(s)
	}, func(ctx context.Context, tb *toolbox, in *writeFileIn, cc *callContext) (*reply[File], error) {
		p, err := filePath("path", in.Path)
		if err != nil {
			return nil, err
		}
		cc.path, cc.key, cc.limit = p, in.IdempotencyKey, tb.opts.MaxWriteBytes
		ifExists := in.IfExists
		if in.ExpectedETag != "" {
			if ifExists == IfExistsError {
				return nil, validation("expected_etag", `asks for a conditional replace; it needs if_exists="replace" (or no if_exists)`)
			}
			ifExists = IfExistsReplace
		}
		if int64(len(in.Content)) > tb.opts.MaxWriteBytes {
			return nil, tooLarge(fmt.Sprintf("content is %d bytes, above the limit of %d", len(in.Content), tb.opts.MaxWriteBytes))
		}
		f, err := tb.b.Put(ctx, PutArgs{Path: p, Content: []byte(in.Content), ContentType: textContentType(p),
			IfExists: cmp.Or(ifExists, IfExistsError), IfMatch: quoteETag(in.ExpectedETag), ExpiresIn: in.ExpiresIn,
			IdempotencyKey: in.IdempotencyKey})
		if err != nil {
			return nil, err
		}
		text := "Wrote " + summarize(f)
		if f.ExpiresAt != nil {
			text += fmt.Sprintf(" It expires at %s: from then on it counts as deleted.", f.ExpiresAt.Format(rfc3339))
		}
		return &reply[File]{Text: text, Out: *f}, nil
	})
}

// seconds bounds property name, a number of seconds, to the API's bounds
// (lifecycle).
func seconds(s *jsonschema.Schema, name string, lo, hi time.Duration) {
	s.Properties[name].Minimum = ptr(lo.Seconds())
	s.Properties[name].Maximum = ptr(hi.Seconds())
}

// keyProperty gives the idempotency_key property its syntax.
func keyProperty(s *jsonschema.Schema) {
	s.Properties["idempotency_key"].Pattern = keyPattern
}

// summarize names a file and its state in one line.
func summarize(f *File) string {
	return fmt.Sprintf("%s: %s, version %d, %d bytes, etag %s.", f.Path, f.ID, f.Version, f.SizeBytes, f.ETag)
}

// quoteETag accepts an etag with or without its quotes.
func quoteETag(e string) string {
	e = strings.TrimSpace(e)
	if e == "" || e == "*" || strings.HasPrefix(e, `"`) || strings.HasPrefix(e, `W/"`) {
		return e
	}
	return `"` + e + `"`
}

// textTypes are the content types of text files by extension; others are
// text/plain. Fixed here, so that a write's content type (part of its
// idempotency fingerprint) never depends on the machine's MIME tables.
var textTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".log": "text/plain",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".html": "text/html", ".htm": "text/html",
	".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json",
	".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson", ".xml": "application/xml",
	".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml",
	".svg": "image/svg+xml", ".py": "text/x-python", ".go": "text/x-go", ".sql": "application/sql",
}

// textContentType is the content type write_file stores for text at p.
func textContentType(p string) string {
	ct, ok := textTypes[strings.ToLower(path.Ext(p))]
	if !ok {
		ct = "text/plain"
	}
	return ct + "; charset=utf-8"
}

type editFileIn struct {
	Path           string   `json:"path" jsonschema:"the text file to edit"`
	Edits          []editIn `json:"edits" jsonschema:"replacements applied in order; each oldText must occur exactly once in the file as the edits before it left it"`
	DryRun         bool     `json:"dryRun,omitempty" jsonschema:"show the diff without writing"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"names this edit: repeating the call with the same key returns the first result instead of editing again"`
}

type editIn struct {
	OldText string `json:"oldText" jsonschema:"text to find, exactly as it is in the file (whitespace and line breaks included)"`
	NewText string `json:"newText" jsonschema:"text to put in its place"`
}

// maxEdits bounds the edits of one edit_file call.
const maxEdits = 100

// EditResult is edit_file's structured output.
type EditResult struct {
	Path string `json:"path"`
	// Diff is a unified diff of the change.
	Diff   string `json:"diff"`
	DryRun bool   `json:"dry_run"`
	// Replayed says the idempotency key already held this write: nothing
	// was edited again.
	Replayed bool `json:"replayed"`
	// File is the file after the write; nil for a dry run or no change.
	File *File `json:"file"`
}

func editFileTool() *toolSpec {
	return define(tool("edit_file"), func(s *jsonschema.Schema) {
		s.Properties["edits"].MinItems = ptr(1)
		s.Properties["edits"].MaxItems = ptr(maxEdits)
		s.Properties["edits"].Items.Properties["oldText"].MinLength = ptr(1)
		keyProperty(s)
	}, runEdit)
}

func runEdit(ctx context.Context, tb *toolbox, in *editFileIn, cc *callContext) (*reply[EditResult], error) {
	p, err := filePath("path", in.Path)
	if err != nil {
		return nil, err
	}
	cc.path, cc.key, cc.limit = p, in.IdempotencyKey, tb.opts.MaxWriteBytes
	if in.IdempotencyKey != "" && !in.DryRun {
		if rep, err := tb.editReplay(ctx, p, in.IdempotencyKey); rep != nil || err != nil {
			return rep, err
		}
	}
	f, c, err := tb.readAt(ctx, p, ReadRequest{Length: tb.opts.MaxWriteBytes + 1})
	if err != nil {
		return nil, err
	}
	if c.Size > tb.opts.MaxWriteBytes {
		return nil, tooLarge(fmt.Sprintf("%s is %d bytes, above the limit of %d", p, c.Size, tb.opts.MaxWriteBytes))
	}
	if !isText(c.Data) {
		return nil, notText(f)
	}
	before := string(c.Data)
	after, err := applyEdits(p, before, in.Edits)
	if err != nil {
		return nil, err
	}
	out := EditResult{Path: p, Diff: unifiedDiff(p, before, after), DryRun: in.DryRun}
	switch {
	case after == before:
		return &reply[EditResult]{Text: fmt.Sprintf("No change: the edits leave %s as it is; nothing was written.", p), Out: out}, nil
	case in.DryRun:
		return &reply[EditResult]{Text: fenced(out.Diff) + "\nDry run: nothing was written.", Out: out}, nil
	case int64(len(after)) > tb.opts.MaxWriteBytes:
		return nil, tooLarge(fmt.Sprintf("the edited %s would be %d bytes, above the limit of %d", p, len(after), tb.opts.MaxWriteBytes))
	}
	nf, err := tb.b.Put(ctx, PutArgs{Path: p, Content: []byte(after), ContentType: cmp.Or(c.ContentType, f.ContentType),
		IfExists: IfExistsReplace, IfMatch: c.ETag, IdempotencyKey: in.IdempotencyKey, seen: c})
	if err != nil {
		return nil, err
	}
	out.File = nf
	return &reply[EditResult]{Text: fenced(out.Diff) + "\nWrote " + summarize(nf), Out: out}, nil
}

// editReplay answers an edit whose idempotency key already holds an
// outcome (the idempotency rules: the same key answers the recorded result): nil, nil
// when the key holds nothing, so the edit runs.
func (tb *toolbox) editReplay(ctx context.Context, p, key string) (*reply[EditResult], error) {
	op, err := tb.b.Operation(ctx, key)
	switch {
	case err != nil:
		return nil, err
	case op == nil, op.Status == OperationAbandoned:
		return nil, nil // nothing happened under the key: the edit runs and takes the claim over
	case op.Status != OperationCompleted:
		return nil, problemFromAPI(problem.New(problem.OperationInProgress, fmt.Sprintf("a write with idempotency_key %q is still running", key)))
	case op.Op != OpPut || op.File != nil && op.File.Path != p:
		return nil, problemFromAPI(problem.New(problem.IdempotencyConflict,
			fmt.Sprintf("idempotency_key %q was already used for another operation", key)))
	case op.Problem != nil:
		return nil, op.Problem
	case op.File == nil:
		return nil, internal()
	}
	out := EditResult{Path: p, Replayed: true, File: op.File}
	text := fmt.Sprintf("Already done: idempotency_key %q holds a completed write of %s, so nothing was edited again. Now %s "+
		"(If that write was not this edit, call edit_file again with a new idempotency_key.)", key, p, summarize(op.File))
	return &reply[EditResult]{Text: text, Out: out}, nil
}

// fenced puts a diff in a Markdown code block, with a fence longer than any
// run of backticks inside it.
func fenced(diff string) string {
	fence := "```"
	for strings.Contains(diff, fence) {
		fence += "`"
	}
	return fence + "diff\n" + diff + fence + "\n"
}

type deleteFileIn struct {
	Path string `json:"path" jsonschema:"the file to delete"`
}

func deleteFileTool() *toolSpec {
	return define(tool("delete_file"), nil, func(ctx context.Context, tb *toolbox, in *deleteFileIn, cc *callContext) (*reply[File], error) {
		p, f, err := tb.fileArg(ctx, cc, in.Path)
		if err != nil {
			return nil, err
		}
		d, err := tb.b.Delete(ctx, f.ID, WriteOptions{})
		if err != nil {
			return nil, err
		}
		text := fmt.Sprintf("Deleted %s (%s).", p, d.ID)
		if d.PurgeAfter != nil {
			text += fmt.Sprintf(" restore_file with file_id %q brings it back until %s.", d.ID, d.PurgeAfter.Format("2006-01-02T15:04:05Z07:00"))
		}
		return &reply[File]{Text: text, Out: *d}, nil
	})
}

type restoreFileIn struct {
	FileID string `json:"file_id" jsonschema:"the id of a deleted file, e.g. file_01jd8x2m4k9q7v3t5r6w8y0z1a (delete_file and list_run_files show it)"`
}

func restoreFileTool() *toolSpec {
	return define(tool("restore_file"), func(s *jsonschema.Schema) {
		s.Properties["file_id"].MinLength = ptr(1)
		s.Properties["file_id"].MaxLength = ptr(64)
	}, func(ctx context.Context, tb *toolbox, in *restoreFileIn, cc *callContext) (*reply[File], error) {
		cc.fileID = in.FileID
		f, err := tb.b.Restore(ctx, in.FileID, WriteOptions{})
		if err != nil {
			return nil, err
		}
		cc.path = f.Path
		return &reply[File]{Text: "Restored " + summarize(f), Out: *f}, nil
	})
}
