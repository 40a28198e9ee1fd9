package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// createUpload opens a session in a transaction of its own.
func createUpload(t *testing.T, store *storage.Store, req agentfs.NewUpload) *agentfs.Upload {
	t.Helper()
	var u *agentfs.Upload
	err := store.WithTx(context.Background(), func(tx pgx.Tx) (err error) {
		u, _, err = store.CreateUploadTx(context.Background(), tx, req)
		return err
	})
	if err != nil {
		t.Fatalf("create upload: %v", err)
	}
	return u
}

// sendPart sends part n and records it, as the admission core does.
func sendPart(ctx context.Context, store *storage.Store, subject, id string, n int, body string) (*agentfs.Part, error) {
	p, err := store.SendPart(ctx, subject, id, n, strings.NewReader(body), int64(len(body)), nil)
	if err != nil {
		return nil, err
	}
	err = store.WithTx(ctx, func(tx pgx.Tx) error { return p.Apply(ctx, tx) })
	p.Finish(ctx, err)
	return p.Part, err
}

// putPart sends part n of the subject "s"'s session, failing the test on error.
func putPart(t *testing.T, store *storage.Store, id string, n int, body string) *agentfs.Part {
	t.Helper()
	p, err := sendPart(context.Background(), store, "s", id, n, body)
	if err != nil {
		t.Fatalf("put part %d: %v", n, err)
	}
	return p
}

// completeUpload prepares and commits a complete, as the admission core does.
func completeUpload(ctx context.Context, store *storage.Store, subject, id string, req agentfs.CompleteRequest) (f *agentfs.File, created bool, err error) {
	pc, err := store.PrepareComplete(ctx, subject, id, req)
	if err != nil {
		return nil, false, err
	}
	err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
		f, created, err = pc.Apply(ctx, tx, agentfs.Origin{})
		return err
	})
	pc.Finish(ctx, err)
	return f, created, err
}
