package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
		return &reply[RunRecovery]{Text: render.RecoveryText(*r) + toolSteps(r.NextActions), Out: *r}, nil
	})
}

// toolSteps says, for a model that has only these tools, which tool
// call does each next action: a put sent again is write_file with the
// same key, a wait is run_recovery again; what no tool does (upload
// parts, other routes) says so, naming the REST request.
func toolSteps(next []api.Next) string {
	if len(next) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("With these tools:\n")
	for i, n := range next {
		path, query, _ := strings.Cut(n.Path, "?")
		q, _ := url.ParseQuery(query)
		switch {
		case n.Method == http.MethodPost && path == "/v1/files" && q.Get("path") != "" && n.IdempotencyKey != "":
			fmt.Fprintf(&b, "%d. write_file {path: %q, idempotency_key: %q} with the content (and if_exists) the first call had: "+
				"the same key and arguments write it once.\n", i+1, q.Get("path"), n.IdempotencyKey)
		case n.Method == http.MethodGet:
			wait := n.AfterSeconds
			if w, err := strconv.Atoi(q.Get("wait")); err == nil && w > wait {
				wait = w
			}
			fmt.Fprintf(&b, "%d. wait about %d s, then run_recovery again: what is running goes on by itself.\n", i+1, max(wait, 1))
		default:
			fmt.Fprintf(&b, "%d. no tool does this: send %s %s over the REST API (or with the agentfs CLI).\n", i+1, n.Method, n.Path)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
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
