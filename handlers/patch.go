package handlers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/textdiff"
)

// maxPatchText bounds the bytes of one side of a file a patch shows as
// text; a larger file is shown as "Binary files … differ".
const maxPatchText = 1 << 20

// writePatch answers changes as one git-style unified diff (text/x-diff)
// that git apply accepts for text files; the cursor of the next page, if
// any, is in a Link header.
func (a *API) writePatch(c echo.Context, changes []agentfs.Change, next string) error {
	var b strings.Builder
	for _, ch := range changes {
		if err := a.patchOne(c.Request().Context(), &b, ch); err != nil {
			return err
		}
	}
	if next != "" {
		q := c.Request().URL.Query()
		q.Set("cursor", next)
		c.Response().Header().Set("Link", "<"+c.Request().URL.Path+"?"+q.Encode()+`>; rel="next"`)
	}
	return c.Blob(http.StatusOK, "text/x-diff; charset=utf-8", []byte(b.String()))
}

// patchOne writes one change: its git headers, then its hunks, or the
// binary line when either side is not text.
func (a *API) patchOne(ctx context.Context, b *strings.Builder, ch agentfs.Change) error {
	aPath, bPath := ch.Path, ch.Path
	if ch.From != nil {
		aPath = ch.From.Path
	}
	fmt.Fprintf(b, "diff --git %s %s\n", gitPath("a/", aPath), gitPath("b/", bPath))
	switch {
	case ch.From == nil:
		b.WriteString("new file mode 100644\n")
	case ch.To == nil:
		b.WriteString("deleted file mode 100644\n")
	case aPath != bPath:
		fmt.Fprintf(b, "rename from %s\nrename to %s\n", gitPath("", aPath), gitPath("", bPath))
	}
	if ch.From != nil && ch.To != nil && ch.From.SHA256 == ch.To.SHA256 {
		return nil // a move with the same bytes
	}
	before, okA, err := a.patchText(ctx, ch, ch.From)
	if err != nil {
		return err
	}
	after, okB, err := a.patchText(ctx, ch, ch.To)
	if err != nil {
		return err
	}
	minus, plus := "/dev/null", "/dev/null"
	if ch.From != nil {
		minus = gitPath("a/", aPath)
	}
	if ch.To != nil {
		plus = gitPath("b/", bPath)
	}
	if !okA || !okB {
		fmt.Fprintf(b, "Binary files %s and %s differ\n", minus, plus)
		return nil
	}
	if h := textdiff.Hunks(before, after); h != "" {
		fmt.Fprintf(b, "--- %s\n+++ %s\n%s", minus, plus, h)
	}
	return nil
}

// patchText is one side's bytes as text: "" and true for an absent side,
// false when the side is binary, too large or blocked.
func (a *API) patchText(ctx context.Context, ch agentfs.Change, st *agentfs.FileState) (string, bool, error) {
	if st == nil || st.SizeBytes == 0 {
		return "", true, nil
	}
	if ch.Blocked || st.SizeBytes > maxPatchText {
		return "", false, nil
	}
	rc, err := a.deps.Files.OpenBlob(ctx, st.BlobKey, 0, st.SizeBytes)
	if err != nil {
		return "", false, fmt.Errorf("patch of %s: %w", st.Path, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, maxPatchText+1))
	if err != nil {
		return "", false, fmt.Errorf("patch of %s: %w", st.Path, err)
	}
	if bytes.IndexByte(raw, 0) >= 0 || !utf8.Valid(raw) {
		return "", false, nil
	}
	return string(raw), true, nil
}

// gitPath is prefix+p as git writes it: C-quoted when p has a quote, a
// backslash, a control character or a non-ASCII byte.
func gitPath(prefix, p string) string {
	s := prefix + p
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
