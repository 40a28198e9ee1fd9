package problem

import "net/http"

// Codes of every problem the API answers with. Clients switch on these, never
// on titles or details.
const (
	InvalidRequest         = "INVALID_REQUEST"
	InvalidHeader          = "INVALID_HEADER"
	InvalidIdempotencyKey  = "INVALID_IDEMPOTENCY_KEY"
	IdempotencyKeyRequired = "IDEMPOTENCY_KEY_REQUIRED"
	Unauthenticated        = "UNAUTHENTICATED"
	Forbidden              = "FORBIDDEN"
	NotFound               = "NOT_FOUND"
	MethodNotAllowed       = "METHOD_NOT_ALLOWED"
	RequestTimeout         = "REQUEST_TIMEOUT"
	PathExists             = "PATH_EXISTS"
	IdempotencyConflict    = "IDEMPOTENCY_CONFLICT"
	OperationInProgress    = "OPERATION_IN_PROGRESS"
	UploadCompleted        = "UPLOAD_COMPLETED"
	UploadAborted          = "UPLOAD_ABORTED"
	UploadExpired          = "UPLOAD_EXPIRED"
	LengthRequired         = "LENGTH_REQUIRED"
	PreconditionFailed     = "PRECONDITION_FAILED"
	PayloadTooLarge        = "PAYLOAD_TOO_LARGE"
	UnsupportedMediaType   = "UNSUPPORTED_MEDIA_TYPE"
	RangeNotSatisfiable    = "RANGE_NOT_SATISFIABLE"
	ValidationFailed       = "VALIDATION_FAILED"
	InvalidPath            = "INVALID_PATH"
	SizeMismatch           = "SIZE_MISMATCH"
	ChecksumMismatch       = "CHECKSUM_MISMATCH"
	PartsMissing           = "PARTS_MISSING"
	SearchTooBroad         = "SEARCH_TOO_BROAD"
	RateLimited            = "RATE_LIMITED"
	QuotaExceeded          = "QUOTA_EXCEEDED"
	ContentBlocked         = "CONTENT_BLOCKED"
	ChangedSinceRun        = "CHANGED_SINCE_RUN"
	CursorExpired          = "CURSOR_EXPIRED"
	CheckpointExists       = "CHECKPOINT_EXISTS"
	MergeConflict          = "MERGE_CONFLICT"
	Internal               = "INTERNAL"
	StorageUnavailable     = "STORAGE_UNAVAILABLE"
)

// Kind describes one problem code: its status, its title and what a caller
// should do about it. /problems/{code} serves these.
type Kind struct {
	Code        string `json:"code"`
	Status      int    `json:"status"`
	Title       string `json:"title"`
	Retryable   bool   `json:"retryable"`
	Description string `json:"description"`
	// Recorded says whether a keyed write that ends in this problem keeps
	// it under its Idempotency-Key (it was decided against stored state, so
	// repeating the request answers the same) or releases the key (it may
	// pass when repeated).
	Recorded bool `json:"-"`
}

var catalog = map[string]Kind{}

// entry is a line of the catalog as written below.
type entry struct {
	Code        string
	Status      int
	Title       string
	Retryable   bool
	Description string
}

func init() {
	for _, k := range []entry{
		{InvalidRequest, 400, "Invalid request", false, "The request could not be parsed: malformed JSON or multipart, a non-numeric number, an unreadable cursor. Fix the request; repeating it unchanged fails the same way."},
		{InvalidHeader, 400, "Invalid header", false, "A header has a value outside its syntax, e.g. X-Agent-ID or X-Run-ID outside 1-128 characters of A-Z a-z 0-9 . _ : / = + @ - starting with a letter or digit, a malformed Content-Digest or Range, or a header that changes what the request means (Authorization, Idempotency-Key, Content-Type, Content-Digest, If-Match, If-None-Match, If-Range, Range, X-Agent-ID, X-Run-ID, MCP-Protocol-Version, Mcp-Session-Id) sent in more than one line."},
		{InvalidIdempotencyKey, 400, "Invalid Idempotency-Key", false, "Idempotency-Key must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ (a quoted structured-field string is accepted)."},
		{IdempotencyKeyRequired, 400, "Idempotency-Key required", false, "This route only runs with an Idempotency-Key header, so that retrying it can never duplicate its effect."},
		{Unauthenticated, 401, "Unauthenticated", false, "Send a valid, unrevoked token as Authorization: Bearer TOKEN."},
		{Forbidden, 403, "Forbidden", false, "The token may not do this: it lacks a scope the request needs (missing_scope names it), the path is outside its prefixes, the request names another run or agent than the token is pinned to, its max_bytes is spent, or a token asked for would exceed its parent. Nothing was done: the detail says which; ask for a token that may."},
		{NotFound, 404, "Not found", false, "No such route, or no such resource for this subject. Other subjects' resources are reported as not found too."},
		{MethodNotAllowed, 405, "Method not allowed", false, "The route exists but not with this method; the Allow header lists the methods it takes."},
		{RequestTimeout, 408, "Request timeout", true, "The request body stalled longer than the server's idle limit. Nothing was stored; retry with backoff."},
		{PathExists, 409, "Path exists", false, "A live file already holds this path; existing_file_id names it. Upload with if_exists=replace to replace it, or pick another path. A plain create retried after a lost response lands here instead of creating a second file."},
		{IdempotencyConflict, 409, "Idempotency conflict", false, "This Idempotency-Key was already used for a different request (other bytes, path, parameters or attribution headers). Use a new key for a new request."},
		{OperationInProgress, 409, "Operation in progress", true, "A request with this Idempotency-Key is still running, or another request holds the upload session (a complete of it or of another session of its path, or a part on its way). Nothing was done: wait as Retry-After says and send the same request again (with the same key), or poll the operation named in the Link header."},
		{UploadCompleted, 409, "Upload completed", false, "The upload session is already completed; it takes no more parts."},
		{UploadAborted, 409, "Upload aborted", false, "The upload session was aborted; start a new one."},
		{UploadExpired, 409, "Upload expired", false, "The upload session expired; start a new one."},
		{ChangedSinceRun, 409, "Changed since the run", false, "Another run changed this file after the run being reverted last wrote it, so undoing the run would undo that change too. Revert with force to override, or leave the file as it is."},
		{CheckpointExists, 409, "Checkpoint exists", false, "The subject already has a checkpoint of this name. Pick another name, or delete the old checkpoint first."},
		{MergeConflict, 409, "Merge conflict", false, "Paths changed both in the fork and in the target since the fork's base; conflicts lists each with its three sides, and nothing was merged. Merge again with on_conflict fork or target to choose a side, or make the sides agree first."},
		{CursorExpired, 410, "Cursor expired", false, "The events after this cursor may have been removed by the retention (AGENTFS_EVENT_RETENTION). Start again without after, or with after=now."},
		{LengthRequired, 411, "Length required", false, "This request needs a Content-Length header."},
		{PreconditionFailed, 412, "Precondition failed", false, "If-Match or If-None-Match did not hold: the file changed or exists. Read its current etag and decide again."},
		{PayloadTooLarge, 413, "Payload too large", false, "The body is larger than the server accepts; /v1/protocol lists the limits. Large files go through upload sessions."},
		{UnsupportedMediaType, 415, "Unsupported media type", false, "The Content-Type is not one this route accepts."},
		{RangeNotSatisfiable, 416, "Range not satisfiable", false, "The requested byte range lies outside the content; Content-Range carries its size."},
		{ValidationFailed, 422, "Validation failed", false, "A well-formed value is not allowed; errors names each field and why."},
		{InvalidPath, 422, "Invalid path", false, "Paths are normalized to Unicode NFC, then 1-1024 bytes of UTF-8, segments separated by /, with no leading /, no empty, . or .. segment, no control characters, no backslash, no bidirectional controls, no invisible format characters (Unicode Cf; a zero-width joiner or non-joiner only where spelling needs it) and no line or paragraph separators."},
		{SizeMismatch, 422, "Size mismatch", false, "The body's size differs from the size that was declared or required."},
		{ChecksumMismatch, 422, "Checksum mismatch", false, "The bytes received do not match the digest sent with them. Nothing was stored; resend the content."},
		{PartsMissing, 422, "Parts missing", false, "The upload cannot complete before every part has arrived; missing_parts lists them."},
		{SearchTooBroad, 422, "Search too broad", false, "The search could not finish within the search timeout (AGENTFS_SEARCH_TIMEOUT): its pattern rules out too few files or matches too many lines. Nothing partial is answered. Narrow it: a longer literal in the pattern, a prefix, a glob, or a run_id."},
		{RateLimited, 429, "Rate limited", true, "Too many requests for this subject. Wait as Retry-After says."},
		{QuotaExceeded, 429, "Quota exceeded", true, "This subject wrote more bytes than its quota allows in the current window, or holds as many upload sessions open as it may. Wait as Retry-After says, or end a session."},
		{ContentBlocked, 451, "Content blocked", false, "An operator blocked this file; its content cannot be read or replaced. detail carries the reason."},
		{Internal, 500, "Internal error", true, "The server failed unexpectedly. Retry with backoff; quote request_id when reporting it."},
		{StorageUnavailable, 503, "Storage unavailable", true, "Postgres or the object store is unreachable or too slow. Nothing half-written is visible; retry after Retry-After seconds."},
	} {
		catalog[k.Code] = Kind{Code: k.Code, Status: k.Status, Title: k.Title, Retryable: k.Retryable,
			Description: k.Description, Recorded: recorded[k.Code]}
	}
}

// recorded lists the outcomes a keyed write keeps under its key (the idempotency rules:
// 404, 409, 412, 451 and the 422s decided against stored state). Every other
// failure releases the key; OPERATION_IN_PROGRESS and IDEMPOTENCY_CONFLICT
// never run the write at all.
var recorded = map[string]bool{
	NotFound: true, PathExists: true, UploadCompleted: true, UploadAborted: true, UploadExpired: true,
	PreconditionFailed: true, SizeMismatch: true, PartsMissing: true, ContentBlocked: true, ChangedSinceRun: true,
	CheckpointExists: true, MergeConflict: true,
}

// Recorded reports whether a keyed write that ended in p keeps p under its
// key (see Kind.Recorded).
func Recorded(p *Problem) bool { return catalog[p.Code].Recorded }

// Lookup returns the description of code.
func Lookup(code string) (Kind, bool) {
	k, ok := catalog[code]
	return k, ok
}

// Kinds returns every known problem code's description.
func Kinds() []Kind {
	out := make([]Kind, 0, len(catalog))
	for _, k := range catalog {
		out = append(out, k)
	}
	return out
}

// retryable reports whether a problem with this status and code may succeed
// when repeated unchanged.
func retryable(status int, code string) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests ||
		status >= 500 || code == OperationInProgress
}
