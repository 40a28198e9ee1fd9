package client

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Defaults of UploadFile and PutPath.
const (
	// DefaultParallel is how many parts UploadFile sends at once.
	DefaultParallel = 4
	// DefaultSessionThreshold is the size from which PutPath sends a file
	// through an upload session instead of one POST.
	DefaultSessionThreshold = 64 << 20
)

// UploadOptions adjust UploadFile and UploadReaderAt. The zero value
// creates a new file and fails with PATH_EXISTS if a live file holds the
// path.
type UploadOptions struct {
	// Replace replaces the live file at the path; it keeps its id and url.
	Replace bool
	// IfMatch replaces only the live file with this ETag (412 otherwise);
	// it needs Replace.
	IfMatch string
	// ContentType is stored as the file's content_type; the server's
	// default is application/octet-stream.
	ContentType string
	// SHA256 is the whole content's SHA-256, lowercase hex. When empty it
	// is computed by reading the content once before the upload starts.
	// The server checks the assembled file against it.
	SHA256 string
	// Parallel is how many parts are sent at once; DefaultParallel when 0.
	Parallel int
	// Progress, when set, is told the bytes sent so far and the total as
	// parts stream; parts a resumed session already holds count as sent.
	// It is never called concurrently. sent goes back when a part has to
	// be sent again, and it ends at total once the file is complete.
	Progress func(sent, total int64)
	// HashProgress, when set, is told the bytes hashed so far and the
	// total while the whole content's SHA-256 is computed, before the
	// session starts and before Progress is first called (never when
	// SHA256 is given). Reading a large file takes a while; this lets a
	// program show that phase apart from the upload.
	HashProgress func(hashed, total int64)
	// OnSession, when set, is called once the session is created or
	// resumed, with the parts it already holds.
	OnSession func(u *Upload)
	// ExpiresIn makes the file expire this long after it is stored (60 s
	// to 365 days, whole seconds); zero sets nothing, and a replace then
	// keeps the file's expires_at.
	ExpiresIn time.Duration
}

// UploadFile uploads the local file at localPath to remotePath through an
// upload session and returns the file; see UploadReaderAt.
func (c *Client) UploadFile(ctx context.Context, localPath, remotePath string, opts UploadOptions) (*File, error) {
	f, size, err := openRegular(localPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return c.UploadReaderAt(ctx, f, size, remotePath, opts)
}

// UploadReaderAt uploads the size bytes of r to remotePath through an
// upload session and returns the file.
//
// It starts a session, or resumes the live one that an interrupted upload
// of the same content left (same path, size, content type and SHA-256):
// a part the session holds whose SHA-256 matches the local part is not
// sent again. The other parts are sent opts.Parallel at a time, each read
// through its own io.NewSectionReader, so that a retry sends it again
// whole; each carries its Content-Digest. Then the session is completed.
//
// On failure the session is left pending (it expires by itself): calling
// again with the same content resumes it. Empty content, which a session
// cannot hold, is sent with one POST /v1/files.
func (c *Client) UploadReaderAt(ctx context.Context, r io.ReaderAt, size int64, remotePath string, opts UploadOptions) (*File, error) {
	parallel, sum, err := opts.check(size)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return c.putReaderAt(ctx, r, 0, remotePath, opts, "")
	}
	if sum == "" {
		var content io.Reader = io.NewSectionReader(r, 0, size)
		if opts.HashProgress != nil {
			content = &hashCounter{r: content, fn: opts.HashProgress, total: size}
		}
		if sum, err = sha256Of(ctx, content); err != nil {
			return nil, err
		}
	}
	u, err := c.CreateUpload(ctx, remotePath, size, CreateUploadOptions{
		ContentType: opts.ContentType, Replace: opts.Replace, SHA256: sum, ExpiresIn: opts.ExpiresIn,
	})
	if err != nil {
		return nil, err
	}
	if err := checkPlan(u, size); err != nil {
		return nil, err
	}
	if opts.OnSession != nil {
		opts.OnSession(u)
	}
	prog := &progress{fn: opts.Progress, total: size}
	if err := c.sendParts(ctx, u, r, parallel, prog); err != nil {
		return nil, err
	}
	// The session may have been started without Replace by an earlier
	// run: say what this call wants.
	ifExists := "error"
	if opts.Replace {
		ifExists = "replace"
	}
	f, err := c.CompleteUpload(ctx, u.ID, CompleteOptions{IfExists: ifExists, IfMatch: opts.IfMatch})
	if err != nil {
		return nil, err
	}
	prog.finish()
	return f, nil
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check validates the options before anything is sent and returns the
// parallelism and the declared SHA-256 in lowercase.
func (o UploadOptions) check(size int64) (parallel int, sum string, err error) {
	if size < 0 {
		return 0, "", fmt.Errorf("upload: negative size %d", size)
	}
	if o.Parallel < 0 {
		return 0, "", fmt.Errorf("upload: Parallel %d is negative", o.Parallel)
	}
	sum = strings.ToLower(o.SHA256)
	if sum != "" && !sha256Pattern.MatchString(sum) {
		return 0, "", fmt.Errorf("upload: SHA256 %q is not 64 hex digits", o.SHA256)
	}
	return cmp.Or(o.Parallel, DefaultParallel), sum, nil
}

// checkPlan makes sure the session is one this content can fill.
func checkPlan(u *Upload, size int64) error {
	switch {
	case u.Status != UploadPending:
		return fmt.Errorf("upload %s is %s, not pending", u.ID, u.Status)
	case u.SizeBytes != size || u.PartSize < 1 || int64(u.PartCount) != (size+u.PartSize-1)/u.PartSize:
		return fmt.Errorf("upload %s has an unusable part plan: %d bytes in %d parts of %d", u.ID, u.SizeBytes, u.PartCount, u.PartSize)
	}
	return nil
}

// partJob is one part to make sure of: sent, or found already stored.
type partJob struct {
	n         int
	off, size int64
	stored    string // the SHA-256 the session holds for it, if any
}

// sendParts sends the parts the session lacks, parallel at a time, and
// stops at the first failure, which it returns.
func (c *Client) sendParts(ctx context.Context, u *Upload, r io.ReaderAt, parallel int, prog *progress) error {
	stored := map[int]string{}
	var held int64
	for _, p := range u.Parts {
		if p.PartNumber >= 1 && p.PartNumber <= u.PartCount {
			stored[p.PartNumber] = p.SHA256
			held += partLen(u, p.PartNumber)
		}
	}
	// What the session holds counts as sent from the start, so a resumed
	// upload's progress starts where the last one stopped; a stored part
	// found wrong is taken back when it is sent again.
	prog.add(held)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan partJob)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error // a later one may only be the cancel it caused
	)
	for range min(parallel, u.PartCount) {
		wg.Go(func() {
			for j := range jobs {
				if err := c.sendPart(ctx, u.ID, r, j, prog); err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
				}
			}
		})
	}
	feedParts(ctx, u, stored, jobs)
	wg.Wait()
	return firstErr
}

// feedParts hands out the session's parts in order until ctx ends, then
// closes jobs.
func feedParts(ctx context.Context, u *Upload, stored map[int]string, jobs chan<- partJob) {
	defer close(jobs)
	for n := 1; n <= u.PartCount; n++ {
		off := int64(n-1) * u.PartSize
		select {
		case jobs <- partJob{n: n, off: off, size: partLen(u, n), stored: stored[n]}:
		case <-ctx.Done():
			return
		}
	}
}

// partLen is the size of part n of the session's plan.
func partLen(u *Upload, n int) int64 {
	off := int64(n-1) * u.PartSize
	return min(u.PartSize, u.SizeBytes-off)
}

// sendPart hashes one part, and sends it unless the session holds it
// already, checking that the server stored what was sent.
func (c *Client) sendPart(ctx context.Context, id string, r io.ReaderAt, j partJob, prog *progress) error {
	sum, err := sha256Of(ctx, io.NewSectionReader(r, j.off, j.size))
	if err != nil {
		return err
	}
	if sum == j.stored {
		return nil // counted as sent from the start
	}
	if j.stored != "" {
		prog.add(-j.size)
	}
	body := &countedReader{r: io.NewSectionReader(r, j.off, j.size), prog: prog}
	raw, _ := hex.DecodeString(sum)
	p, err := c.PutPart(ctx, id, j.n, body, j.size, PartOptions{ContentDigest: Digest(raw)})
	if err != nil {
		body.settle(0)
		return err
	}
	body.settle(j.size)
	if p.SHA256 != sum {
		return fmt.Errorf("upload %s: the server stored part %d with SHA-256 %s, not %s", id, j.n, p.SHA256, sum)
	}
	return nil
}

// PutPathOptions adjust PutPath.
type PutPathOptions struct {
	UploadOptions
	// Threshold is the size from which the file goes through an upload
	// session; DefaultSessionThreshold when 0.
	Threshold int64
	// IdempotencyKey names the single POST of a file below Threshold;
	// generated when empty. (A session resumes without one.)
	IdempotencyKey string
}

// PutPath uploads the local file at localPath to remotePath and returns
// the file: with one POST /v1/files (PutFile) below opts.Threshold, and
// through a resumable upload session (UploadReaderAt) from it on, or when
// the server answers the POST with PAYLOAD_TOO_LARGE. opts.Parallel only
// matters for a session; opts.SHA256, when given, is sent with the POST as
// its Content-Digest.
func (c *Client) PutPath(ctx context.Context, localPath, remotePath string, opts PutPathOptions) (*File, error) {
	if opts.Threshold < 0 {
		return nil, fmt.Errorf("PutPath: Threshold %d is negative", opts.Threshold)
	}
	f, size, err := openRegular(localPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size >= cmp.Or(opts.Threshold, DefaultSessionThreshold) {
		return c.UploadReaderAt(ctx, f, size, remotePath, opts.UploadOptions)
	}
	_, sum, err := opts.check(size)
	if err != nil {
		return nil, err
	}
	file, err := c.putReaderAt(ctx, f, size, remotePath, opts.UploadOptions, opts.IdempotencyKey)
	if ErrorCode(err) == "PAYLOAD_TOO_LARGE" && size > 0 {
		opts.SHA256 = sum
		return c.UploadReaderAt(ctx, f, size, remotePath, opts.UploadOptions)
	}
	return file, err
}

// putReaderAt sends size bytes of r with one POST /v1/files.
func (c *Client) putReaderAt(ctx context.Context, r io.ReaderAt, size int64, remotePath string, opts UploadOptions, key string) (*File, error) {
	prog := &progress{fn: opts.Progress, total: size}
	body := &countedReader{r: io.NewSectionReader(r, 0, size), prog: prog}
	put := PutOptions{Replace: opts.Replace, IfMatch: opts.IfMatch, ContentType: opts.ContentType, IdempotencyKey: key,
		ExpiresIn: opts.ExpiresIn}
	if sum, err := hex.DecodeString(opts.SHA256); err == nil && len(sum) == sha256.Size {
		put.ContentDigest = Digest(sum)
	}
	f, err := c.PutFile(ctx, remotePath, body, put)
	if err != nil {
		body.settle(0)
		return nil, err
	}
	prog.finish()
	return f, nil
}

// openRegular opens a regular file for reading and returns its size.
func openRegular(name string) (*os.File, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// sha256Of reads r to its end and returns its SHA-256 in lowercase hex,
// stopping early when ctx ends.
func sha256Of(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, r}); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("read local content: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashCounter tells fn how much of the content has been read for hashing.
type hashCounter struct {
	r     io.Reader
	fn    func(hashed, total int64)
	total int64
	read  int64
}

func (h *hashCounter) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		h.read += int64(n)
		h.fn(h.read, h.total)
	}
	return n, err
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// progress adds up the bytes sent by every part and tells the callback.
type progress struct {
	mu    sync.Mutex
	fn    func(sent, total int64)
	sent  int64
	total int64
}

func (p *progress) add(n int64) {
	if p.fn == nil || n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += n
	p.fn(p.sent, p.total)
}

// finish reports the total once everything is stored.
func (p *progress) finish() {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = p.total
	p.fn(p.sent, p.total)
}

// countedReader is a part's body that reports the bytes read as
// progress. A rewind, for another attempt, takes back what the last
// attempt reported.
type countedReader struct {
	r    *io.SectionReader
	prog *progress

	mu      sync.Mutex
	counted int64
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.counted += int64(n)
	c.mu.Unlock()
	c.prog.add(int64(n))
	return n, err
}

func (c *countedReader) Seek(offset int64, whence int) (int64, error) {
	c.settle(0)
	return c.r.Seek(offset, whence)
}

// settle makes the part count for exactly n bytes of progress: all of it
// once stored, none while it is to be sent (again).
func (c *countedReader) settle(n int64) {
	c.mu.Lock()
	d := n - c.counted
	c.counted = n
	c.mu.Unlock()
	c.prog.add(d)
}
