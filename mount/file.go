package mount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/client"
)

// fileNode is a regular file or a symlink.
type fileNode struct {
	fs.Inode
	fs *filesystem

	mu    sync.Mutex
	meta  *client.File // as last stored or read; nil until first stored
	mode  int
	mtime *time.Time // set by utimes while a write is staged
	kind  string
	open  map[*handle]bool
	// pageETag is the etag of the content the kernel's page cache holds
	// of the file, as of its last open for reading ("" none or unknown):
	// an open of the same etag keeps the kernel's cache (FOPEN_KEEP_CACHE).
	pageETag string
	// In write-back (writeback.go): pendingN stores of the file are
	// pending, shown is the last one's size and mtime; lane is its queue
	// (under the writeBack's mutex); wbMu orders its closes.
	pendingN int
	shown    *shownContent
	// wrote is the version this mount's last store made and the ctime the
	// file showed while it was written (stageTime): a stat of that version
	// keeps showing it (git compares a file's times with what its index
	// recorded, and would read every file again if they moved when the
	// store arrived).
	wrote *wroteVersion
	lane  *lane
	wbMu  sync.Mutex
}

// The calls a file answers.
var (
	_ fs.NodeGetattrer  = (*fileNode)(nil)
	_ fs.NodeSetattrer  = (*fileNode)(nil)
	_ fs.NodeOpener     = (*fileNode)(nil)
	_ fs.NodeReadlinker = (*fileNode)(nil)
	_ fs.NodeFsyncer    = (*fileNode)(nil)
	_ fs.NodeGetxattrer = (*fileNode)(nil)
	_ fs.NodeSetxattrer = (*fileNode)(nil)
)

// setMeta notes the file's metadata as the store answered it, also in its
// folder's entries.
func (n *fileNode) setMeta(f *client.File) {
	n.mu.Lock()
	n.meta, n.mode, n.kind = f, int(f.Mode), f.Kind
	n.mu.Unlock()
	if name, d := parentDir(n); d != nil {
		d.update(name, f)
	}
}

// fill gives the file's attributes: those stored, or a staged write's.
func (n *fileNode) fill(a *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a.Mode = typeBits(n.kind) | uint32(n.mode)
	a.Nlink = 1
	a.Owner = fuse.Owner{Uid: n.fs.uid, Gid: n.fs.gid}
	a.Blksize = 4096
	if m := n.meta; m != nil {
		a.Size = uint64(m.SizeBytes)
		ctime := m.UpdatedAt
		if w := n.wrote; w != nil && w.version == m.Version {
			ctime = w.ctime
		}
		a.SetTimes(&m.MTime, &m.MTime, &ctime)
	}
	if s := n.shown; s != nil {
		a.Size = uint64(s.size)
		a.SetTimes(&s.mtime, &s.mtime, &s.ctime)
	}
	if n.mtime != nil {
		a.SetTimes(n.mtime, n.mtime, nil)
	}
	hs, mt := n.handles(), n.mtime
	n.mu.Unlock()
	for _, h := range hs {
		if st, ok := h.staging(); ok {
			a.Size = uint64(st.Size())
			if mt == nil {
				t := st.ModTime().Truncate(time.Microsecond) // as stageTime
				a.SetTimes(&t, &t, &t)
			}
		}
	}
	n.mu.Lock()
	a.Blocks = (a.Size + 511) / 512
}

// handles are the file's open handles; n.mu is held.
func (n *fileNode) handles() []*handle {
	hs := make([]*handle, 0, len(n.open))
	for h := range n.open {
		hs = append(hs, h)
	}
	return hs
}

// Getattr answers the file's attributes.
func (n *fileNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fill(&out.Attr)
	return 0
}

// Setattr is chmod and utimes (kept as the file's mode and mtime, no new
// version) and truncate (a new version, at once or at the open file's
// close).
func (n *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	if n.fs.readOnly {
		return syscall.EROFS
	}
	if e := n.fs.wb.wait(n); e != 0 {
		return e
	}
	if size, ok := in.GetSize(); ok {
		if e := n.truncate(ctx, fh, int64(size)); e != 0 {
			return e
		}
	}
	var opts client.MetaOptions
	if mode, ok := in.GetMode(); ok {
		m := int(mode & 0o7777)
		opts.Mode, opts.IdempotencyKey = &m, n.fs.key()
		n.mu.Lock()
		n.mode = m
		n.mu.Unlock()
	}
	if mt, ok := in.GetMTime(); ok {
		opts.MTime, opts.IdempotencyKey = &mt, n.fs.key()
		n.mu.Lock()
		n.mtime = &mt
		n.mu.Unlock()
	}
	n.mu.Lock()
	meta := n.meta
	n.mu.Unlock()
	if (opts.Mode != nil || opts.MTime != nil) && meta != nil {
		f, err := n.fs.c.SetMetadata(ctx, meta.ID, opts)
		if err != nil {
			return errno(err)
		}
		n.setMeta(f)
		n.mu.Lock()
		n.wrote = nil // a chmod or touch changes the ctime
		n.mu.Unlock()
	}
	n.fill(&out.Attr)
	return 0
}

// truncate sets the size through the open handle, or through one opened
// for it and stored at once.
func (n *fileNode) truncate(ctx context.Context, fh fs.FileHandle, size int64) syscall.Errno {
	h, _ := fh.(*handle)
	if h == nil {
		var e syscall.Errno
		if h, e = n.newHandle(n.current(), false); e != 0 {
			return e
		}
		defer h.Release(ctx)
		defer func() { _ = h.Flush(ctx) }()
	}
	return h.truncate(size)
}

func (n *fileNode) current() *client.File {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.meta
}

// Open opens the file; close-to-open: its metadata is read again, so a
// change made elsewhere is seen by the next open, unless its folder knows
// its entries (known.go), which the event feed keeps as fresh (the feed
// reports a change elsewhere before the next open sees it stale, within
// the feed's latency). A read-only open of the content the kernel already
// caches keeps the kernel's cache.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	writing := flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
	if writing && n.fs.readOnly {
		return nil, 0, syscall.EROFS
	}
	if e := n.fs.wb.wait(n); e != 0 {
		return nil, 0, e
	}
	if cur := n.current(); cur != nil && !n.hasDirty() && !n.fresh() {
		f, err := n.fs.c.File(ctx, cur.ID)
		if err != nil {
			return nil, 0, errno(err) // ENOENT only when the store says so: EIO for a store that could not answer
		}
		if f.DeletedAt != nil {
			return nil, 0, syscall.ENOENT
		}
		n.setMeta(f)
	}
	h, e := n.newHandle(n.current(), writing)
	if e != 0 {
		return nil, 0, e
	}
	if flags&syscall.O_TRUNC != 0 {
		if e := h.truncate(0); e != 0 {
			return nil, 0, e
		}
	}
	return h, n.keepCache(writing), 0
}

// fresh reports whether the file's metadata is as fresh as the event
// feed: its folder knows its entries, and its mode and mtime are recent
// (known.go).
func (n *fileNode) fresh() bool {
	name, d := parentDir(n)
	if d == nil {
		return false
	}
	e, ok, knows := d.entry(name)
	return knows && ok && !d.stale(e)
}

// kindOf is the file's kind.
func (n *fileNode) kindOf() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kind
}

// keepCache answers FOPEN_KEEP_CACHE when the kernel's page cache of the
// file holds the content being opened; an open for writing drops it.
func (n *fileNode) keepCache(writing bool) uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	etag := ""
	if n.meta != nil && !writing && len(n.open) == 1 {
		etag = n.meta.ETag
	}
	keep := etag != "" && etag == n.pageETag
	n.pageETag = etag
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

func (n *fileNode) hasDirty() bool {
	n.mu.Lock()
	hs := n.handles()
	n.mu.Unlock()
	for _, h := range hs {
		if _, ok := h.staging(); ok {
			return true
		}
	}
	return false
}

// flushOpen stores what the file's open handles staged (before a rename).
func (n *fileNode) flushOpen(ctx context.Context) syscall.Errno {
	n.mu.Lock()
	hs := n.handles()
	n.mu.Unlock()
	for _, h := range hs {
		if e := h.Flush(ctx); e != 0 {
			return e
		}
	}
	return 0
}

// Readlink answers a symlink's target, its content.
func (n *fileNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if e := n.fs.wb.wait(n); e != 0 {
		return nil, e
	}
	f := n.current()
	if f == nil || f.Kind != "symlink" {
		return nil, syscall.EINVAL
	}
	c, err := n.fs.c.FileContent(ctx, f.ID, client.ContentOptions{})
	if err != nil {
		return nil, errno(err)
	}
	defer c.Close()
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return nil, syscall.EIO
	}
	return b, 0
}

// Fsync stores what the open handle staged, as close does; in
// write-back it also waits for the file's pending stores: fsync means
// stored.
func (n *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, _ uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	if h, ok := fh.(*handle); ok {
		return h.Fsync(ctx, 0)
	}
	if e := n.flushOpen(ctx); e != 0 {
		return e
	}
	return n.fs.wb.wait(n)
}

// Getxattr: extended attributes are not supported.
func (n *fileNode) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// Setxattr: extended attributes are not supported.
func (n *fileNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ENOTSUP
}

// key names one write of the mount: the client sends it on every attempt,
// so a retried flush never makes two versions. Its prefix names the mount,
// so the event feed's echo of its own writes is told apart.
func (f *filesystem) key() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return f.keyPrefix + hex.EncodeToString(b)
}

// local reports whether the kernel's inode holds what the store does not
// have yet: a file created here and not stored, one open, or one with a
// store pending (write-back).
func (n *fileNode) local() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.meta == nil || len(n.open) > 0 || n.pendingN > 0
}

// stagePath is a new file in the cache directory's stage.
func (f *filesystem) stagePath() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return filepath.Join(f.cache, "stage", hex.EncodeToString(b))
}

// etagSHA is the SHA-256 hex an etag quotes.
func etagSHA(etag string) string { return strings.Trim(etag, `"`) }
