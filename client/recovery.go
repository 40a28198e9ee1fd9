package client

import (
	"context"

	"github.com/agentfs/agentfs/api"
)

// RunRecovery is what a run left behind and the next safe request for
// each thing it left open (schema RunRecovery, DESIGN §25).
type RunRecovery = api.RunRecovery

// Next is one next safe step of a run's recovery: a sentence, and the
// exact request (method, path below the base URL, Idempotency-Key).
type Next = api.Next

// RecoveryOptions page RunRecovery's keys.
type RecoveryOptions = PageOptions

// RunRecovery returns the recovery of the run runID (GET
// /v1/runs/{run_id}/recovery): everything in it holds at AsOf, and
// NextActions are the requests still to send, in order. A run of which
// this caller holds nothing is NOT_FOUND. A "/" in the run id is sent
// escaped, as one path segment.
func (c *Client) RunRecovery(ctx context.Context, runID string, opts RecoveryOptions) (*RunRecovery, error) {
	if err := checkTagValue("run id", runID); err != nil {
		return nil, err
	}
	r := newRequest(routeRunRecovery, runPath(runID)+"/recovery")
	r.query = pageQuery(opts.Limit, opts.Cursor)
	return callJSON[RunRecovery](ctx, c, r)
}
