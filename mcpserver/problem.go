package mcpserver

import (
	"fmt"
	"net/http"
	"strings"
)

// Problem is a failed operation as the API states it (RFC 9457 problem,
// the error contract). A failed tool call carries it as its structured content, and
// its text starts with Code, so a model can branch on the code and a person
// can look it up at /problems/{code}.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	RequestID string `json:"request_id,omitempty"`
	// ExistingFileID is the live file holding the path, with PATH_EXISTS.
	ExistingFileID string `json:"existing_file_id,omitempty"`
	// MissingParts lists the parts an upload still lacks, with PARTS_MISSING.
	MissingParts []int `json:"missing_parts,omitempty"`
	// MissingScope names the scope the token lacks, with FORBIDDEN.
	MissingScope string `json:"missing_scope,omitempty"`
	// Errors names the offending arguments, with VALIDATION_FAILED.
	Errors []FieldError `json:"errors,omitempty"`
	// RetryAfterSeconds is the server's hint for a retryable problem.
	RetryAfterSeconds int64 `json:"retry_after_seconds,omitempty"`
	// IdempotencyKey is the key of a write whose outcome is unknown: the
	// same call repeated with it can never write twice.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// FieldError is one offending argument.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error reads "PATH_EXISTS: detail".
func (p *Problem) Error() string {
	return p.Code + ": " + p.message()
}

func (p *Problem) message() string {
	switch {
	case p.Detail != "":
		return p.Detail
	case p.Title != "":
		return p.Title
	}
	return strings.ToLower(strings.ReplaceAll(p.Code, "_", " "))
}

// Problem codes the tools produce themselves; the others come from the API
// (the error contract).
const (
	CodeValidationFailed = "VALIDATION_FAILED"
	CodeInvalidPath      = "INVALID_PATH"
	CodeNotFound         = "NOT_FOUND"
	CodePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"
	CodeInternal         = "INTERNAL"
	CodeForbidden        = "FORBIDDEN"
	// CodeUnreachable is the stdio door's own: the AgentFS server did not
	// answer (after the client's retries), so the outcome is unknown.
	CodeUnreachable = "UNREACHABLE"
)

// NewProblem returns a problem with the API's type and title for code.
func NewProblem(status int, code, detail string) *Problem {
	return &Problem{
		Type:      "/problems/" + code,
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    detail,
		Code:      code,
		Retryable: status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500,
	}
}

// validation is a VALIDATION_FAILED problem naming one argument.
func validation(field, message string) *Problem {
	p := NewProblem(http.StatusUnprocessableEntity, CodeValidationFailed, field+": "+message)
	p.Errors = []FieldError{{Field: field, Message: message}}
	return p
}

// tagValueSyntax is the message of a run or agent id outside the syntax of
// X-Run-ID and X-Agent-ID (agentfs.ValidTagValue).
const tagValueSyntax = "1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit"

// invalidPath is the API's INVALID_PATH for one argument.
func invalidPath(field, path string, err error) *Problem {
	p := NewProblem(http.StatusUnprocessableEntity, CodeInvalidPath, fmt.Sprintf("%s %q: %v", field, path, err))
	p.Errors = []FieldError{{Field: field, Message: err.Error()}}
	return p
}

func notFound(detail string) *Problem {
	return NewProblem(http.StatusNotFound, CodeNotFound, detail)
}

func tooLarge(detail string) *Problem {
	return NewProblem(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, detail)
}
