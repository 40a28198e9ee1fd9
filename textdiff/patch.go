package textdiff

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/agentfs/agentfs"
)

// Opener opens the size bytes of the blob key.
type Opener func(ctx context.Context, key string, size int64) (io.ReadCloser, error)

// GitPatch renders changes as one git-style unified diff that git apply
// accepts for text files: new/deleted file modes, renames, and "Binary
// files … differ" for a side that is not UTF-8 text, is over MaxPatchText
// bytes or is blocked. open reads each side's bytes.
func GitPatch(ctx context.Context, changes []agentfs.Change, open Opener) (string, error) {
	var b strings.Builder
	for _, ch := range changes {
		if err := patchOne(ctx, &b, ch, open); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// MaxPatchText bounds the bytes of one side of a file a patch shows as
// text; a larger file is shown as "Binary files … differ".
const MaxPatchText = 1 << 20

// patchOne writes one change: its git headers, then its hunks, or the
// binary line when either side is not text.
func patchOne(ctx context.Context, b *strings.Builder, ch agentfs.Change, open Opener) error {
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
	before, okA, err := patchText(ctx, ch, ch.From, open)
	if err != nil {
		return err
	}
	after, okB, err := patchText(ctx, ch, ch.To, open)
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
	if h := Hunks(before, after); h != "" {
		fmt.Fprintf(b, "--- %s\n+++ %s\n%s", minus, plus, h)
	}
	return nil
}

// patchText is one side's bytes as text: "" and true for an absent side,
// false when the side is binary, too large or blocked.
func patchText(ctx context.Context, ch agentfs.Change, st *agentfs.FileState, open Opener) (string, bool, error) {
	if st == nil || st.SizeBytes == 0 {
		return "", true, nil
	}
	if ch.Blocked || st.SizeBytes > MaxPatchText {
		return "", false, nil
	}
	rc, err := open(ctx, st.BlobKey, st.SizeBytes)
	if err != nil {
		return "", false, fmt.Errorf("patch of %s: %w", st.Path, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, MaxPatchText+1))
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
