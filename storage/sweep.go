package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
)

// SweepBlobs removes blobs that no file or upload session references and
// that were written longer ago than grace: blobs superseded by a replace,
// left by a write that failed or whose process died, or by an identical
// re-upload. grace must outlast the longest write in flight (its blob is
// not referenced until it commits). A superseded blob older than grace goes
// at the next sweep, so a read that began before the replace must finish
// within the sweep interval. It reports how many it removed.
func (s *Store) SweepBlobs(ctx context.Context, grace time.Duration) (int64, error) {
	cutoff := time.Now().Add(-grace)
	var (
		removed int64
		page    []string
	)
	flush := func() error {
		n, err := s.removeUnreferenced(ctx, page)
		removed += n
		page = page[:0]
		return err
	}
	for obj := range s.s3.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: "blobs/", Recursive: true}) {
		if obj.Err != nil {
			return removed, translateS3(fmt.Errorf("list blobs: %w", obj.Err))
		}
		if obj.LastModified.After(cutoff) {
			continue
		}
		if page = append(page, obj.Key); len(page) == 500 {
			if err := flush(); err != nil {
				return removed, err
			}
		}
	}
	if err := flush(); err != nil {
		return removed, err
	}
	n, err := s.abortStaleMultipart(ctx, cutoff)
	return removed + n, err
}

// removeUnreferenced deletes the keys of page that no row references.
func (s *Store) removeUnreferenced(ctx context.Context, page []string) (int64, error) {
	if len(page) == 0 {
		return 0, nil
	}
	orphans, err := s.unreferenced(ctx, page)
	if err != nil {
		return 0, err
	}
	// Their search index rows go first: no file shows them any more, and
	// a blob whose removal fails is found again by the next sweep.
	if err := s.forgetTexts(ctx, orphans); err != nil {
		return 0, err
	}
	var n int64
	for _, key := range orphans {
		if err := s.s3.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return n, translateS3(fmt.Errorf("remove blob: %w", err))
		}
		n++
	}
	return n, nil
}

// unreferenced returns the blob keys that no file, no version and no
// upload session still in progress references. (A completed session's
// blob is its file's, or garbage once that file's versions are gone.)
func (s *Store) unreferenced(ctx context.Context, keys []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT k FROM unnest($1::text[]) AS k
		WHERE NOT EXISTS (SELECT 1 FROM files WHERE blob_key = k)
		  AND NOT EXISTS (SELECT 1 FROM file_versions WHERE blob_key = k)
		  AND NOT EXISTS (SELECT 1 FROM uploads WHERE blob_key = k AND status IN ('pending', 'completing'))`, keys)
	if err != nil {
		return nil, Translate(fmt.Errorf("find unreferenced blobs: %w", err))
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return orphans, Translate(err)
}

// abortStaleMultipart aborts S3 multipart uploads older than cutoff that no
// live upload session owns: a session whose creation did not commit, one
// aborted whose drop failed, or a streamed upload of a process that died.
func (s *Store) abortStaleMultipart(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	for up := range s.s3.ListIncompleteUploads(ctx, s.bucket, "blobs/", true) {
		if up.Err != nil {
			return n, translateS3(fmt.Errorf("list multipart uploads: %w", up.Err))
		}
		if up.Initiated.After(cutoff) {
			continue
		}
		var known bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM uploads WHERE s3_upload_id = $1
				AND status IN ('pending', 'completing'))`, up.UploadID).Scan(&known); err != nil {
			return n, Translate(err)
		}
		if known {
			continue
		}
		if err := s.core().AbortMultipartUpload(ctx, s.bucket, up.Key, up.UploadID); err != nil {
			return n, translateS3(fmt.Errorf("abort stale multipart upload: %w", err))
		}
		n++
	}
	return n, nil
}

// PurgeDeleted removes files deleted longer ago than their retention
// (purge_after), except those a checkpoint keeps: the row with its versions and links, with a file.purged
// event, then the blobs of its versions that no other row references.
func (s *Store) PurgeDeleted(ctx context.Context) (int64, error) {
	var n int64
	for {
		var blobs []string
		err := s.WithTx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `WITH f AS (
					DELETE FROM files WHERE id = (
						SELECT id FROM files p WHERE purge_after < now() AND NOT `+pinnedBy("p.id", "")+`
						LIMIT 1 FOR UPDATE SKIP LOCKED)
					RETURNING *),
				gone AS (SELECT blob_key FROM file_versions WHERE file_id = (SELECT id FROM f)
					UNION SELECT blob_key FROM f),
				e AS (`+insertEventFrom("'"+agentfs.EventPurged+"'", "NULL")+`)
				SELECT blob_key FROM gone`, originArgs(agentfs.Origin{}, nil))
			if err != nil {
				return Translate(err)
			}
			blobs, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return Translate(err)
		})
		if err != nil {
			return n, fmt.Errorf("purge deleted files: %w", err)
		}
		if len(blobs) == 0 {
			return n, nil
		}
		orphans, err := s.unreferenced(ctx, blobs)
		if err != nil {
			return n, err
		}
		if err := s.forgetTexts(ctx, orphans); err != nil {
			return n, fmt.Errorf("purge deleted files: %w", err)
		}
		for _, key := range orphans {
			s.removeBlob(ctx, key)
		}
		n++
	}
}

// inChunks runs stmt, which changes at most chunk rows, again until it
// changes fewer, so that each statement stays short however many rows are
// due; it reports how many rows changed in all. what names the work in
// errors.
func (s *Store) inChunks(ctx context.Context, what string, chunk int64, stmt string, args ...any) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, stmt, args...)
		if err != nil {
			return total, Translate(fmt.Errorf("%s: %w", what, err))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}
