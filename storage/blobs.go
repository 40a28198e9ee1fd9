package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/tags"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/blobcache"
	"github.com/agentfs/agentfs/storage/splice"
)

func errUnavailable() error { return agentfs.ErrUnavailable }

// ensureBucket creates the bucket unless it exists; a concurrent creator
// winning the race is fine. Instances that start together race for a new
// bucket, and an S3 server may answer one of them with an internal error
// while the other's creation is half done (versitygw does), so a failure
// is tried again a few times before it counts.
func (s *Store) ensureBucket(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return translateS3(ctx.Err())
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err = s.makeBucket(ctx); err == nil {
			return nil
		}
	}
	return err
}

func (s *Store) makeBucket(ctx context.Context) error {
	ok, err := s.s3.BucketExists(ctx, s.bucket)
	if err != nil {
		return translateS3(fmt.Errorf("check bucket: %w", err))
	}
	if ok {
		return nil
	}
	err = s.s3.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.cfg.S3Region})
	if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
		return nil
	}
	return translateS3(err)
}

// blobTags are the S3 object tags of a blob: who wrote it and for which file.
func blobTags(fileID string, by agentfs.Attribution) map[string]string {
	t := map[string]string{"file-id": fileID}
	if by.AgentID != "" {
		t["agent-id"] = by.AgentID
	}
	if by.RunID != "" {
		t["run-id"] = by.RunID
	}
	return t
}

// hashingReader hashes and counts the bytes read through it, so the content
// is hashed once, on its way to S3. The HTTP transport may still call Read
// after PutObject returned (to check that the body holds no extra bytes), so
// the state is guarded and frozen by finish.
type hashingReader struct {
	mu   sync.Mutex
	r    io.Reader
	h    hash.Hash
	n    int64
	err  error // the source's own failure, if any, as opposed to S3's
	done bool
	// text, when set, keeps the bytes for the search index as they pass.
	text *textCapture
	// keep, when keeping, holds the bytes for the blob cache as they
	// pass, up to keepMax of them (past it, nothing is kept).
	keep    []byte
	keepMax int64
	keeping bool
}

// keepFor makes hr keep a body of declared size (-1: unknown) for the
// blob cache, when a blob of that size fits in it.
func (hr *hashingReader) keepFor(c *blobcache.Cache, size int64) {
	switch {
	case size >= 0 && c.Fits(size):
		hr.keeping, hr.keepMax, hr.keep = true, size, make([]byte, 0, size)
	case size < 0 && c.Fits(0):
		hr.keeping, hr.keepMax = true, c.Stats().MaxObject
	}
}

// kept is the whole body of n bytes, when hr kept it (ok).
func (hr *hashingReader) kept(n int64) (b []byte, ok bool) {
	if !hr.keeping || int64(len(hr.keep)) != n {
		return nil, false
	}
	if cap(hr.keep) > len(hr.keep) {
		return bytes.Clone(hr.keep), true // grown by append: hold no spare capacity
	}
	return hr.keep, true
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

// newCountingReader is a hashingReader that only counts: for bytes whose
// SHA-256 S3 itself checks against a digest sent with them.
func newCountingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r}
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if hr.done {
		return 0, io.EOF
	}
	n, err := hr.r.Read(p)
	hr.n += int64(n)
	if hr.h != nil {
		hr.h.Write(p[:n])
	}
	if hr.text != nil {
		hr.text.write(p[:n])
	}
	if hr.keeping {
		if int64(len(hr.keep)+n) > hr.keepMax {
			hr.keeping, hr.keep = false, nil
		} else {
			hr.keep = append(hr.keep, p[:n]...)
		}
	}
	if err != nil && err != io.EOF {
		hr.err = err
	}
	return n, err
}

// finish stops reading and returns the count, the SHA-256 and the source's
// error.
func (hr *hashingReader) finish() (int64, []byte, error) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	hr.done = true
	if hr.h == nil {
		return hr.n, nil, hr.err
	}
	return hr.n, hr.h.Sum(nil), hr.err
}

// maxSinglePut is the largest object one S3 PUT may carry.
const maxSinglePut = 5 << 30

// putBlob streams r into a new object at key. size is -1 when unknown, in
// which case minio-go buffers one part (Config.PartSize) at a time.
func (s *Store) putBlob(ctx context.Context, key string, r io.Reader, size int64, contentType string, tagSet map[string]string) error {
	_, err := s.s3.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{
		ContentType:          contentType,
		UserTags:             tagSet,
		PartSize:             s.cfg.PartSize,
		DisableContentSha256: true,
		// A body of known length streams to S3 as one PUT, with no part
		// buffered; only a body of unknown length goes up in parts.
		DisableMultipart: size >= 0 && size <= maxSinglePut,
	})
	if err != nil {
		return translateS3(fmt.Errorf("put blob: %w", err))
	}
	return nil
}

// retagBlob rewrites a blob's tags (its bytes never change).
func (s *Store) retagBlob(ctx context.Context, key string, tagSet map[string]string) error {
	t, err := tags.MapToObjectTags(tagSet)
	if err != nil {
		return fmt.Errorf("retag blob: %w", err)
	}
	if err := s.s3.PutObjectTagging(ctx, s.bucket, key, t, minio.PutObjectTaggingOptions{}); err != nil {
		return translateS3(fmt.Errorf("retag blob: %w", err))
	}
	return nil
}

// removeBlob deletes a blob no row references. Failures are left for the
// sweeper, so it returns nothing.
func (s *Store) removeBlob(ctx context.Context, key string) {
	s.blobs.Remove(key)
	_ = s.s3.RemoveObject(context.WithoutCancel(ctx), s.bucket, key, minio.RemoveObjectOptions{})
}

// BlobTags returns the S3 tags of the blob behind a file.
func (s *Store) BlobTags(ctx context.Context, key string) (map[string]string, error) {
	t, err := s.s3.GetObjectTagging(ctx, s.bucket, key, minio.GetObjectTaggingOptions{})
	if err != nil {
		return nil, translateS3(fmt.Errorf("get blob tags: %w", err))
	}
	return t.ToMap(), nil
}

// OpenBlob opens length bytes of a blob from offset (the whole blob when
// length is 0). It reads the S3 response body directly, so a missing
// object or an outage is reported here, before any byte is sent on. A read
// that S3 leaves unanswered for Config.S3Timeout fails as unavailable.
//
// A small blob is served from the instance's blob cache when it is there
// (Config.BlobCacheBytes), and put there when it is read whole from S3.
func (s *Store) OpenBlob(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if b, ok := s.blobs.Get(key); ok {
		return cachedBlob(b, offset, length), nil
	}
	opts := minio.GetObjectOptions{}
	if length > 0 {
		if err := opts.SetRange(offset, offset+length-1); err != nil {
			return nil, fmt.Errorf("open blob: %w", err)
		}
	}
	switch b, err := s.openSpliced(ctx, key, offset, length); {
	case err == nil:
		return b, nil
	case !errors.Is(err, splice.ErrNotPossible):
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	body, info, header, err := s.core().GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		cancel()
		return nil, translateS3(fmt.Errorf("open blob: %w", err))
	}
	b := &blobReader{body: body, cancel: cancel, limit: s.cfg.S3Timeout}
	b.watchdog = time.AfterFunc(time.Hour, func() { b.stalled.Store(true); cancel() })
	b.watchdog.Stop()
	if offset == 0 && s.blobs.Fits(info.Size) && wholeObject(length, info.Size, header.Get("Content-Range")) {
		return s.fillCache(key, b, info.Size)
	}
	return b, nil
}

// wholeObject reports whether a GET answered with size bytes carries the
// whole object: no range was asked (length 0), or the Content-Range's
// total is the size of what came.
func wholeObject(length, size int64, contentRange string) bool {
	if length == 0 {
		return true
	}
	_, total, ok := strings.Cut(contentRange, "/")
	return ok && total == strconv.FormatInt(size, 10)
}

// fillCache reads a whole small blob from b into the blob cache and
// serves it from there.
func (s *Store) fillCache(key string, b *blobReader, size int64) (io.ReadCloser, error) {
	defer b.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(b, buf); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = translateS3(fmt.Errorf("read blob: %w", io.ErrUnexpectedEOF))
		}
		return nil, err
	}
	s.blobs.Put(key, buf)
	return cachedBlob(buf, 0, 0), nil
}

// cachedBlob is length bytes of b from offset (to its end when length is
// 0), as OpenBlob opens them. bytes.Reader writes itself out (io.WriterTo).
func cachedBlob(b []byte, offset, length int64) io.ReadCloser {
	offset = min(max(offset, 0), int64(len(b)))
	end := int64(len(b))
	if length > 0 {
		end = min(offset+length, end)
	}
	return io.NopCloser(bytes.NewReader(b[offset:end]))
}

// openSpliced opens a large ranged read over a connection of its own, so
// a download can move socket to socket (package splice), or fails with
// splice.ErrNotPossible: smaller reads and TLS to S3 use the ordinary
// client.
func (s *Store) openSpliced(ctx context.Context, key string, offset, length int64) (*splice.Body, error) {
	if s.cfg.S3UseSSL || length < splice.MinLength {
		return nil, splice.ErrNotPossible
	}
	u, err := s.s3.PresignedGetObject(ctx, s.bucket, key, 5*time.Minute, nil)
	if err != nil {
		return nil, splice.ErrNotPossible
	}
	return s.relay.Open(ctx, u, offset, length)
}

// blobReader translates S3 errors met while reading, and gives up on a read
// S3 does not answer within limit. The watchdog runs only while a read is
// outstanding, so a slow consumer is not mistaken for a stalled S3.
type blobReader struct {
	body     io.ReadCloser
	cancel   context.CancelFunc
	limit    time.Duration
	watchdog *time.Timer
	stalled  atomic.Bool
}

func (b *blobReader) Read(p []byte) (int, error) {
	b.watchdog.Reset(b.limit)
	n, err := b.body.Read(p)
	b.watchdog.Stop()
	switch {
	case err == nil || err == io.EOF:
	case b.stalled.Load():
		err = fmt.Errorf("%w: S3 sent nothing for %s in the middle of a blob", agentfs.ErrUnavailable, b.limit)
	default:
		err = translateS3(err)
	}
	return n, err
}

func (b *blobReader) Close() error {
	b.watchdog.Stop()
	defer b.cancel()
	return b.body.Close()
}

// transientS3Codes are S3 error codes that say "try again", whatever the
// status the client library kept.
var transientS3Codes = map[string]bool{
	"InternalError": true, "ServiceUnavailable": true, "SlowDown": true, "RequestTimeout": true,
}

// translateS3 turns minio errors into the domain's: a missing object is
// agentfs.ErrNotFound; a refused connection or a 5xx is agentfs.ErrUnavailable.
func translateS3(err error) error {
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) { // the operation's context may wrap it
		resp = minio.ToErrorResponse(err)
	}
	var (
		netErr net.Error
		urlErr *url.Error
	)
	switch {
	case resp.Code == "NoSuchKey":
		return fmt.Errorf("%w: %w", agentfs.ErrNotFound, err)
	case resp.StatusCode >= http.StatusInternalServerError, transientS3Codes[resp.Code],
		errors.As(err, &netErr), errors.As(err, &urlErr),
		errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %w", agentfs.ErrUnavailable, err)
	}
	return err
}
