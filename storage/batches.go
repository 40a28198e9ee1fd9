package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/jsonscan"
)

// ErrItemDone says a batch item is no longer pending: another worker
// applied it, so this attempt must not.
var ErrItemDone = errors.New("batch item is no longer pending")

// ChannelBatch carries the id of a batch that reached a terminal state
// (Postgres NOTIFY, delivered when the notifying transaction commits):
// FinishBatch notifies it, and AwaitBatch wakes by it.
const ChannelBatch = "agentfs_batch"

const batchColumns = `id, subject, status, coalesce(agent_id, ''), coalesce(run_id, ''), coalesce(request_id, ''),
	created_at, started_at, completed_at, coalesce(token_id, ''), prefixes, coalesce(max_bytes, 0)`

func scanBatch(row pgx.Row) (*agentfs.Batch, error) {
	var b agentfs.Batch
	if err := row.Scan(&b.ID, &b.Subject, &b.Status, &b.By.AgentID, &b.By.RunID, &b.RequestID,
		&b.CreatedAt, &b.StartedAt, &b.CompletedAt, &b.TokenID, &b.Prefixes, &b.MaxBytes); err != nil {
		return nil, Translate(err)
	}
	return &b, nil
}

// CreateBatchTx stores a batch and its items (content included, as the
// request carried it: see agentfs.BatchItem.Text) as queued in tx, and
// returns it as stored, without the contents.
func (s *Store) CreateBatchTx(ctx context.Context, tx pgx.Tx, b *agentfs.Batch) (*agentfs.Batch, error) {
	var prefixes []string // NULL: every path
	if len(b.Prefixes) > 0 {
		prefixes = b.Prefixes
	}
	out, err := scanBatch(tx.QueryRow(ctx, `INSERT INTO batches (id, subject, status, agent_id, run_id, request_id, token_id, prefixes, max_bytes)
		VALUES ($1, $2, 'queued', nullif($3, ''), nullif($4, ''), nullif($5, ''), nullif($6, ''), $7, nullif($8, 0)) RETURNING `+batchColumns,
		NewID("batch"), b.Subject, b.By.AgentID, b.By.RunID, b.RequestID, b.TokenID, prefixes, b.MaxBytes))
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	rows := make([][]any, len(b.Items))
	for i, it := range b.Items {
		params, err := undoParams(it.Undo)
		if err != nil {
			return nil, err
		}
		content, encoding := it.Content, (*string)(nil)
		if it.Encoding != "" {
			content, encoding = it.Text, &it.Encoding
		}
		rows[i] = []any{out.ID, i, it.Op, it.Path, it.FileID, content, encoding, it.ContentType, it.Replace, it.Key,
			int64(it.ExpiresIn.Seconds()), params}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"batch_items"},
		[]string{"batch_id", "idx", "op", "path", "file_id", "content", "content_encoding", "content_type", "replace", "item_key",
			"expires_in_seconds", "params"},
		pgx.CopyFromRows(rows)); err != nil {
		return nil, Translate(fmt.Errorf("store batch items: %w", err))
	}
	if err := s.loadItems(ctx, tx, out); err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	return out, nil
}

func (s *Store) loadItems(ctx context.Context, q querier, b *agentfs.Batch) error {
	rows, err := q.Query(ctx, `SELECT idx, op, path, file_id, content_type, replace, item_key, status, replayed,
			coalesce(result_id, ''), coalesce(error, ''::bytea), expires_in_seconds, params
		FROM batch_items WHERE batch_id = $1 ORDER BY idx`, b.ID)
	if err != nil {
		return Translate(fmt.Errorf("load batch items: %w", err))
	}
	b.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (agentfs.BatchItem, error) {
		var it agentfs.BatchItem
		var expiresIn int64
		var params []byte
		err := r.Scan(&it.Index, &it.Op, &it.Path, &it.FileID, &it.ContentType, &it.Replace, &it.Key,
			&it.Status, &it.Replayed, &it.ResultID, &it.Error, &expiresIn, &params)
		it.ExpiresIn = time.Duration(expiresIn) * time.Second
		if err == nil && params != nil {
			it.Undo = &agentfs.Undo{}
			err = json.Unmarshal(params, it.Undo)
		}
		return it, err
	})
	return Translate(err)
}

// Batch returns the subject's batch with every item's outcome.
func (s *Store) Batch(ctx context.Context, subject, id string) (*agentfs.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	b, err := scanBatch(s.pool.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = @id AND subject = @subject
		AND `+visibleMade(ctx, "token_id", args), args))
	if err != nil {
		return nil, fmt.Errorf("get batch: %w", err)
	}
	if err := s.loadItems(ctx, s.pool, b); err != nil {
		return nil, fmt.Errorf("get batch: %w", err)
	}
	return b, nil
}

// AwaitBatch returns the subject's batch once it is terminal, or as it is
// when wait has passed. It wakes when the batch ends (FinishBatch notifies,
// on any instance), and looks again every few seconds in case the
// notification was lost with a connection.
func (s *Store) AwaitBatch(ctx context.Context, subject, id string, wait time.Duration) (*agentfs.Batch, error) {
	if wait <= 0 {
		return s.Batch(ctx, subject, id)
	}
	ended, stop := s.notify.Subscribe(ChannelBatch)
	defer stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		b, err := s.Batch(ctx, subject, id)
		if err != nil || b.Terminal() {
			return b, err
		}
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline.C:
				return s.Batch(ctx, subject, id)
			case <-s.draining:
				return s.Batch(ctx, subject, id)
			case payload := <-ended:
				woken = payload == id || payload == ""
			case <-time.After(3 * time.Second):
				woken = true
			}
		}
	}
}

// BatchFiles loads the files a batch's items left, by id.
func (s *Store) BatchFiles(ctx context.Context, b *agentfs.Batch) (map[string]*agentfs.File, error) {
	var ids []string
	for _, it := range b.Items {
		if it.ResultID != "" {
			ids = append(ids, it.ResultID)
		}
	}
	out := map[string]*agentfs.File{}
	if len(ids) == 0 {
		return out, nil
	}
	files, err := s.Files(ctx, b.Subject, ids)
	for _, f := range files {
		out[f.ID] = f
	}
	return out, err
}

// Files returns the subject's files with these ids (for showing batch
// results), in no particular order.
func (s *Store) Files(ctx context.Context, subject string, ids []string) ([]*agentfs.File, error) {
	args := pgx.NamedArgs{"subject": subject, "ids": ids}
	return s.scanFiles(s.pool.Query(ctx, `SELECT `+fileColumns+` FROM files WHERE subject = @subject AND id = ANY(@ids)
		AND `+visiblePath(ctx, "path", args), args))
}

// LockBatch takes the session advisory lock that lets one worker at a
// time run the batch (released with the connection if the process dies).
// mine is false when another worker holds it; unlock releases it.
func (s *Store) LockBatch(ctx context.Context, id string) (unlock func(), mine bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, Translate(err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('agentfs.batch.' || $1))`, id).Scan(&mine); err != nil {
		conn.Release()
		return nil, false, Translate(err)
	}
	if !mine {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('agentfs.batch.' || $1))`, id)
		conn.Release()
	}, true, nil
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

// ItemContent returns the content of a put item, decoded.
func (s *Store) ItemContent(ctx context.Context, batchID string, idx int) ([]byte, error) {
	var content []byte
	var encoding *string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(content, ''::bytea), content_encoding FROM batch_items
		WHERE batch_id = $1 AND idx = $2`, batchID, idx).Scan(&content, &encoding)
	if err != nil {
		return nil, Translate(err)
	}
	return decodeItemContent(content, encoding)
}

// decodeItemContent is the content an item's row holds: the bytes
// themselves, or the JSON string of the request in its encoding (checked
// when the batch was admitted).
func decodeItemContent(stored []byte, encoding *string) ([]byte, error) {
	if encoding == nil {
		return stored, nil
	}
	text, plain := jsonscan.Plain(stored)
	if !plain {
		text = jsonscan.AppendString(nil, stored)
	}
	switch *encoding {
	case agentfs.ContentUTF8:
		return text, nil
	case agentfs.ContentBase64:
		out := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
		n, err := base64.StdEncoding.Decode(out, text)
		if err != nil {
			return nil, fmt.Errorf("decode batch item content: %w", err)
		}
		return out[:n], nil
	}
	return nil, fmt.Errorf("decode batch item content: unknown encoding %q", *encoding)
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

// FinishBatch sets a batch's terminal state from its items once none is
// pending: canceled when any was canceled, succeeded when all succeeded,
// failed when none did, else partially_succeeded.
func (s *Store) FinishBatch(ctx context.Context, id string) error {
	return finishBatch(ctx, s.pool, id)
}

func finishBatch(ctx context.Context, q querier, id string) error {
	_, err := q.Exec(ctx, `WITH finished AS (
		UPDATE batches b SET completed_at = now(), status = CASE WHEN c.canceled > 0 THEN 'canceled'
			WHEN c.failed = 0 THEN 'succeeded' WHEN c.succeeded = 0 THEN 'failed' ELSE 'partially_succeeded' END
		FROM (SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
		             count(*) FILTER (WHERE status = 'failed') AS failed,
		             count(*) FILTER (WHERE status = 'pending') AS pending,
		             count(*) FILTER (WHERE status = 'canceled') AS canceled
		      FROM batch_items WHERE batch_id = $1) c
		WHERE b.id = $1 AND c.pending = 0 AND b.status IN ('queued', 'running')
		RETURNING b.id)
		SELECT pg_notify('`+ChannelBatch+`', id) FROM finished`, id)
	return Translate(err)
}

// ListBatches returns up to filter.Limit of the subject's batches, newest
// first, with their items counted but not loaded.
func (s *Store) ListBatches(ctx context.Context, subject string, filter agentfs.BatchFilter) ([]*agentfs.Batch, error) {
	return s.listBatches(ctx, s.pool, subject, filter)
}

func (s *Store) listBatches(ctx context.Context, q querier, subject string, filter agentfs.BatchFilter) ([]*agentfs.Batch, error) {
	w := newFilter("b.subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visibleMade(ctx, "b.token_id", w.args))
	w.when(filter.Status != "", "b.status = @status", pgx.NamedArgs{"status": filter.Status})
	w.when(filter.RunID != "", "b.run_id = @run_id", pgx.NamedArgs{"run_id": filter.RunID})
	w.when(filter.Open, "b.status IN ('queued', 'running')", nil)
	if c := filter.After; c != nil {
		w.when(true, "(b.created_at, b.id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := q.Query(ctx, `SELECT b.id, b.subject, b.status, coalesce(b.agent_id, ''), coalesce(b.run_id, ''),
			coalesce(b.request_id, ''), b.created_at, b.started_at, b.completed_at,
			c.total, c.succeeded, c.failed, c.pending, c.canceled
		FROM batches b CROSS JOIN LATERAL (SELECT count(*) AS total,
			count(*) FILTER (WHERE i.status = 'succeeded') AS succeeded, count(*) FILTER (WHERE i.status = 'failed') AS failed,
			count(*) FILTER (WHERE i.status = 'pending') AS pending, count(*) FILTER (WHERE i.status = 'canceled') AS canceled
			FROM batch_items i WHERE i.batch_id = b.id) c
		WHERE `+w.where()+` ORDER BY b.created_at DESC, b.id DESC LIMIT @limit`, w.args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list batches: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Batch, error) {
		var b agentfs.Batch
		t := &b.Tally
		err := r.Scan(&b.ID, &b.Subject, &b.Status, &b.By.AgentID, &b.By.RunID, &b.RequestID, &b.CreatedAt, &b.StartedAt,
			&b.CompletedAt, &t.Total, &t.Succeeded, &t.Failed, &t.Pending, &t.Canceled)
		return &b, err
	})
	return out, Translate(err)
}

// CancelBatchTx cancels the subject's batch in tx: its pending items
// become canceled, and since no item can commit after that (an item commits
// only while it is pending), the batch ends canceled at once. An item
// already committing finishes first (its row is locked). Cancelling a
// batch that ended returns it unchanged.
func (s *Store) CancelBatchTx(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	b, err := scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = @id AND subject = @subject
		AND `+visibleMade(ctx, "token_id", args)+` FOR UPDATE`, args))
	if err != nil {
		return nil, fmt.Errorf("cancel batch: %w", err)
	}
	if !b.Terminal() {
		if _, err := tx.Exec(ctx, `UPDATE batch_items SET status = 'canceled' WHERE batch_id = $1 AND status = 'pending'`, id); err != nil {
			return nil, Translate(fmt.Errorf("cancel batch: %w", err))
		}
		if err := finishBatch(ctx, tx, id); err != nil {
			return nil, fmt.Errorf("cancel batch: %w", err)
		}
		if b, err = scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id)); err != nil {
			return nil, fmt.Errorf("cancel batch: %w", err)
		}
	}
	if err := s.loadItems(ctx, tx, b); err != nil {
		return nil, fmt.Errorf("cancel batch: %w", err)
	}
	return b, nil
}

// PrepareCopy prepares a put at put.Path with the content of the subject's
// live file srcID; commit it like any pending put. The copy shares the
// source's blob (no bytes are copied in S3, as a revert does): its
// transaction locks the source's version, so the blob stays while either
// references it.
func (s *Store) PrepareCopy(ctx context.Context, srcID string, put agentfs.Put) (*PendingPut, error) {
	src, err := s.File(ctx, put.Subject, srcID)
	if err != nil {
		return nil, err
	}
	if !src.Live() {
		return nil, agentfs.ErrNotFound
	}
	if src.Blocked {
		return nil, &agentfs.BlockedError{FileID: src.ID, Reason: src.BlockReason}
	}
	put.ContentType = src.ContentType
	live, _, err := s.fileAtPath(ctx, s.pool, put.Subject, put.Path)
	if err != nil {
		return nil, err
	}
	if err := put.CheckAgainst(live); err != nil {
		return nil, err
	}
	b := &writtenBlob{key: src.BlobKey, size: src.SizeBytes, sha256: src.SHA256,
		from: &versionRef{fileID: src.ID, version: src.Version}}
	return &PendingPut{store: s, put: put, seen: live, fileID: fileIDFor(live), blob: b}, nil
}
