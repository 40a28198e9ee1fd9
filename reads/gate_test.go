package reads_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// everyRead calls each read the gate serves that a caller's token must be
// allowed, by its operation.
func everyRead(g *reads.Gate) map[string][]func(ctx context.Context, who agentfs.Caller) error {
	id := "file_00000000000000000000000000"
	m := map[string][]func(context.Context, agentfs.Caller) error{
		agentfs.OpGetFile: {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.File(ctx, who, id)) }},
		agentfs.OpReadContent: {
			func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Content(ctx, who, id)) },
			func(ctx context.Context, who agentfs.Caller) error { return ignore2(g.VersionContent(ctx, who, id, 1)) },
		},
		agentfs.OpListFiles: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore(g.ListFiles(ctx, who, agentfs.FileFilter{Limit: 1}))
		}},
		agentfs.OpListVersions: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore(g.Versions(ctx, who, id, agentfs.VersionFilter{Limit: 1}))
		}},
		agentfs.OpGetVersion: {func(ctx context.Context, who agentfs.Caller) error { return ignore2(g.Version(ctx, who, id, 1)) }},
		agentfs.OpListLinks:  {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Links(ctx, who, id)) }},
		agentfs.OpGetUpload: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore2(g.Upload(ctx, who, "upl_00000000000000000000000000"))
		}},
		agentfs.OpListUploads: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore(g.ListUploads(ctx, who, agentfs.UploadFilter{Limit: 1}))
		}},
		agentfs.OpGetBatch: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore2(g.Batch(ctx, who, "batch_00000000000000000000000000"))
		}},
		agentfs.OpListBatches: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore(g.ListBatches(ctx, who, agentfs.BatchFilter{Limit: 1}))
		}},
		agentfs.OpGetOperation: {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Operation(ctx, who, "key-1")) }},
		agentfs.OpListEvents: {
			func(ctx context.Context, who agentfs.Caller) error {
				return ignore2(g.AwaitEvents(ctx, who, agentfs.EventFilter{Limit: 1}, 0))
			},
			func(ctx context.Context, who agentfs.Caller) error { return ignore(g.EventsStart(ctx, who)) },
		},
		agentfs.OpGetRun:     {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.RunSummary(ctx, who, "run-1")) }},
		agentfs.OpListRuns:   {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.ListRuns(ctx, who, 0, 10)) }},
		agentfs.OpRunArchive: {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.RunArchive(ctx, who, "run-1")) }},
		agentfs.OpSearch: {func(ctx context.Context, who agentfs.Caller) error {
			return ignore2(g.Search(ctx, who, agentfs.Search{Pattern: "x", Limit: 1}, ""))
		}},
		agentfs.OpListTokens: {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Tokens(ctx, who)) }},
		agentfs.OpGetToken:   {func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Token(ctx, who, "tok_none")) }},
	}
	addPointReads(g, m)
	addWebhookReads(g, m)
	return m
}

// ignore is a read's error, without its answer.
func ignore[T any](_ T, err error) error { return err }

// ignore2 is ignore of a read that answers two values.
func ignore2[T, U any](_ T, _ U, err error) error { return err }

// addWebhookReads adds the reads of webhooks (DESIGN §23) and of forks
// (§19) to m.
func addWebhookReads(g *reads.Gate, m map[string][]func(context.Context, agentfs.Caller) error) {
	m[agentfs.OpListWebhooks] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.Webhooks(ctx, who, agentfs.WebhookFilter{Limit: 10}))
	}}
	m[agentfs.OpGetWebhook] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Webhook(ctx, who, "wh_none")) }}
	m[agentfs.OpListWebhookDeliveries] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.WebhookDeliveries(ctx, who, "wh_none", 0, 10))
	}}
	// Forks (DESIGN §19).
	m[agentfs.OpListForks] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.ListForks(ctx, who, agentfs.ForkFilter{Limit: 10}))
	}}
	m[agentfs.OpGetFork] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Fork(ctx, who, "fork_none")) }}
}

// addPointReads adds the reads of points in time (DESIGN §18) to m: the
// as-of forms of the file reads, checkpoints and diffs.
func addPointReads(g *reads.Gate, m map[string][]func(context.Context, agentfs.Caller) error) {
	now := agentfs.PointSpec{Field: "as_of", Kind: agentfs.PointNow, Raw: "now"}
	m[agentfs.OpListFiles] = append(m[agentfs.OpListFiles], func(ctx context.Context, who agentfs.Caller) error {
		return ignore2(g.FilesAsOf(ctx, who, now, agentfs.AsOfFilter{Limit: 10}))
	})
	m[agentfs.OpGetFile] = append(m[agentfs.OpGetFile], func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.FileAsOf(ctx, who, "file_x", now))
	})
	m[agentfs.OpReadContent] = append(m[agentfs.OpReadContent], func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.ContentAsOf(ctx, who, "file_x", now))
	})
	m[agentfs.OpGetCheckpoint] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error { return ignore(g.Checkpoint(ctx, who, "c")) }}
	m[agentfs.OpListCheckpoints] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.ListCheckpoints(ctx, who, agentfs.CheckpointFilter{Limit: 10}))
	}}
	m[agentfs.OpDiff] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.Diff(ctx, who, now, now, agentfs.DiffRequest{Limit: 10}))
	}}
	m[agentfs.OpRunRecovery] = []func(context.Context, agentfs.Caller) error{func(ctx context.Context, who agentfs.Caller) error {
		return ignore(g.RunRecovery(ctx, who, "r", agentfs.RecoveryFilter{Limit: 10}))
	}}
}

// TestEveryReadNeedsTheScopesOfItsOperation reads through the gate on a
// real store with tokens of every kind: a read whose operation needs a
// scope the caller lacks is a *agentfs.ForbiddenError naming it, and
// every other read reaches the store (which finds nothing).
func TestEveryReadNeedsTheScopesOfItsOperation(t *testing.T) {
	t.Parallel()
	g, err := reads.New(storagetest.Open(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all := everyRead(g)
	for _, op := range agentfs.Operations() {
		if _, ok := all[op]; !ok && agentfs.IsRead(op) {
			t.Errorf("%s is a read no test runs", op)
		}
	}
	for op, calls := range all {
		need, ok := agentfs.ScopesFor(op)
		if !ok {
			t.Fatalf("%s is not in the operation table", op)
		}
		for _, scopes := range [][]string{{agentfs.ScopeRead}, {agentfs.ScopeWrite}, {agentfs.ScopeRead, agentfs.ScopeWrite}} {
			var missing string
			for _, s := range need {
				if !slices.Contains(scopes, s) && missing == "" {
					missing = s
				}
			}
			who := agentfs.Caller{Subject: "s", Grant: agentfs.Grant{Scopes: scopes}}
			for i, call := range calls {
				err := call(ctx, who)
				var denied *agentfs.ForbiddenError
				switch {
				case missing != "" && (!errors.As(err, &denied) || denied.Scope != missing || denied.Op != op):
					t.Errorf("%s (%d) with %v: %v, want it refused for lacking %s", op, i, scopes, err, missing)
				case missing == "" && err != nil && !errors.Is(err, agentfs.ErrNotFound):
					t.Errorf("%s (%d) with %v: %v, want the store's answer (nothing found)", op, i, scopes, err)
				}
			}
		}
	}
}
