package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

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
	return define(tool("run_recovery"), func(s *jsonschema.Schema) {
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
		return &reply[RunRecovery]{Text: render.RecoveryText(*r) + toolSteps(*r), Out: *r}, nil
	})
}

// toolSteps says, for a model that has only these tools, which tool
// call does each next action, with its exact arguments: a put sent again
// is write_file with the same key, a wait is run_recovery again, a session
// with all its parts is complete_upload. A session missing parts cannot
// be finished by a tool (parts carry bytes no tool sends): its file is
// written whole with write_file under a key named after the session (so
// the step, repeated by a later successor, writes it once), and then the
// session is ended with abort_upload (so its parts never make a second
// file); in that order, a successor that dies between the two finds the
// session still open and repeats both harmlessly. What no tool does
// (other routes) says so, naming the REST request.
func toolSteps(r RunRecovery) string {
	if len(r.NextActions) == 0 {
		return ""
	}
	uploads := map[string]api.RecoveryUpload{}
	for _, u := range r.InFlight.Uploads {
		uploads[u.ID] = u
	}
	told := map[string]bool{}
	// The keys of the page that completed: a session's rewrite that a
	// successor already made is not asked for again (the key names one
	// request of one agent: another agent repeating it would conflict).
	done := map[string]api.RecoveryOp{}
	for _, o := range r.Operations {
		if o.Status == "completed" {
			done[o.IdempotencyKey] = o
		}
	}
	var b strings.Builder
	b.WriteString("With these tools:\n")
	step := 0
	say := func(format string, args ...any) {
		step++
		fmt.Fprintf(&b, "%d. "+format+"\n", append([]any{step}, args...)...)
	}
	for _, n := range r.NextActions {
		path, query, _ := strings.Cut(n.Path, "?")
		q, _ := url.ParseQuery(query)
		u, isUpload := uploads[uploadOf(path)]
		switch {
		case n.Method == http.MethodPost && path == "/v1/files" && q.Get("path") != "" && n.IdempotencyKey != "":
			say("write_file {path: %q, idempotency_key: %q} with the content (and if_exists) the first call had: "+
				"the same key and arguments write it once.", q.Get("path"), n.IdempotencyKey)
		case n.Method == http.MethodGet:
			wait := n.AfterSeconds
			if w, err := strconv.Atoi(q.Get("wait")); err == nil && w > wait {
				wait = w
			}
			say("wait about %d s, then run_recovery again: what is running goes on by itself.", max(wait, 1))
		case isUpload && told[u.ID]:
			// One session's parts and complete are one or two tool steps.
		case isUpload && len(u.MissingParts) == 0:
			told[u.ID] = true
			say("complete_upload {upload_id: %q}: every part of %s is in (%d of %d); safe to repeat.", u.ID, u.Path, u.PartCount, u.PartCount)
		case isUpload && done[rewriteKey(u.ID)].IdempotencyKey != "":
			told[u.ID] = true
			wrote := ""
			if res := done[rewriteKey(u.ID)].Resource; res != nil {
				wrote = " (" + res.ID + ")"
			}
			say("abort_upload {upload_id: %q}: %s is written already, by write_file under key %s%s; this ends the session, "+
				"so its parts never make a second file; safe to repeat.", u.ID, u.Path, rewriteKey(u.ID), wrote)
		case isUpload:
			told[u.ID] = true
			ifExists := ""
			if u.IfExists == "replace" {
				ifExists = `, if_exists: "replace"`
			}
			say("write_file {path: %q, content: the whole file (%d bytes) as it was to be uploaded%s, idempotency_key: %q}: "+
				"%s is missing parts %s and no tool sends parts, so write the file whole; the key writes it once however often "+
				"this step is repeated (an IDEMPOTENCY_CONFLICT on it means another agent wrote it already: go on). (If the bytes are not UTF-8 text or exceed what write_file takes, no tool can: send the parts "+
				"over the REST API instead, PUT /v1/uploads/%s/parts/N, then POST /v1/uploads/%s/complete, and skip the next step.)",
				u.Path, u.SizeBytes, ifExists, rewriteKey(u.ID), u.ID, joinParts(u.MissingParts), u.ID, u.ID)
			say("abort_upload {upload_id: %q}: ends the session, so its parts never make a second file; safe to repeat.", u.ID)
		default:
			say("no tool does this: send %s %s over the REST API (or with the agentfs CLI).", n.Method, n.Path)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// uploadOf is the session id of a path under /v1/uploads/{id} ("" for
// any other).
func uploadOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/uploads/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// rewriteKey is the idempotency key under which a successor writes whole
// the file of a session that is missing parts: named after the session,
// so every successor that takes the step sends the same key.
func rewriteKey(uploadID string) string { return "rewrite-" + uploadID }

// joinParts spells part numbers as a list: "1, 2, 3".
func joinParts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
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
