package mcpserver

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/render"
)

// RecoveryBackend is what run_recovery needs (DESIGN §25).
type RecoveryBackend interface {
	// RunRecovery is what the run left behind, its first page of keys.
	RunRecovery(ctx context.Context, runID string) (*RunRecovery, error)
}

// RunRecovery is run_recovery's structured output, the REST answer.
type RunRecovery = api.RunRecovery

type runRecoveryIn struct {
	RunID string `json:"run_id,omitempty" jsonschema:"the run to take over (the X-Run-ID its requests carried); default: this session's run"`
}

func runRecoveryTool() *toolSpec {
	return define(&mcp.Tool{
		Name: "run_recovery",
		Description: "Take over a run whose worker died: what its events confirm, each idempotency key it claimed (completed: nothing to redo; " +
			"in_progress: wait; abandoned: nothing happened, send the same request again with the same key and run), its uploads missing parts " +
			"and batches still running, and the next actions in order, each an exact request. All of it holds at one event cursor (as_of).",
		Annotations: readOnly("Run recovery"),
	}, func(s *jsonschema.Schema) {
		s.Properties["run_id"].MaxLength = ptr(agentfs.MaxTagValueLen)
	}, func(ctx context.Context, tb *toolbox, in *runRecoveryIn, cc *callContext) (*reply[RunRecovery], error) {
		run, err := tb.runArg(ctx, in.RunID, cc)
		if err != nil {
			return nil, err
		}
		r, err := tb.b.RunRecovery(ctx, run)
		if err != nil {
			return nil, err
		}
		return &reply[RunRecovery]{Text: render.RecoveryText(*r), Out: *r}, nil
	})
}

// RunRecovery reads a run's recovery through the read gate.
func (b *CoreBackend) RunRecovery(ctx context.Context, runID string) (*RunRecovery, error) {
	who, err := b.who(ctx)
	if err != nil {
		return nil, err
	}
	r, err := b.Reads.RunRecovery(ctx, who, runID, agentfs.RecoveryFilter{Limit: 100})
	if err != nil {
		return nil, problemOfCore(err)
	}
	out := render.Recovery(r)
	return &out, nil
}

// RunRecovery reads a run's recovery (GET /v1/runs/{run_id}/recovery).
func (cb *ClientBackend) RunRecovery(ctx context.Context, runID string) (*RunRecovery, error) {
	r, err := cb.c.RunRecovery(ctx, runID, client.RecoveryOptions{})
	if err != nil {
		return nil, problemOf(err, "")
	}
	return r, nil
}
