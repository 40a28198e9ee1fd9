package reads

import (
	"context"

	"github.com/agentfs/agentfs"
)

// RunRecovery is what the caller's run left behind, true at one point of
// its event feed (GET /v1/runs/{run_id}/recovery, MCP run_recovery): only
// what lies in the caller's grant.
func (g *Gate) RunRecovery(ctx context.Context, who agentfs.Caller, runID string, filter agentfs.RecoveryFilter) (*agentfs.Recovery, error) {
	ctx, err := allow(ctx, who, agentfs.OpRunRecovery)
	if err != nil {
		return nil, err
	}
	return g.store.RunRecovery(ctx, who.Subject, runID, filter)
}
