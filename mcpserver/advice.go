package mcpserver

import (
	"cmp"
	"fmt"
	"strings"
)

// callContext is what a tool knows about a failed call, to word its error
// for the model.
type callContext struct {
	tool   string
	path   string // the path the call acted on, if any
	fileID string // the file id the call acted on, if any
	key    string // the idempotency key the model gave, if any
	// dest is move_file's destination, once its source was found.
	dest string
	// version is the version the call names, once its file was found.
	version int64
	// runID is the run run_summary asked about.
	runID string
	// limit is the byte limit a PAYLOAD_TOO_LARGE exceeded, if the tool
	// set it.
	limit int64
	// answerLimit is what one /mcp request answers at most, when the call
	// did not run because the request's earlier calls answered that much.
	answerLimit int64
	// invalid says the arguments did not match the tool's input schema.
	invalid bool
}

// errorText is the text of a failed call: the code and what happened, then
// whether retrying can help, then what to do next.
func errorText(c callContext, p *Problem) string {
	var b strings.Builder
	b.WriteString(p.Code + ": " + sentence(what(c, p)))
	for _, fe := range p.Errors {
		if !strings.Contains(p.Detail, fe.Message) {
			fmt.Fprintf(&b, " (%s: %s)", fe.Field, fe.Message)
		}
	}
	b.WriteString(" " + retrySentence(c, p))
	if next := nextStep(c, p); next != "" {
		b.WriteString(" " + sentence(next))
	}
	return b.String()
}

// what says what happened, in the tool's terms where it knows them better
// than the API's generic detail.
func what(c callContext, p *Problem) string {
	switch {
	case p.Code == "PATH_EXISTS" && c.dest != "" && p.ExistingFileID != "":
		return fmt.Sprintf("a live file already holds %s (%s); nothing was moved", c.dest, p.ExistingFileID)
	case p.Code == "PATH_EXISTS" && c.dest != "":
		return fmt.Sprintf("a live file already holds %s; nothing was moved", c.dest)
	case p.Code == "PATH_EXISTS" && c.path != "" && p.ExistingFileID != "":
		return fmt.Sprintf("%s already exists (%s)", c.path, p.ExistingFileID)
	case p.Code == "NOT_FOUND" && c.runID != "":
		return fmt.Sprintf("no run %s: no change to a file of this token's subject carries that run id", c.runID)
	case p.Code == "NOT_FOUND" && c.version > 0:
		return fmt.Sprintf("%s has no version %d: it was never made, or the version retention dropped it", c.path, c.version)
	case p.Code == "NOT_FOUND" && c.fileID != "":
		return fmt.Sprintf("no file %s is visible to this token", c.fileID)
	case p.Code == "PRECONDITION_FAILED" && c.tool == "edit_file":
		return fmt.Sprintf("%s changed after edit_file read it (another writer got there first); nothing was written", c.path)
	case p.Code == "PRECONDITION_FAILED" && c.path != "":
		return fmt.Sprintf("the live file at %s does not have the expected etag (someone wrote it since, or it does not exist); nothing was written", c.path)
	}
	return p.message()
}

func retrySentence(c callContext, p *Problem) string {
	if !p.Retryable {
		return "Retrying the same call will not help."
	}
	s := "Retrying can help"
	if p.RetryAfterSeconds > 0 {
		s += fmt.Sprintf(" after %d seconds", p.RetryAfterSeconds)
	}
	key := cmp.Or(c.key, p.IdempotencyKey)
	if key != "" {
		s += fmt.Sprintf(`; repeat it with idempotency_key=%q, which can never write twice`, key)
	}
	return s + "."
}

// nextStep says what to do instead, per code and tool.
func nextStep(c callContext, p *Problem) string {
	switch p.Code {
	case "PATH_EXISTS":
		if c.tool == "restore_file" {
			return "Another live file now holds its path: delete_file that path first, then call restore_file again"
		}
		if c.tool == "move_file" {
			return "Choose another destination, or, to replace that file, delete_file it first (restore_file can bring it back) and call move_file again"
		}
		return `Call write_file with if_exists="replace" to overwrite it (with expected_etag from get_file_info to replace only the version you saw), or choose another path`
	case "NOT_FOUND":
		switch {
		case c.runID != "":
			return "Check the run id: a run is known once it changed a file of this token's subject (get_file_info shows the run_id of a file's writes)"
		case c.version > 0:
			return fmt.Sprintf("Call file_history with path %q to see the versions that are kept", c.path)
		}
		if c.fileID != "" {
			return "Check the file id (list_run_files shows the ids of a run's files); a file of another token's subject is never visible"
		}
		return "Use list_directory or search_files to find the right path"
	case "PRECONDITION_FAILED":
		if c.tool == "edit_file" {
			return "Call edit_file again: it reads the current content, so first check (read_text_file) that your edits still make sense"
		}
		if c.tool == "revert_file" {
			return "Call file_history to see the current version and etag, and decide whether to revert it still"
		}
		return "Read the file again (read_text_file or get_file_info) to see its current content and etag before deciding to overwrite it"
	case "IDEMPOTENCY_CONFLICT":
		return "That idempotency_key was already used for a different request: use a new key for a new write, or repeat the original arguments exactly to get its recorded result"
	case "OPERATION_IN_PROGRESS":
		return "A call with the same idempotency_key is still running; repeat this call to get its outcome"
	case "FORBIDDEN":
		return forbiddenAdvice(p)
	case "UNAUTHENTICATED":
		return "The token is missing, wrong or revoked; whoever configured this server must supply a valid AgentFS token"
	case CodeInvalidPath:
		return `Paths look like reports/summary.md: '/'-separated names, no empty, '.' or '..' segment, no backslash or control character, at most 1024 bytes`
	case CodeValidationFailed, "INVALID_REQUEST":
		return "Fix the arguments named above and call again"
	case CodePayloadTooLarge:
		return tooLargeAdvice(c)
	case CodeUnsupportedMedia:
		return "Call read_media_file for images, audio and other binary files, or share_file for a URL that serves the bytes"
	case "CONTENT_BLOCKED":
		return "An operator blocked this file: it cannot be read or replaced"
	case "RATE_LIMITED", "QUOTA_EXCEEDED":
		return "Wait before writing more"
	case "STORAGE_UNAVAILABLE", CodeInternal, CodeUnreachable:
		return "AgentFS could not complete the call; if it was a write, it may or may not have happened"
	}
	return ""
}

// forbiddenAdvice says which scope the token lacks, as the server said.
func forbiddenAdvice(p *Problem) string {
	if p.MissingScope == "" {
		// The token's grant refused it: a path outside its folders, a run
		// or agent it is not pinned to, its byte budget spent.
		return "This token's grant does not allow it (the message above says why): work inside the folders it names, " +
			"or ask whoever gave you this token for one that allows it"
	}
	return fmt.Sprintf("This call needs the %s scope, which this token lacks; whoever configured this server must supply a token with it. "+
		"The tools that need only this token's scopes still work", p.MissingScope)
}

func tooLargeAdvice(c callContext) string {
	if c.answerLimit > 0 {
		return "Send this call again in a request of its own: one request answers at most " + fmt.Sprint(c.answerLimit) + " bytes"
	}
	switch c.tool {
	case "write_file":
		return fmt.Sprintf("write_file takes at most %d bytes of content: split the content into several files", c.limit)
	case "edit_file":
		return fmt.Sprintf("edit_file edits files of at most %d bytes; replace a larger file whole with write_file, or keep it in several smaller files", c.limit)
	case "read_media_file":
		return fmt.Sprintf("read_media_file returns at most %d bytes of base64; this file is too large to return inline: share_file gives a URL that serves it whole", c.limit)
	}
	return ""
}

// sentence ends s with a period unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!") {
		return s
	}
	return s + "."
}
