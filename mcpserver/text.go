package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// textRead is what a text read returns: the text, and where it sits in the
// file when it is not the whole file.
type textRead struct {
	Text string
	// Start and End are the byte range of the file that Text covers.
	Start, End int64
	Size       int64
	ETag       string
	// Truncated says the file (or the lines asked for) went on beyond what
	// Text holds; Note says how to read more.
	Truncated bool
	Note      string
}

// readText reads a file as UTF-8 text, at most budget bytes: all of it, its
// first head lines, or its last tail lines. Bytes that are not UTF-8 text
// are UNSUPPORTED_MEDIA_TYPE.
func (tb *toolbox) readText(ctx context.Context, f *File, head, tail int, budget int64) (*textRead, error) {
	c, err := tb.b.Read(ctx, ReadRequest{FileID: f.ID, Length: budget, Tail: tail > 0, AsOf: asOfIn(ctx)})
	if err != nil {
		return nil, err
	}
	return textOf(f, c, head, tail, budget)
}

// readTextAt is fileAt and readText of the file found, in one lookup
// where the backend reads by path (readAt).
func (tb *toolbox) readTextAt(ctx context.Context, path string, head, tail int, budget int64) (*File, *textRead, error) {
	f, c, err := tb.readAt(ctx, path, ReadRequest{Length: budget, Tail: tail > 0})
	if err != nil {
		return nil, nil, err
	}
	r, err := textOf(f, c, head, tail, budget)
	return f, r, err
}

// pathReader is a Backend that finds the live file at a path and reads
// its bytes in one lookup (CoreBackend: one Postgres query, not two).
type pathReader interface {
	ReadAt(ctx context.Context, path string, r ReadRequest) (*File, *Content, error)
}

// readAt is fileAt and then Read of the file found (r.FileID and r.AsOf
// are set here): through the backend's ReadAt when it has one and no
// point in ctx asks for the past.
func (tb *toolbox) readAt(ctx context.Context, path string, r ReadRequest) (*File, *Content, error) {
	if pr, ok := tb.b.(pathReader); ok && asOfIn(ctx) == "" {
		return pr.ReadAt(ctx, path, r)
	}
	f, err := tb.fileAt(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	r.FileID, r.AsOf = f.ID, asOfIn(ctx)
	c, err := tb.b.Read(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	return f, c, nil
}

// textOf is the text read of c, bytes of f, for a read of head or tail
// lines within budget.
func textOf(f *File, c *Content, head, tail int, budget int64) (*textRead, error) {
	data, start := c.Data, c.Offset
	cutStart, cutEnd := start > 0, start+int64(len(data)) < c.Size
	if cutEnd {
		data = trimPartialRuneEnd(data)
	}
	if cutStart {
		n := len(data)
		data = trimPartialRuneStart(data)
		start += int64(n - len(data))
	}
	if !isText(data) {
		return nil, notText(f)
	}
	r := &textRead{Start: start, Size: c.Size, ETag: c.ETag}
	switch {
	case head > 0:
		r.Text, r.Truncated = headLines(data, head, cutEnd)
		r.End = start + int64(len(r.Text))
	case tail > 0:
		var skipped int
		r.Text, skipped, r.Truncated = tailLines(data, tail, cutStart)
		r.Start = start + int64(skipped)
		r.End = start + int64(len(data))
	default:
		r.Text, r.Truncated = string(data), cutEnd
		r.End = start + int64(len(data))
	}
	if r.Truncated {
		r.Note = truncationNote(f, r, head, tail, budget)
	}
	return r, nil
}

// isText reports whether b is UTF-8 text: valid UTF-8 without NUL bytes
// (which mark binary formats).
func isText(b []byte) bool {
	return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

func notText(f *File) *Problem {
	return NewProblem(http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
		fmt.Sprintf("%s is not UTF-8 text (content_type %s, %d bytes)", f.Path, f.ContentType, f.SizeBytes))
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence that a cut left at
// the end of b.
func trimPartialRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: nothing cut
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops continuation bytes that a cut left at the
// start of b.
func trimPartialRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	if len(b) >= utf8.UTFMax-1 {
		return b[utf8.UTFMax-1:]
	}
	return b[:0]
}

// headLines returns the first n lines of b (without the last one's
// newline) and whether the lines asked for went on beyond b (cut: b is
// not the whole file).
func headLines(b []byte, n int, cut bool) (string, bool) {
	end := 0
	for i := 0; i < n; i++ {
		nl := bytes.IndexByte(b[end:], '\n')
		if nl < 0 {
			// The file ends (or the read was cut) inside line i+1.
			return string(b), cut
		}
		end += nl + 1
	}
	return string(b[:end-1]), false
}

// tailLines returns the last n lines of b, how many bytes of b it
// skipped, and whether the lines asked for began before b (cut: b does not
// start at the file's start). A trailing newline ends the last line; it
// does not start another.
func tailLines(b []byte, n int, cut bool) (string, int, bool) {
	body := bytes.TrimSuffix(b, []byte{'\n'})
	start := len(body)
	for i := 0; i < n; i++ {
		nl := bytes.LastIndexByte(body[:start], '\n')
		if nl < 0 {
			if !cut {
				return string(body), 0, false
			}
			// The first line of b may be the end of a longer line: drop it.
			first := bytes.IndexByte(body, '\n')
			if first < 0 {
				return string(body), 0, true
			}
			return string(body[first+1:]), first + 1, true
		}
		start = nl
	}
	return string(body[start+1:]), start + 1, false
}

func truncationNote(f *File, r *textRead, head, tail int, budget int64) string {
	shown := fmt.Sprintf("bytes %d-%d of %d", r.Start, r.End, r.Size)
	switch {
	case head > 0:
		return fmt.Sprintf("[Truncated: %s has more than fits in one read of %d bytes; this is %s, fewer than the %d lines asked for. Ask for fewer lines with head, read the end with tail, or call share_file for a URL that serves the whole file.]", f.Path, budget, shown, head)
	case tail > 0:
		return fmt.Sprintf("[Truncated: %s has more than fits in one read of %d bytes; this is %s, fewer than the %d lines asked for. Ask for fewer lines with tail, read the start with head, or call share_file for a URL that serves the whole file.]", f.Path, budget, shown, tail)
	}
	return fmt.Sprintf("[Truncated: %s is %d bytes and one read returns at most %d; this is %s. Call read_text_file with head=N or tail=N (a number of lines) to read its start or its end; for all of it, call share_file: it answers a URL that serves the whole file.]", f.Path, r.Size, budget, shown)
}
