package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
)

// BatchHook runs at the end of the transaction that creates a batch (to
// record its idempotency key and enqueue it, so all three commit together).
type BatchHook = func(ctx context.Context, tx pgx.Tx, b *agentfs.Batch) error

// ErrItemDone says a batch item is no longer pending: another worker
// applied it, so this attempt must not.
var ErrItemDone = errors.New("batch item is no longer pending")

const batchColumns = `id, subject, status, coalesce(agent_id, ''), coalesce(run_id, ''), created_at, started_at, completed_at`

func scanBatch(row pgx.Row) (*agentfs.Batch, error) {
	var b agentfs.Batch
	if err := row.Scan(&b.ID, &b.Subject, &b.Status, &b.By.AgentID, &b.By.RunID, &b.CreatedAt, &b.StartedAt, &b.CompletedAt); err != nil {
		return nil, Translate(err)
	}
	return &b, nil
}

// CreateBatch stores a batch and its items (content included) as queued,
// and runs hook in the same transaction.
func (s *Store) CreateBatch(ctx context.Context, b *agentfs.Batch, hook BatchHook) (*agentfs.Batch, error) {
	var out *agentfs.Batch
	err := WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = scanBatch(tx.QueryRow(ctx, `INSERT INTO batches (id, subject, status, agent_id, run_id)
			VALUES ($1, $2, 'queued', nullif($3, ''), nullif($4, '')) RETURNING `+batchColumns,
			NewID("batch"), b.Subject, b.By.AgentID, b.By.RunID))
		if err != nil {
			return err
		}
		rows := make([][]any, len(b.Items))
		for i, it := range b.Items {
			rows[i] = []any{out.ID, i, it.Op, it.Path, it.FileID, it.Content, it.ContentType, it.Replace, it.Key}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"batch_items"},
			[]string{"batch_id", "idx", "op", "path", "file_id", "content", "content_type", "replace", "item_key"},
			pgx.CopyFromRows(rows)); err != nil {
			return Translate(fmt.Errorf("store batch items: %w", err))
		}
		if err := s.loadItems(ctx, tx, out); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, out)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	return out, nil
}

func (s *Store) loadItems(ctx context.Context, q querier2, b *agentfs.Batch) error {
	rows, err := q.Query(ctx, `SELECT idx, op, path, file_id, content_type, replace, item_key, status, replayed,
			coalesce(result_id, ''), coalesce(error, ''::bytea)
		FROM batch_items WHERE batch_id = $1 ORDER BY idx`, b.ID)
	if err != nil {
		return Translate(fmt.Errorf("load batch items: %w", err))
	}
	b.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentfs.BatchItem, error) {
		var it agentfs.BatchItem
		err := r.Scan(&it.Index, &it.Op, &it.Path, &it.FileID, &it.ContentType, &it.Replace, &it.Key,
			&it.Status, &it.Replayed, &it.ResultID, &it.Error)
		return it, err
	})
	return Translate(err)
}

// querier2 runs queries on a pool or a transaction.
type querier2 interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Batch returns the subject's batch with every item's outcome.
func (s *Store) Batch(ctx context.Context, subject, id string) (*agentfs.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	b, err := scanBatch(s.pool.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1 AND subject = $2`, id, subject))
	if err != nil {
		return nil, fmt.Errorf("get batch: %w", err)
	}
	if err := s.loadItems(ctx, s.pool, b); err != nil {
		return nil, fmt.Errorf("get batch: %w", err)
	}
	return b, nil
}

// Files returns the subject's files with these ids (for showing batch
// results), in no particular order.
func (s *Store) Files(ctx context.Context, subject string, ids []string) ([]*agentfs.File, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+fileColumns+` FROM files WHERE subject = $1 AND id = ANY($2)`, subject, ids)
	if err != nil {
		return nil, Translate(fmt.Errorf("get files: %w", err))
	}
	defer rows.Close()
	var out []*agentfs.File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, Translate(rows.Err())
}

// StartBatch marks a batch running (it may already be, when a worker
// resumes it) and returns it with its items.
func (s *Store) StartBatch(ctx context.Context, id string) (*agentfs.Batch, error) {
	b, err := scanBatch(s.pool.QueryRow(ctx, `UPDATE batches SET status = 'running', started_at = coalesce(started_at, now())
		WHERE id = $1 AND status IN ('queued', 'running') RETURNING `+batchColumns, id))
	if errors.Is(err, agentfs.ErrNotFound) {
		// Terminal already (or gone): nothing to run.
		b, err = scanBatch(s.pool.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id))
	}
	if err != nil {
		return nil, fmt.Errorf("start batch: %w", err)
	}
	return b, Translate(s.loadItems(ctx, s.pool, b))
}

// ItemContent returns the content of a put item.
func (s *Store) ItemContent(ctx context.Context, batchID string, idx int) ([]byte, error) {
	var content []byte
	err := s.pool.QueryRow(ctx, `SELECT coalesce(content, ''::bytea) FROM batch_items WHERE batch_id = $1 AND idx = $2`,
		batchID, idx).Scan(&content)
	return content, Translate(err)
}

// ItemOutcome is how an item ended.
type ItemOutcome struct {
	Status   string
	Replayed bool
	ResultID string
	Error    []byte
}

// MarkItemTx records an item's outcome in tx, the transaction of its
// effect, only if the item is still pending; else ErrItemDone, and the
// effect must roll back.
func MarkItemTx(ctx context.Context, tx pgx.Tx, batchID string, idx int, out ItemOutcome) error {
	tag, err := tx.Exec(ctx, `UPDATE batch_items SET status = $3, replayed = $4, result_id = nullif($5, ''), error = $6
		WHERE batch_id = $1 AND idx = $2 AND status = 'pending'`,
		batchID, idx, out.Status, out.Replayed, out.ResultID, out.Error)
	if err != nil {
		return Translate(fmt.Errorf("mark batch item: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return ErrItemDone
	}
	return nil
}

// MarkItem records the outcome of an item that had no effect.
func (s *Store) MarkItem(ctx context.Context, batchID string, idx int, out ItemOutcome) error {
	err := WithTx(ctx, s.pool, func(tx pgx.Tx) error { return MarkItemTx(ctx, tx, batchID, idx, out) })
	if errors.Is(err, ErrItemDone) {
		return nil
	}
	return err
}

// FinishBatch sets a batch's terminal state from its items: succeeded when
// all succeeded, failed when none did, else partially_succeeded.
func (s *Store) FinishBatch(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE batches b SET completed_at = now(), status = CASE
			WHEN c.failed = 0 THEN 'succeeded' WHEN c.succeeded = 0 THEN 'failed' ELSE 'partially_succeeded' END
		FROM (SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
		             count(*) FILTER (WHERE status = 'failed') AS failed,
		             count(*) FILTER (WHERE status = 'pending') AS pending
		      FROM batch_items WHERE batch_id = $1) c
		WHERE b.id = $1 AND c.pending = 0 AND b.status IN ('queued', 'running')`, id)
	return Translate(err)
}

// CopyFile makes a new file (or replaces one) at put.Path with the content
// of the subject's live file srcID, copied inside S3 into a new blob.
func (s *Store) CopyFile(ctx context.Context, srcID string, put agentfs.Put, hook CommitHook) (*agentfs.File, bool, error) {
	src, err := s.File(ctx, put.Subject, srcID)
	if err != nil {
		return nil, false, err
	}
	if !src.Live() {
		return nil, false, agentfs.ErrNotFound
	}
	if src.Blocked {
		return nil, false, &agentfs.BlockedError{FileID: src.ID, Reason: src.BlockReason}
	}
	put.ContentType = src.ContentType
	live, err := s.liveFile(ctx, s.pool, put.Subject, put.Path)
	if err != nil {
		return nil, false, err
	}
	if err := put.CheckAgainst(live); err != nil {
		return nil, false, err
	}
	b := &writtenBlob{key: "blobs/" + NewID("blob")[len("blob_"):], size: src.SizeBytes, sha256: src.SHA256,
		tags: blobTags(fileIDFor(live), put.By)}
	_, err = s.s3Long.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: b.key, UserTags: b.tags, ReplaceTags: true},
		minio.CopySrcOptions{Bucket: s.bucket, Object: src.BlobKey})
	if err != nil {
		return nil, false, translateS3(fmt.Errorf("copy blob: %w", err))
	}
	f, created, used, err := s.commitPut(ctx, put, live, b.tags["file-id"], b, hook)
	if !used {
		s.removeBlob(ctx, b.key)
	}
	return f, created, err
}
