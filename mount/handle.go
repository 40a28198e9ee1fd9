package mount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/client"
)

// handle is an open file. Reads stream ranges of the version it opened
// (cached by etag); the first write or truncate stages the content in the
// cache directory, and each flush (close) or fsync stores the staged
// content as one version: a keyed replace conditional on the version
// opened.
type handle struct {
	n        *fileNode
	mu       sync.Mutex
	base     *client.File // the stored version this handle extends; nil: a new file
	writable bool
	stage    *os.File
	dirty    bool
	// chained: in write-back, the handle's content was recorded as a
	// pending store; its next one extends the file's latest version.
	chained bool
	// shared: in write-back, the stage is also a pending store's content
	// (linked into D/pending at the close): the next write copies it
	// first, so the recorded content never changes.
	shared bool
}

// The calls an open file answers.
var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

func (n *fileNode) newHandle(base *client.File, writable bool) (*handle, syscall.Errno) {
	h := &handle{n: n, base: base, writable: writable}
	n.mu.Lock()
	if n.open == nil {
		n.open = map[*handle]bool{}
	}
	n.open[h] = true
	n.mu.Unlock()
	return h, 0
}

// stageTime is when a stage's content last changed (now for none), to
// the microsecond the store keeps: the mtime and ctime a file shows while
// it is written, while its store is pending and once it is stored, so
// that they never move under a program (git records them at checkout).
func stageTime(stage *os.File) time.Time {
	if stage != nil {
		if st, err := stage.Stat(); err == nil {
			return st.ModTime().Truncate(time.Microsecond)
		}
	}
	return time.Now().Truncate(time.Microsecond)
}

// staging answers the staged content's stat while it holds changes not
// stored yet.
func (h *handle) staging() (os.FileInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stage == nil || !h.dirty {
		return nil, false
	}
	st, err := h.stage.Stat()
	return st, err == nil
}

// Read answers bytes from the staged content, or from the version opened.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = uninterrupted(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stage != nil {
		n, err := h.stage.ReadAt(dest, off)
		if err != nil && err != io.EOF {
			return nil, syscall.EIO
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	if h.base == nil {
		return fuse.ReadResultData(nil), 0
	}
	n, e := h.n.fs.readRange(ctx, h.base, dest, off)
	return fuse.ReadResultData(dest[:n]), e
}

// Write writes into the staged content.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.staged(ctx, true); e != 0 {
		return 0, e
	}
	n, err := h.stage.WriteAt(data, off)
	if err != nil {
		return uint32(n), syscall.EIO
	}
	h.dirty = true
	return uint32(n), 0
}

func (h *handle) truncate(size int64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.staged(context.Background(), size > 0); e != 0 {
		return e
	}
	if err := h.stage.Truncate(size); err != nil {
		return syscall.EIO
	}
	h.dirty = true
	return 0
}

// staged makes the stage file, with the opened version's bytes when keep.
func (h *handle) staged(ctx context.Context, keep bool) syscall.Errno {
	if h.stage != nil {
		if h.shared {
			return h.unshare()
		}
		return 0
	}
	f, err := os.OpenFile(h.n.fs.stagePath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return syscall.EIO
	}
	if keep && h.base != nil && h.base.SizeBytes > 0 {
		c, err := h.n.fs.c.VersionContent(ctx, h.base.ID, h.base.Version, client.ContentOptions{})
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			fmt.Fprintf(os.Stderr, "agentfs mount: read %s to change it: %v\n", h.n.fs.remote(h.n.Path(h.n.fs.root)), err)
			return errno(err)
		}
		_, err = io.Copy(f, c)
		c.Close()
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return syscall.EIO
		}
	}
	h.stage = f
	return 0
}

// Flush stores the staged content, if it changed, as one version. Close
// returns only once it is stored: a closed file is durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	ctx = uninterrupted(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty && (h.base != nil || h.chained || h.n.current() != nil) {
		return 0 // nothing new; a file created here is stored at its first close, empty or not
	}
	if h.n.fs.wb != nil {
		return h.flushBack()
	}
	f, err := h.n.store(ctx, h.stage, h.base)
	if err != nil {
		// The program sees only an errno: say here what the store answered.
		fmt.Fprintf(os.Stderr, "agentfs mount: %v\n", err)
		return errno(err)
	}
	h.base, h.dirty = f, false
	if h.stage != nil && f.SizeBytes > chunkSize {
		h.n.fs.keepContent(h.stage, f)
	}
	return 0
}

// Fsync stores the staged content, as Flush; in write-back it also waits
// for the file's pending stores: fsync means stored.
func (h *handle) Fsync(ctx context.Context, _ uint32) syscall.Errno {
	if e := h.Flush(ctx); e != 0 {
		return e
	}
	return h.n.fs.wb.wait(h.n)
}

// Release forgets the handle and its stage.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stage != nil {
		h.stage.Close()
		h.n.fs.keepStage(h.stage.Name(), h.base, h.dirty)
		h.stage = nil
	}
	h.n.mu.Lock()
	delete(h.n.open, h)
	h.n.mu.Unlock()
	return 0
}

// store sends content as the file's next version: a replace conditional
// on base's etag (a create when base is nil), under a key of its own that
// every retry repeats. When the file changed (or appeared) elsewhere since
// it was opened, the other version is kept in history and this one is
// stored after it, unconditionally: both stay, and each is an event.
func (n *fileNode) store(ctx context.Context, content *os.File, base *client.File) (*client.File, error) {
	changed := stageTime(content)
	n.mu.Lock()
	mode, kind, mtime := n.mode, n.kind, changed
	if n.mtime != nil {
		mtime = *n.mtime
	}
	n.mu.Unlock()
	remote := n.fs.remote(n.Path(n.fs.root))
	opts := client.PutOptions{Mode: &mode, MTime: &mtime, Kind: kind, IdempotencyKey: n.fs.key()}
	if base == nil {
		opts.IfNoneMatchAny = true
	} else {
		opts.Replace, opts.IfMatch = true, base.ETag
	}
	f, err := n.fs.put(ctx, remote, content, opts, func(o *client.PutOptions) error {
		o.IdempotencyKey = n.fs.key()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", remote, err)
	}
	n.setMeta(f)
	n.mu.Lock()
	n.mtime = nil
	n.wrote = &wroteVersion{version: f.Version, ctime: changed}
	n.mu.Unlock()
	return f, nil
}

// put sends content as one version with opts (conditional on a version,
// or a create); when the condition fails, the unconditional replace,
// under the new key rekey sets (before it is sent).
func (fsys *filesystem) put(ctx context.Context, remote string, content *os.File, opts client.PutOptions, rekey func(*client.PutOptions) error) (*client.File, error) {
	f, err := fsys.putFrom(ctx, remote, content, opts)
	if client.ErrorCode(err) == "PRECONDITION_FAILED" && (opts.IfMatch != "" || opts.IfNoneMatchAny) {
		opts.Replace, opts.IfMatch, opts.IfNoneMatchAny = true, "", false
		if err := rekey(&opts); err != nil {
			return nil, err
		}
		f, err = fsys.putFrom(ctx, remote, content, opts)
	}
	return f, err
}

func (fsys *filesystem) putFrom(ctx context.Context, remote string, content *os.File, opts client.PutOptions) (*client.File, error) {
	if content == nil {
		return fsys.c.PutFile(ctx, remote, strings.NewReader(""), opts)
	}
	if _, err := content.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return fsys.c.PutFile(ctx, remote, content, opts)
}

// chunkSize is the unit of ranged reads and of the read cache.
const chunkSize = 1 << 20

// keepMax is the largest stored content kept in the read cache at its
// store; a larger one is read back from the store when read.
const keepMax = 8 << 20

// keepStage ends a handle's stage: one that holds exactly the version f
// it stored (one chunk at most; not dirty since) becomes that chunk of the
// read cache, so the bytes written through the mount are read back
// without a request (grep -r after tar -x); it costs a rename where a
// removal was due anyway, and nothing before close returns. Any other
// stage is removed. A larger file's chunks were kept at its store
// (keepContent).
func (fsys *filesystem) keepStage(name string, f *client.File, dirty bool) {
	if !dirty && f != nil && f.SizeBytes > 0 && f.SizeBytes <= chunkSize {
		if st, err := os.Stat(name); err == nil && st.Size() == f.SizeBytes && os.Rename(name, fsys.chunkPath(f, 0)) == nil {
			return
		}
	}
	os.Remove(name)
}

// keepContent puts the content just stored as f into the read cache under
// its etag, as the chunks a read would fetch: the bytes written through
// the mount are read back without a request (grep -r after tar -x). The
// content is checked against f's SHA-256 first; a mismatch keeps nothing.
func (fsys *filesystem) keepContent(content *os.File, f *client.File) {
	if content == nil || f.SizeBytes == 0 || f.SizeBytes > keepMax {
		return
	}
	b := make([]byte, f.SizeBytes)
	if n, _ := content.ReadAt(b, 0); int64(n) != f.SizeBytes {
		return
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != etagSHA(f.ETag) {
		return
	}
	for idx := int64(0); idx*chunkSize < f.SizeBytes; idx++ {
		fsys.putChunk(f, idx, b[idx*chunkSize:min((idx+1)*chunkSize, f.SizeBytes)])
	}
}

// chunkPath is the read cache's file of chunk idx of f's content.
func (fsys *filesystem) chunkPath(f *client.File, idx int64) string {
	return filepath.Join(fsys.cache, "chunks", etagSHA(f.ETag)+"-"+strconv.FormatInt(idx, 10))
}

// putChunk writes a chunk into the read cache (a temporary file renamed,
// so a reader sees it whole or not at all).
func (fsys *filesystem) putChunk(f *client.File, idx int64, b []byte) {
	name := fsys.chunkPath(f, idx)
	tmp := name + ".tmp" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, name)
	}
}

// readRange reads into dest from off of the version f, chunk by chunk,
// each fetched once with a Range request and kept in the cache directory
// under the content's etag.
func (fsys *filesystem) readRange(ctx context.Context, f *client.File, dest []byte, off int64) (int, syscall.Errno) {
	total := 0
	for total < len(dest) && off < f.SizeBytes {
		idx := off / chunkSize
		chunk, e := fsys.chunk(ctx, f, idx)
		if e != 0 {
			return total, e
		}
		start := off - idx*chunkSize
		if start >= int64(len(chunk)) {
			break
		}
		n := copy(dest[total:], chunk[start:])
		total += n
		off += int64(n)
	}
	return total, 0
}

func (fsys *filesystem) chunk(ctx context.Context, f *client.File, idx int64) ([]byte, syscall.Errno) {
	if b, err := os.ReadFile(fsys.chunkPath(f, idx)); err == nil {
		return b, 0
	}
	from := idx * chunkSize
	to := min(from+chunkSize, f.SizeBytes) - 1
	c, err := fsys.c.VersionContent(ctx, f.ID, f.Version, client.ContentOptions{Range: fmt.Sprintf("bytes=%d-%d", from, to)})
	if err != nil {
		return nil, errno(err)
	}
	defer c.Close()
	b, err := io.ReadAll(io.LimitReader(c, chunkSize))
	if err != nil {
		return nil, syscall.EIO
	}
	fsys.putChunk(f, idx, b)
	return b, 0
}
