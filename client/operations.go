package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/agentfs/agentfs/api"
)

// Operation is what an Idempotency-Key holds for this subject (schema
// Operation): the request that claimed it and, once completed, its
// recorded response (Outcome decodes it).
type Operation = api.Operation

// OperationResource is the resource an operation produced or acted on.
type OperationResource = api.OperationResource

// Operation statuses.
const (
	OperationInProgress = api.OperationInProgress
	OperationCompleted  = api.OperationCompleted
	// OperationAbandoned is a claim whose owner died with nothing
	// recorded: nothing happened, and the same request may be sent again
	// with the key.
	OperationAbandoned = api.OperationAbandoned
)

// Operation returns what key holds (GET /v1/operations/{key}). A *Problem
// with status 404 means the key holds nothing, which proves that no write
// happened under it (within the server's idempotency retention).
func (c *Client) Operation(ctx context.Context, key string) (*Operation, error) {
	return callJSON[Operation](ctx, c, newRequest(routeOperation, "/v1/operations/"+url.PathEscape(key)))
}

// Protocol is what the server guarantees (schema Protocol): its
// idempotency rules, recommended retry policy, limits and MCP door. Its
// Raw is the document as the server sent it, including members this
// client does not know.
type Protocol = api.Protocol

// ProtocolIdempotency describes Idempotency-Key.
type ProtocolIdempotency = api.ProtocolIdempotency

// ProtocolRetry is the server's recommended retry policy.
type ProtocolRetry = api.ProtocolRetry

// ProtocolLimits are the server's limits.
type ProtocolLimits = api.ProtocolLimits

// ProtocolMCP says where and how the server serves its MCP tools.
type ProtocolMCP = api.ProtocolMCP

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
