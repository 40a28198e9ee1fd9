package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// The search index (migration 016): a row of search_texts per blob, with
// the blob's text when it is a text file, under pg_trgm's trigram index.
// Blobs never change, so the row is written once, in the statement that
// first points a file at the blob (writeFiles), from the bytes captured on
// their way to S3; a write that shares a blob (a revert, a copy, a
// restore, a move) shares its row too. What a search sees is then what the
// files table says is current, in the same snapshot: a write is
// searchable as soon as it commits, from every door.

// Kinds of a search_texts row. A write records text as searchPending:
// the trigram index (whose predicate is kind = 0) takes it when the mover
// (KeepIndexingPending) turns it into searchText, out of the write's
// transaction. A search reads pending rows whole, so both are searchable.
const (
	searchText     int16 = 0
	searchBinary   int16 = 1
	searchTooLarge int16 = 2
	searchPending  int16 = 3
)

// blobText is what the index records of a blob: its kind, and its text
// when it is one. A write that shares a blob has none (nil): the write
// that made the blob wrote its row.
type blobText struct {
	kind int16
	body string
}

// classify is the index's verdict on content of size bytes whose first
// bytes (all of them when it is at most max) are b: too large past max,
// else binary when it holds a NUL or is not UTF-8, else text.
func classify(b []byte, size, max int64) blobText {
	switch {
	case size > max:
		return blobText{kind: searchTooLarge}
	case bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b):
		return blobText{kind: searchBinary}
	}
	return blobText{kind: searchText, body: string(b)}
}

// textCapture keeps the bytes of a body on its way to S3, up to max of
// them, so that the index needs no second read: the copy stops at a NUL
// or once the body is known to be too large.
type textCapture struct {
	max  int64
	buf  []byte
	stop bool // too large or binary: nothing more is kept
}

// newTextCapture captures a body of declared size (-1: unknown) for an
// index that takes files of at most max bytes (negative: none).
func newTextCapture(max, size int64) *textCapture {
	c := &textCapture{max: max, stop: max < 0 || size > max}
	if !c.stop && size >= 0 {
		c.buf = make([]byte, 0, size)
	}
	return c
}

func (c *textCapture) write(p []byte) {
	switch {
	case c.stop:
	case int64(len(c.buf)+len(p)) > c.max, bytes.IndexByte(p, 0) >= 0:
		c.stop, c.buf = true, nil
	default:
		c.buf = append(c.buf, p...)
	}
}

// text is the verdict on the whole body of n bytes.
func (c *textCapture) text(n int64) blobText {
	if c.stop && n <= c.max {
		return blobText{kind: searchBinary} // stopped at a NUL
	}
	return classify(c.buf, n, c.max)
}

// searchMax is the largest file the index takes (negative: none).
func (s *Store) searchMax() int64 { return s.cfg.SearchMaxFileBytes }

// readText reads a blob of size bytes back for the index: only when it is
// small enough to be indexed (an assembled upload, an old file).
func (s *Store) readText(ctx context.Context, key string, size int64) (blobText, error) {
	if size > s.searchMax() {
		return blobText{kind: searchTooLarge}, nil
	}
	if size == 0 {
		return blobText{kind: searchText}, nil
	}
	r, err := s.OpenBlob(ctx, key, 0, 0)
	if err != nil {
		return blobText{}, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return blobText{}, translateS3(fmt.Errorf("read blob for the search index: %w", err))
	}
	return classify(b, int64(len(b)), s.searchMax()), nil
}

// forgetTexts removes the index rows of blobs that were removed.
func (s *Store) forgetTexts(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM search_texts WHERE blob_key = ANY($1)`, keys)
	return Translate(err)
}

// backfillChunk is how many blobs IndexOldFiles reads between statements.
const backfillChunk = 64

// IndexOldFiles indexes the blobs that versions reference and that have
// no index row (written before the search index existed), reading each
// back from S3 (only those small enough to be indexed), in blob key
// order, then records that the index is complete. It resumes wherever it
// stopped: what is indexed is what has a row. One instance runs it at a
// time (the others answer false at once); done says the index is
// complete.
func (s *Store) IndexOldFiles(ctx context.Context) (done bool, err error) {
	if s.IndexComplete(ctx) {
		return true, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, Translate(fmt.Errorf("index old files: %w", err))
	}
	defer conn.Release()
	const key = `hashtext('agentfs.search.backfill.' || current_schema())`
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`).Scan(&mine); err != nil || !mine {
		return false, Translate(err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`) }()
	for after := ""; ; {
		var n int
		if after, n, err = s.indexOldChunk(ctx, after); err != nil {
			return false, err
		}
		if n == 0 {
			break
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE search_backfill SET done_at = now() WHERE done_at IS NULL`); err != nil {
		return false, Translate(fmt.Errorf("index old files: %w", err))
	}
	s.indexDone.Store(true)
	return true, nil
}

// indexOldChunk indexes the next blobs after the key after that have no
// row, and returns the last key it looked at and how many it found.
func (s *Store) indexOldChunk(ctx context.Context, after string) (string, int, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (blob_key) blob_key, subject, size_bytes FROM file_versions v
		WHERE blob_key > $1 AND NOT EXISTS (SELECT 1 FROM search_texts t WHERE t.blob_key = v.blob_key)
		ORDER BY blob_key LIMIT $2`, after, backfillChunk)
	if err != nil {
		return after, 0, Translate(fmt.Errorf("index old files: %w", err))
	}
	type old struct {
		key, subject string
		size         int64
	}
	todo, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (old, error) {
		var o old
		return o, r.Scan(&o.key, &o.subject, &o.size)
	})
	if err != nil || len(todo) == 0 {
		return after, 0, Translate(err)
	}
	keys, subjects, kinds, bodies := make([]string, 0, len(todo)), make([]string, 0, len(todo)), make([]int16, 0, len(todo)), make([]string, 0, len(todo))
	for _, o := range todo {
		t, err := s.readText(ctx, o.key, o.size)
		if errors.Is(err, agentfs.ErrNotFound) {
			continue // its blob is gone: no file can show it
		}
		if err != nil {
			return after, 0, err
		}
		keys, subjects, kinds, bodies = append(keys, o.key), append(subjects, o.subject), append(kinds, t.kind), append(bodies, t.body)
	}
	// The versions that reference the blobs are locked while their rows go
	// in, so a version sweep and the blob sweep after it cannot both miss
	// a row inserted for a blob they remove.
	_, err = s.pool.Exec(ctx, `WITH l AS (SELECT blob_key FROM file_versions WHERE blob_key = ANY($1) FOR KEY SHARE)
		INSERT INTO search_texts (blob_key, subject, kind, body)
		SELECT k, s, kind, CASE WHEN kind = 0 THEN body END
		FROM unnest($1::text[], $2::text[], $3::smallint[], $4::text[]) AS u(k, s, kind, body)
		WHERE k IN (SELECT blob_key FROM l)
		ON CONFLICT (blob_key) DO NOTHING`, keys, subjects, kinds, bodies)
	if err != nil {
		return after, 0, Translate(fmt.Errorf("index old files: %w", err))
	}
	return todo[len(todo)-1].key, len(todo), nil
}

// IndexComplete reports whether every file's current content is in the
// search index (false while IndexOldFiles has old files left). Once true
// it stays true: every write indexes its own content.
func (s *Store) IndexComplete(ctx context.Context) bool {
	if s.indexDone.Load() {
		return true
	}
	var done bool
	if err := s.pool.QueryRow(ctx, `SELECT done_at IS NOT NULL FROM search_backfill`).Scan(&done); err != nil {
		return false
	}
	if done {
		s.indexDone.Store(true)
	}
	return done
}

// KeepIndexing runs IndexOldFiles until the index is complete: at once,
// then every retry while another instance holds it or it fails (logged).
func (s *Store) KeepIndexing(ctx context.Context, log *slog.Logger, retry time.Duration) {
	for {
		done, err := s.IndexOldFiles(ctx)
		switch {
		case done:
			return
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "index old files for search", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// The mover: texts that writes record pending (searchPending) go into the
// trigram index in the background, out of the writes' transactions. A
// text's trigrams cost Postgres more than the write that recorded it (about
// 4 ms for a 10 KB source file against 2–3 ms for its keyed write), so the
// mover yields to a burst of writes (tar -x into a mount, a batch, an
// agent's checkout), its own instance's or another's, and moves once it
// pauses, within bounds: the texts are searchable meanwhile, read whole by
// a search (search_texts_pending).
const (
	// pendingBatch is how many pending texts one statement moves.
	pendingBatch = 256
	// pendingQuiet is the pause in writes recording texts that the mover
	// waits for: the count of pending texts did not grow over it.
	pendingQuiet = 200 * time.Millisecond
	// pendingMaxDelay is the longest it waits for that pause: under writes
	// that never pause it moves at least this often.
	pendingMaxDelay = 10 * time.Second
	// pendingBacklog is how many pending texts make it move without
	// waiting for a pause: a search reads about that many texts whole at
	// the most.
	pendingBacklog = 512
)

// IndexPending puts every pending text into the trigram index, at most
// pendingBatch a statement, and answers how many it moved. Each statement
// is its own transaction: a crash loses only the move of its batch, whose
// rows stay pending (and searchable) for the next run. Instances share the
// work: a statement skips the rows another one is moving.
func (s *Store) IndexPending(ctx context.Context) (int, error) {
	moved := 0
	for {
		tag, err := s.pool.Exec(ctx, `UPDATE search_texts SET kind = 0
			WHERE blob_key IN (SELECT blob_key FROM search_texts WHERE kind = 3 LIMIT $1 FOR UPDATE SKIP LOCKED)
			AND kind = 3`, pendingBatch)
		if err != nil {
			return moved, Translate(fmt.Errorf("index pending texts: %w", err))
		}
		moved += int(tag.RowsAffected())
		if tag.RowsAffected() < pendingBatch {
			return moved, nil
		}
	}
}

// wakeMover tells KeepIndexingPending that a write records a pending text.
func (s *Store) wakeMover() {
	select {
	case s.moverWake <- struct{}{}:
	default:
	}
}

// KeepIndexingPending runs IndexPending until ctx ends: at once (texts a
// crash left pending), when a write of this instance records one, and
// every interval (the writes of other instances, and a wake that came
// before its write committed); each time once writes pause (yield). Failures are logged and retried at the next turn; the
// texts stay searchable meanwhile.
func (s *Store) KeepIndexingPending(ctx context.Context, log *slog.Logger, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if _, err := s.IndexPending(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "move pending texts into the search index", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.moverWake:
		}
		if !s.yield(ctx) {
			return
		}
	}
}

// yield waits until writes pause: until no text was recorded pending
// (by any instance) for pendingQuiet, for pendingMaxDelay at the most, or
// until pendingBacklog texts are pending; false when ctx ended.
func (s *Store) yield(ctx context.Context) bool {
	start, last := time.Now(), -1
	for {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM search_texts WHERE kind = 3 LIMIT $1) p`,
			pendingBacklog).Scan(&n)
		if err != nil || n <= last || n >= pendingBacklog || time.Since(start) >= pendingMaxDelay {
			return ctx.Err() == nil // a failed count: IndexPending says why
		}
		last = n
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pendingQuiet):
		}
	}
}
