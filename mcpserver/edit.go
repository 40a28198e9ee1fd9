package mcpserver

import (
	"fmt"
	"strings"
)

// applyEdits applies edit_file's replacements to content in order. Each
// oldText must occur exactly once in the content as the edits before it
// left it; otherwise the edit is a VALIDATION_FAILED naming it. In a file
// with CRLF line endings, an oldText and newText written with LF match and
// keep the file's CRLF.
func applyEdits(path, content string, edits []editIn) (string, error) {
	crlf := strings.Contains(content, "\r\n")
	for i, e := range edits {
		old, repl := e.OldText, e.NewText
		if crlf && strings.Contains(old, "\n") && !strings.Contains(old, "\r\n") {
			old, repl = toCRLF(old), toCRLF(repl)
		}
		field := fmt.Sprintf("edits[%d].oldText", i)
		at := strings.Index(content, old)
		if at < 0 {
			return "", validation(field, absentMessage(path, content, old, i))
		}
		if strings.Contains(content[at+1:], old) {
			return "", validation(field, fmt.Sprintf("occurs %s in %s%s; include more of the surrounding lines so that it occurs exactly once",
				times(strings.Count(content, old)), path, afterEdits(i)))
		}
		content = content[:at] + repl + content[at+len(old):]
	}
	return content, nil
}

func absentMessage(path, content, old string, i int) string {
	msg := fmt.Sprintf("does not occur in %s%s; copy it exactly from read_text_file, whitespace and line breaks included", path, afterEdits(i))
	if strings.Contains(collapseSpace(content), collapseSpace(old)) {
		msg += " (it occurs with different whitespace or indentation)"
	}
	return msg
}

func afterEdits(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf(" as the %d edit(s) before it left it", i)
}

func times(n int) string {
	if n < 2 {
		return "more than once (overlapping)"
	}
	return fmt.Sprintf("%d times", n)
}

func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// collapseSpace turns every run of whitespace into one space.
func collapseSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
