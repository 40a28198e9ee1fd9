// Package mount serves an AgentFS subject (or one prefix of it) as a FUSE
// filesystem (DESIGN §21). It is a client of the API: every call goes
// through the Go client, its retry policy and its idempotency keys, so the
// rules of every other door hold. Directories are prefixes (an empty one
// is kept by a directory marker), every close or fsync of a written file
// is one keyed, conditional replace, and changes made elsewhere reach the
// kernel's caches through the event feed.
package mount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/client"
)

// Options configure a mount.
type Options struct {
	// Prefix is the folder of the subject the mount shows ("" for all).
	Prefix string
	// ReadOnly refuses every write with EROFS.
	ReadOnly bool
	// CacheDir holds the staged writes and the cached ranges (a temporary
	// directory when empty, removed at unmount).
	CacheDir string
	// Debug logs every FUSE call.
	Debug bool
	// MetadataTTL is how long a folder that knows its entries answers a
	// file's mode and mtime without asking again, the bound on how stale
	// a chmod or touch made elsewhere (which makes no event) is seen;
	// zero means DefaultMetadataTTL.
	MetadataTTL time.Duration
	// Now is the clock that ages what a folder knows of its files'
	// metadata (MetadataTTL); nil means time.Now. Tests set it to age
	// the metadata without waiting.
	Now func() time.Time
	// KernelCacheTimeout is how long the kernel keeps entries and
	// attributes before it asks the mount again; zero means
	// DefaultKernelCacheTimeout, a negative one that the kernel keeps
	// nothing and asks the mount at every call (tests).
	KernelCacheTimeout time.Duration
	// WriteBack makes a close return once the file's content and its
	// store's record are on local disk in CacheDir (which it requires),
	// and sends the stores in the background (writeback.go).
	WriteBack bool
	// WriteBackWorkers is how many stores write-back sends at once; zero
	// means DefaultWriteBackWorkers.
	WriteBackWorkers int
}

// Mount is a mounted filesystem: Wait for it to be unmounted, or Unmount
// it.
type Mount struct {
	server *fuse.Server
	fs     *filesystem
	stop   context.CancelFunc
	tmpDir string
}

// DefaultKernelCacheTimeout is the kernel's cache lifetime of entries
// (also of missing names) and attributes (Options.KernelCacheTimeout). The
// event feed invalidates exactly those changed elsewhere
// as it reports them, and all of them when it restarts (events may have
// been missed), so the lifetime bounds only what no event reports: a
// chmod or touch made elsewhere, seen within MetadataTTL and this.
const DefaultKernelCacheTimeout = 10 * time.Second

// New mounts c's files (under opts.Prefix) at dir and serves them until
// Unmount or an unmount from outside (fusermount3 -u).
func New(c *client.Client, dir string, opts Options) (*Mount, error) {
	prefix := strings.Trim(opts.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	cache, tmp, err := cacheDir(opts)
	if err != nil {
		return nil, err
	}
	m := &Mount{tmpDir: tmp}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	m.fs = &filesystem{c: c, prefix: prefix, keyPrefix: "mount-" + randomHex(6) + "-", readOnly: opts.ReadOnly, cache: cache, uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	m.fs.live.Store(-1)
	if m.fs.metaTTL = opts.MetadataTTL; m.fs.metaTTL <= 0 {
		m.fs.metaTTL = DefaultMetadataTTL
	}
	if m.fs.now = opts.Now; m.fs.now == nil {
		m.fs.now = time.Now
	}
	if err := m.fs.startWriteBack(opts, cache); err != nil {
		stop()
		return nil, err
	}
	// The feed's end before the first call: from here on the feed reports
	// every change made elsewhere, so what the mount learns is kept. A
	// store that cannot answer now leaves the feed to start later.
	probe, cancel := context.WithTimeout(ctx, 10*time.Second)
	cursor, ferr := m.fs.feedNow(probe)
	cancel()
	if ferr == nil {
		m.fs.goLive()
	}
	root := &dirNode{fs: m.fs}
	m.fs.root = root.EmbeddedInode() // before the first call can come
	timeout := opts.KernelCacheTimeout
	switch {
	case timeout == 0:
		timeout = DefaultKernelCacheTimeout
	case timeout < 0:
		timeout = 0
	}
	server, err := fs.Mount(dir, root, &fs.Options{
		MountOptions: fuse.MountOptions{FsName: "agentfs", Name: "agentfs", Debug: opts.Debug,
			MaxWrite: 1 << 20},
		EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &timeout,
		UID: m.fs.uid, GID: m.fs.gid,
	})
	if err != nil {
		stop()
		if m.fs.wb != nil {
			m.fs.wb.drain()
		}
		m.cleanup()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	m.server = server
	go m.fs.follow(ctx, cursor)
	return m, nil
}

// cacheDir is the mount's cache directory, with its stage and chunks
// folders: opts.CacheDir, or a new temporary one (tmp, removed at
// unmount).
func cacheDir(opts Options) (cache, tmp string, err error) {
	cache = opts.CacheDir
	if opts.WriteBack && cache == "" {
		return "", "", errors.New("mount: write-back needs a cache dir (--cache-dir D) that outlives the mount: it holds the closed files not stored yet")
	}
	if opts.WriteBack && opts.ReadOnly {
		return "", "", errors.New("mount: write-back and read-only exclude each other")
	}
	if cache == "" {
		d, err := os.MkdirTemp("", "agentfs-mount-")
		if err != nil {
			return "", "", fmt.Errorf("mount: cache dir: %w", err)
		}
		cache, tmp = d, d
	}
	for _, sub := range []string{"stage", "chunks"} {
		if err := os.MkdirAll(filepath.Join(cache, sub), 0o700); err != nil {
			return "", "", fmt.Errorf("mount: cache dir: %w", err)
		}
	}
	return cache, tmp, nil
}

// startWriteBack starts write-back on cache when opts ask for it, after
// sending what an earlier mount of it closed and did not store; without
// it, it only says when such stores wait there.
func (f *filesystem) startWriteBack(opts Options, cache string) error {
	if !opts.WriteBack {
		if n := CountPending(cache); n > 0 {
			fmt.Fprintf(os.Stderr, "agentfs mount: %s holds %d stores an earlier write-back mount did not send; mount with --write-back on it to send them\n", filepath.Join(cache, "pending"), n)
		}
		return nil
	}
	wb, err := openWriteBack(f, cache, opts.WriteBackWorkers)
	if err != nil {
		return err
	}
	// What an earlier mount of the cache dir closed and did not store goes
	// first, before the feed's cursor: its events are not news.
	if err := wb.replay(); err != nil {
		wb.drain()
		return err
	}
	f.wb = wb
	return nil
}

// Wait blocks until the filesystem is unmounted and, in write-back, its
// pending stores are stored.
func (m *Mount) Wait() {
	m.server.Wait()
	if m.fs.wb != nil {
		m.fs.wb.drain()
	}
	m.stop()
	m.cleanup()
}

// Settle waits until no store is pending (write-back; at once otherwise),
// or ctx ends.
func (m *Mount) Settle(ctx context.Context) error {
	if m.fs.wb == nil {
		return nil
	}
	return m.fs.wb.settle(ctx)
}

// Pending is how many stores are pending (write-back; 0 otherwise).
func (m *Mount) Pending() int {
	if m.fs.wb == nil {
		return 0
	}
	return m.fs.wb.count()
}

// Refused is how many stores were refused for good since the mount
// started (write-back; they are in the cache dir's failed/).
func (m *Mount) Refused() int {
	if m.fs.wb == nil {
		return 0
	}
	m.fs.wb.mu.Lock()
	defer m.fs.wb.mu.Unlock()
	return m.fs.wb.refused
}

// Unmount unmounts; it flushes nothing itself, since every close already
// stored its file (in write-back, Wait stores what is pending before it
// returns). Files still open keep the mount busy (an error): try again
// once they are closed.
func (m *Mount) Unmount() error {
	if err := m.server.Unmount(); err != nil {
		return fmt.Errorf("unmount: %w", err)
	}
	return nil
}

func (m *Mount) cleanup() {
	if m.tmpDir != "" {
		os.RemoveAll(m.tmpDir)
	}
}

// filesystem is what every node shares.
type filesystem struct {
	c        *client.Client
	prefix   string
	readOnly bool
	cache    string
	// keyPrefix starts every idempotency key of this mount's writes.
	keyPrefix string
	uid, gid  uint32
	root      *fs.Inode
	// live is the event feed's generation while it is live, -1 while it
	// is not: what a folder learned in an earlier generation may have
	// missed an event (known.go). gen is the last generation, counted by
	// the feed's goroutine.
	live atomic.Int64
	gen  int64
	// metaTTL: Options.MetadataTTL, aged by now (Options.Now).
	metaTTL time.Duration
	now     func() time.Time
	// wb is the write-back queue, nil in the default mode.
	wb *writeBack
}

// remote is the subject's path of the node at local path p ("" the root).
func (f *filesystem) remote(p string) string { return f.prefix + p }

// local is the mount's path of a subject's path, and whether it lies
// under the mount.
func (f *filesystem) local(p string) (string, bool) {
	if !strings.HasPrefix(p, f.prefix) {
		return "", false
	}
	return strings.TrimPrefix(p, f.prefix), true
}

// errno turns an API error into the errno a program understands.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	switch client.ErrorCode(err) {
	case "NOT_FOUND":
		return syscall.ENOENT
	case "PATH_EXISTS":
		return syscall.EEXIST
	case "FORBIDDEN":
		return syscall.EACCES
	case "INVALID_PATH":
		return syscall.EINVAL
	case "PAYLOAD_TOO_LARGE", "QUOTA_EXCEEDED":
		return syscall.EFBIG
	case "CONTENT_BLOCKED":
		return syscall.EACCES
	case "PRECONDITION_FAILED":
		return syscall.EAGAIN
	}
	return syscall.EIO
}

// uninterrupted is the context of the store calls one FUSE request makes:
// the request's, without its cancellation. The kernel interrupts a request
// whenever the calling thread receives a signal, any signal (a Go
// program's preemption signal, SIGCHLD from a child), and still waits for
// the answer unless the signal kills the caller; cutting the store call
// then would fail a write, a read or a close with EIO for nothing, and a
// close is the file's one store. So every call, once started, completes
// (the client's retry policy bounds it).
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
