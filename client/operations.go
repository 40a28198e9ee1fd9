package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Operation is what an Idempotency-Key holds for this subject (schema
// Operation): the request that claimed it and, once completed, its
// recorded response.
type Operation struct {
	Object         string `json:"object"`
	IdempotencyKey string `json:"idempotency_key"`
	// Status is OperationInProgress or OperationCompleted.
	Status string `json:"status"`
	Method string `json:"method"`
	// Route is the server's route template, e.g. "/v1/files/:id/restore".
	Route string `json:"route"`
	// ResponseStatus and Response are the recorded answer; nil while in
	// progress. Outcome decodes them.
	ResponseStatus *int            `json:"response_status"`
	Response       json.RawMessage `json:"response"`
	// Redacted names the members of Response shown null because they hold
	// a secret (a share link's url): only the request itself, sent again
	// with the same key by the same token, answers them.
	Redacted    []string           `json:"redacted"`
	Resource    *OperationResource `json:"resource"`
	CreatedAt   time.Time          `json:"created_at"`
	CompletedAt *time.Time         `json:"completed_at"`
	ExpiresAt   *time.Time         `json:"expires_at"`
}

// OperationResource is the resource an operation produced or acted on.
type OperationResource struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// Operation statuses.
const (
	OperationInProgress = "in_progress"
	OperationCompleted  = "completed"
)

// errNotCompleted is Operation.Outcome's answer while a key is in progress.
var errNotCompleted = errors.New("the operation is still in progress")

// Outcome decodes a completed operation's recorded response: a 2xx body
// into v (a *File for file writes), a recorded error as its *Problem.
func (o *Operation) Outcome(v any) error {
	if o.Status != OperationCompleted {
		return errNotCompleted
	}
	res, err := o.response()
	if err != nil {
		return err
	}
	return decodeJSON(res, v)
}

// Operation returns what key holds (GET /v1/operations/{key}). A *Problem
// with status 404 means the key holds nothing, which proves that no write
// happened under it (within the server's idempotency retention).
func (c *Client) Operation(ctx context.Context, key string) (*Operation, error) {
	res, err := c.do(ctx, newRequest(routeOperation, "/v1/operations/"+url.PathEscape(key)))
	if err != nil {
		return nil, err
	}
	var op Operation
	if err := decodeJSON(res, &op); err != nil {
		return nil, err
	}
	return &op, nil
}

// Protocol is what the server guarantees (schema Protocol): its
// idempotency rules, recommended retry policy and limits.
type Protocol struct {
	APIVersion  string              `json:"api_version"`
	Idempotency ProtocolIdempotency `json:"idempotency"`
	Retry       ProtocolRetry       `json:"retry"`
	Limits      ProtocolLimits      `json:"limits"`
	// Raw is the document as the server sent it, including members this
	// client does not know.
	Raw json.RawMessage `json:"-"`
}

// ProtocolIdempotency describes Idempotency-Key.
type ProtocolIdempotency struct {
	Header           string   `json:"header"`
	KeyPattern       string   `json:"key_pattern"`
	Scope            string   `json:"scope"`
	RetentionSeconds int64    `json:"retention_seconds"`
	RequiredOn       []string `json:"required_on"`
	ReplayHeader     string   `json:"replay_header"`
}

// ProtocolRetry is the server's recommended retry policy.
type ProtocolRetry struct {
	RetryableStatuses []int    `json:"retryable_statuses"`
	SafeOperations    []string `json:"safe_operations"`
	InitialDelayMS    int64    `json:"initial_delay_ms"`
	MaxDelayMS        int64    `json:"max_delay_ms"`
	MaxAttempts       int      `json:"max_attempts"`
	Jitter            string   `json:"jitter"`
}

// ProtocolLimits are the server's limits.
type ProtocolLimits struct {
	// MaxUploadBytes bounds one POST /v1/files; larger files go through
	// upload sessions.
	MaxUploadBytes          int64 `json:"max_upload_bytes"`
	MaxPathBytes            int   `json:"max_path_bytes"`
	ListLimitDefault        int   `json:"list_limit_default"`
	ListLimitMax            int   `json:"list_limit_max"`
	DeletedRetentionSeconds int64 `json:"deleted_retention_seconds"`
	// Upload sessions: the largest file, the preferred part size, the most
	// parts, how long a session lives, and how many a subject may have
	// open at once (0: no bound; past it a new session is 429
	// QUOTA_EXCEEDED).
	MaxUploadSessionBytes int64 `json:"max_upload_session_bytes"`
	UploadPartSize        int64 `json:"upload_part_size"`
	UploadMaxParts        int   `json:"upload_max_parts"`
	UploadTTLSeconds      int64 `json:"upload_ttl_seconds"`
	MaxPendingUploads     int   `json:"max_pending_uploads"`
	// Batches: the most items, the largest body, the largest decoded
	// content of one item.
	BatchMaxItems     int   `json:"batch_max_items"`
	BatchMaxBytes     int64 `json:"batch_max_bytes"`
	BatchMaxItemBytes int64 `json:"batch_max_item_bytes"`
}

// Protocol returns the server's protocol description (GET /v1/protocol).
func (c *Client) Protocol(ctx context.Context) (*Protocol, error) {
	res, err := c.do(ctx, newRequest(routeProtocol, "/v1/protocol"))
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := decodeJSON(res, &raw); err != nil {
		return nil, err
	}
	p := &Protocol{Raw: raw}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("decode protocol: %w", err)
	}
	return p, nil
}
