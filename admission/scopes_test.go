package admission_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
)

// scoped is a keyed caller whose token carries scopes.
func scoped(key string, scopes ...string) agentfs.Caller {
	who := keyed(key)
	who.Grant.Scopes = scopes
	return who
}

// everyWrite runs each write the core serves, by operation.
func everyWrite(core *admission.Core) map[string]func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
	id := "file_00000000000000000000000000"
	hook := "wh_00000000000000000000000000"
	return map[string]func(context.Context, agentfs.Caller) (idempotency.Result, error){
		agentfs.OpPut: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return putContent(ctx, core, who, "w.txt", "x", false)
		},
		agentfs.OpDelete: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.Delete(ctx, who, id, "")
		},
		agentfs.OpRestore: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.Restore(ctx, who, id)
		},
		agentfs.OpCreateUpload: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CreateUpload(ctx, who, agentfs.NewUpload{Subject: "s", Path: "u.bin", SizeBytes: 10, PartSize: 5 << 20, TTL: time.Hour})
		},
		agentfs.OpPutPart: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.PutPart(ctx, who, "upl_00000000000000000000000000", 1, strings.NewReader("x"), 1, nil)
		},
		agentfs.OpCompleteUpload: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CompleteUpload(ctx, who, "upl_00000000000000000000000000", agentfs.CompleteRequest{})
		},
		agentfs.OpAbortUpload: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.AbortUpload(ctx, who, "upl_00000000000000000000000000")
		},
		agentfs.OpBatch: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			b := &agentfs.Batch{Items: []agentfs.BatchItem{{Op: agentfs.OpPut, Path: "b.txt", Content: []byte("x"), ContentType: "text/plain"}}}
			return core.CreateBatch(ctx, who, b, []byte(`{"operations":[]}`), 0)
		},
		agentfs.OpRevert: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.Revert(ctx, who, agentfs.Revert{FileID: id, Version: 1})
		},
		agentfs.OpMove: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.Move(ctx, who, agentfs.Move{FileID: id, Path: "m.txt"})
		},
		agentfs.OpSetExpiry: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.SetExpiry(ctx, who, agentfs.Expiry{FileID: id})
		},
		agentfs.OpCreateLink: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CreateLink(ctx, who, agentfs.NewLink{FileID: id, ExpiresIn: time.Hour})
		},
		agentfs.OpRevokeLink: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.RevokeLink(ctx, who, "lnk_00000000000000000000000000")
		},
		agentfs.OpCancelBatch: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CancelBatch(ctx, who, "batch_00000000000000000000000000")
		},
		agentfs.OpRevertRun: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.RevertRun(ctx, who, "run-1", false)
		},
		agentfs.OpCreateCheckpoint: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CreateCheckpoint(ctx, who, agentfs.NewCheckpoint{Name: "c"})
		},
		agentfs.OpDeleteCheckpoint: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.DeleteCheckpoint(ctx, who, "c")
		},
		agentfs.OpRestorePoint: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.RestorePoint(ctx, who, agentfs.RestoreRequest{To: agentfs.PointSpec{Field: "to", Kind: agentfs.PointNow, Raw: "now"}})
		},
		agentfs.OpCreateFork: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CreateFork(ctx, who, agentfs.NewFork{From: "a/", To: "b/", AsOf: agentfs.PointSpec{Field: "as_of", Kind: agentfs.PointNow, Raw: "now"}})
		},
		agentfs.OpMerge: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.Merge(ctx, who, agentfs.MergeRequest{ForkID: "fork_none"})
		},
		agentfs.OpDeleteFork: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.DeleteFork(ctx, who, "fork_none")
		},
		agentfs.OpCreateWebhook: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.CreateWebhook(ctx, who, agentfs.NewWebhook{URL: "https://example.com/hook"})
		},
		agentfs.OpUpdateWebhook: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			status := agentfs.WebhookDisabled
			return core.UpdateWebhook(ctx, who, hook, agentfs.WebhookPatch{Status: &status})
		},
		agentfs.OpDeleteWebhook: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.DeleteWebhook(ctx, who, hook)
		},
		agentfs.OpRotateWebhookSecret: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.RotateWebhookSecret(ctx, who, hook)
		},
		agentfs.OpReplayWebhook: func(ctx context.Context, who agentfs.Caller) (idempotency.Result, error) {
			return core.ReplayWebhook(ctx, who, hook, agentfs.EventCursor{Subject: who.Subject})
		},
	}
}

// TestWritesNeedTheScopesOfTheirOperation runs every write with tokens of
// every kind: a write whose operation needs a scope the caller lacks is
// FORBIDDEN naming it, and its key holds nothing (nothing claimed); every
// other gets past the check, whatever it answers then.
func TestWritesNeedTheScopesOfTheirOperation(t *testing.T) {
	core, b := setup(t)
	ctx := context.Background()
	writes := everyWrite(core)
	// Every write is run here but the batch items' own (copy, undo,
	// restore_to), which run with the batch's authority (the batch, run
	// revert and restore tests run them).
	for _, op := range agentfs.Operations() {
		need, _ := agentfs.ScopesFor(op)
		if _, ok := writes[op]; !ok && !agentfs.IsRead(op) && slices.Contains(need, agentfs.ScopeWrite) && op != agentfs.OpCopy && op != agentfs.OpUndo && op != agentfs.OpRestoreTo {
			t.Errorf("%s needs %v and no test runs it", op, need)
		}
	}
	for op, write := range writes {
		need, ok := agentfs.ScopesFor(op)
		if !ok {
			t.Fatalf("%s is not in the operation table", op)
		}
		for _, scopes := range [][]string{{agentfs.ScopeRead}, {agentfs.ScopeWrite}, everything} {
			key := op + "-" + strings.Join(scopes, "-")
			_, err := write(ctx, scoped(key, scopes...))
			var missing string
			for _, s := range need {
				if !slices.Contains(scopes, s) && missing == "" {
					missing = s
				}
			}
			p, _ := problem.From(err)
			switch {
			case missing != "" && (err == nil || p.Status != http.StatusForbidden || p.MissingScope != missing):
				t.Errorf("%s with %v: %v, want FORBIDDEN missing %s", op, scopes, err, missing)
			case missing == "" && err != nil && p.Code == problem.Forbidden:
				t.Errorf("%s with %v: %v", op, scopes, err)
			}
			if _, err := b.store.Operation(ctx, "s", key); missing != "" && !errors.Is(err, agentfs.ErrNotFound) {
				t.Errorf("%s refused with %v: its key holds something (%v)", op, scopes, err)
			}
		}
	}
}

// TestAReplayIsAnsweredOnlyToACallerWhoMayMakeTheRequest: a key's
// recorded outcome is not a way around the scopes.
func TestAReplayIsAnsweredOnlyToACallerWhoMayMakeTheRequest(t *testing.T) {
	core, _ := setup(t)
	ctx := context.Background()
	first, err := putContent(ctx, core, keyed("once"), "r.txt", "bytes", false)
	if err != nil || first.Status != http.StatusCreated {
		t.Fatalf("put: %v %d", err, first.Status)
	}
	_, err = putContent(ctx, core, scoped("once", agentfs.ScopeRead), "r.txt", "bytes", false)
	var denied *agentfs.ForbiddenError
	if !errors.As(err, &denied) || denied.Scope != agentfs.ScopeWrite {
		t.Fatalf("a read-only replay of a put: %v", err)
	}
	f := fileOf(t, first)
	link, err := core.CreateLink(ctx, keyed("link-once"), agentfs.NewLink{FileID: f.ID, ExpiresIn: time.Hour})
	if err != nil || link.Status != http.StatusCreated {
		t.Fatalf("link: %v %d", err, link.Status)
	}
	_, err = core.CreateLink(ctx, scoped("link-once", agentfs.ScopeWrite), agentfs.NewLink{FileID: f.ID, ExpiresIn: time.Hour})
	if !errors.As(err, &denied) || denied.Scope != agentfs.ScopeRead {
		t.Fatalf("a write-only replay of a link (its url serves the bytes): %v", err)
	}
	again, err := putContent(ctx, core, scoped("once", agentfs.ScopeWrite), "r.txt", "bytes", false)
	if err != nil || !again.Replayed {
		t.Fatalf("a write-only replay of a put: %v %+v", err, again)
	}
}
