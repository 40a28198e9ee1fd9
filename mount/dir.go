package mount

import (
	"context"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/client"
)

// dirNode is a folder: a prefix of the subject's paths, kept while empty
// by a directory marker (a file of kind directory at its path).
type dirNode struct {
	fs.Inode
	fs *filesystem

	// A folder this mount made (mkdir) holds what this mount put in it
	// and nothing else until the event feed reports a change under it
	// from elsewhere (or the feed was cut: epoch). While so, names are
	// its only entries, and the lookup of any other name (tar, git clone
	// and cp look up every name before creating it) answers ENOENT
	// without asking the store.
	mu    sync.Mutex
	made  bool
	epoch int64
	names map[string]bool
}

// mine notes a name this mount put in the folder.
func (d *dirNode) mine(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made {
		d.names[name] = true
	}
}

// absent reports whether name is known not to be in the folder.
func (d *dirNode) absent(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.made && d.epoch == d.fs.feedEpoch.Load() && !d.names[name]
}

// opsOf is the node of inode n, nil for no inode.
func opsOf(n *fs.Inode) fs.InodeEmbedder {
	if n == nil {
		return nil
	}
	return n.Operations()
}

// unchanged reports whether this mount made the folder and nothing in it
// changed elsewhere since: it is there without asking.
func (d *dirNode) unchanged() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.made && d.epoch == d.fs.feedEpoch.Load()
}

// changedElsewhere forgets that the folder holds only this mount's
// names: something under it changed elsewhere.
func (d *dirNode) changedElsewhere() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.made, d.names = false, nil
}

// The calls a folder answers.
var (
	_ fs.NodeLookuper   = (*dirNode)(nil)
	_ fs.NodeReaddirer  = (*dirNode)(nil)
	_ fs.NodeGetattrer  = (*dirNode)(nil)
	_ fs.NodeSetattrer  = (*dirNode)(nil)
	_ fs.NodeCreater    = (*dirNode)(nil)
	_ fs.NodeMkdirer    = (*dirNode)(nil)
	_ fs.NodeUnlinker   = (*dirNode)(nil)
	_ fs.NodeRmdirer    = (*dirNode)(nil)
	_ fs.NodeRenamer    = (*dirNode)(nil)
	_ fs.NodeSymlinker  = (*dirNode)(nil)
	_ fs.NodeStatfser   = (*dirNode)(nil)
	_ fs.NodeLinker     = (*dirNode)(nil)
	_ fs.NodeGetxattrer = (*dirNode)(nil)
	_ fs.NodeSetxattrer = (*dirNode)(nil)
)

// path is the folder's local path ("" for the root).
func (d *dirNode) path() string { return d.Path(d.fs.root) }

// child is the local path of name in the folder.
func (d *dirNode) child(name string) string { return path.Join(d.path(), name) }

// folderPrefix is the subject's prefix of the folder's entries.
func (d *dirNode) folderPrefix() string {
	if p := d.path(); p != "" {
		return d.fs.remote(p) + "/"
	}
	return d.fs.prefix
}

// entries lists the folder: its files and the folders under it (a folder
// kept by a marker and holding files is one entry).
func (d *dirNode) entries(ctx context.Context) ([]fuse.DirEntry, syscall.Errno) {
	prefix := d.folderPrefix()
	seen := map[string]bool{}
	var out []fuse.DirEntry
	add := func(name string, mode uint32) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, fuse.DirEntry{Name: name, Mode: mode})
		}
	}
	opts := client.FolderOptions{Limit: 1000}
	for {
		page, err := d.fs.c.ListFolder(ctx, prefix, opts)
		if err != nil {
			return nil, errno(err)
		}
		for _, f := range page.Data {
			add(strings.TrimPrefix(f.Path, prefix), typeBits(f.Kind))
		}
		for _, p := range page.Prefixes {
			add(strings.TrimSuffix(strings.TrimPrefix(p, prefix), "/"), fuse.S_IFDIR)
		}
		if !page.HasMore || page.NextCursor == nil {
			return out, 0
		}
		opts.Cursor = *page.NextCursor
	}
}

func typeBits(kind string) uint32 {
	switch kind {
	case "directory":
		return fuse.S_IFDIR
	case "symlink":
		return fuse.S_IFLNK
	}
	return fuse.S_IFREG
}

// Readdir lists the folder.
func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = uninterrupted(ctx)
	list, e := d.entries(ctx)
	if e != 0 {
		return nil, e
	}
	return fs.NewListDirStream(list), 0
}

// Lookup finds name in the folder: the live file at its path (a marker is
// a folder), or else a folder when a file lies under it. An inode the
// kernel already has for the name is kept (the folder's children, a file
// being written), so a lookup after the entry's timeout changes nothing.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if d.absent(name) {
		return nil, syscall.ENOENT
	}
	known := d.GetChild(name)
	if dn, ok := opsOf(known).(*dirNode); ok && dn.unchanged() {
		dn.fill(&out.Attr) // made here, and nothing in it changed elsewhere since
		return known, 0
	}
	if c := d.childFile(name); c != nil && c.local() {
		c.fill(&out.Attr) // created here and not stored yet, or open
		return known, 0
	}
	p := d.child(name)
	f, e := d.fs.fileAt(ctx, p)
	switch {
	case e != 0:
		return nil, e
	case f != nil && f.Kind != "directory":
		if c := d.childFile(name); c != nil && typeBits(c.current().Kind) == typeBits(f.Kind) {
			c.setMeta(f)
			c.fill(&out.Attr)
			return known, 0
		}
		return d.fileInode(ctx, f, out), 0
	case f == nil:
		page, err := d.fs.c.ListFolder(ctx, d.fs.remote(p)+"/", client.FolderOptions{Limit: 1})
		if err != nil {
			return nil, errno(err)
		}
		if len(page.Data) == 0 && len(page.Prefixes) == 0 {
			return nil, syscall.ENOENT
		}
	}
	if known != nil {
		if dn, ok := known.Operations().(*dirNode); ok {
			dn.fill(&out.Attr)
			return known, 0
		}
	}
	return d.dirInode(ctx, out), 0
}

// fileAt is the live file at local path p, nil when there is none.
func (f *filesystem) fileAt(ctx context.Context, p string) (*client.File, syscall.Errno) {
	page, err := f.c.ListFiles(ctx, client.ListOptions{Path: f.remote(p), Limit: 1})
	if err != nil {
		return nil, errno(err)
	}
	if len(page.Data) == 0 {
		return nil, 0
	}
	return &page.Data[0], 0
}

func (d *dirNode) dirInode(ctx context.Context, out *fuse.EntryOut) *fs.Inode {
	n := &dirNode{fs: d.fs}
	n.fill(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: fuse.S_IFDIR})
}

func (d *dirNode) fileInode(ctx context.Context, f *client.File, out *fuse.EntryOut) *fs.Inode {
	n := &fileNode{fs: d.fs}
	n.setMeta(f)
	n.fill(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: typeBits(f.Kind)})
}

// fill gives a folder's attributes.
func (d *dirNode) fill(a *fuse.Attr) {
	a.Mode = fuse.S_IFDIR | 0o755
	a.Nlink = 2
	a.Owner = fuse.Owner{Uid: d.fs.uid, Gid: d.fs.gid}
	a.Blksize = 4096
}

// Getattr answers the folder's attributes.
func (d *dirNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fill(&out.Attr)
	return 0
}

// Setattr accepts chmod and utimes of a folder (a folder is a prefix; its
// mode is not kept).
func (d *dirNode) Setattr(ctx context.Context, _ fs.FileHandle, _ *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if d.fs.readOnly {
		return syscall.EROFS
	}
	d.fill(&out.Attr)
	return 0
}

// Mkdir stores a directory marker, which keeps the folder while empty.
func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return nil, syscall.EROFS
	}
	if d.GetChild(name) != nil {
		return nil, syscall.EEXIST
	}
	if _, e := d.putNew(ctx, name, "", "directory", int(mode&0o7777)); e != 0 {
		return nil, e
	}
	n := &dirNode{fs: d.fs, made: true, epoch: d.fs.feedEpoch.Load(), names: map[string]bool{}}
	n.fill(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: fuse.S_IFDIR}), 0
}

// Rmdir removes an empty folder: its marker, if it has one.
func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return syscall.EROFS
	}
	p := d.child(name)
	page, err := d.fs.c.ListFolder(ctx, d.fs.remote(p)+"/", client.FolderOptions{Limit: 1})
	if err != nil {
		return errno(err)
	}
	if len(page.Data) > 0 || len(page.Prefixes) > 0 {
		return syscall.ENOTEMPTY
	}
	f, e := d.fs.fileAt(ctx, p)
	if e != 0 || f == nil {
		return e
	}
	if f.Kind != "directory" {
		return syscall.ENOTDIR
	}
	_, err = d.fs.c.DeleteFile(ctx, f.ID, client.DeleteOptions{IdempotencyKey: d.fs.key()})
	return errno(err)
}

// Unlink deletes the file (restorably: it stays in history).
func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return syscall.EROFS
	}
	f, e := d.fs.fileAt(ctx, d.child(name))
	switch {
	case e != 0:
		return e
	case f == nil:
		return syscall.ENOENT
	case f.Kind == "directory":
		return syscall.EISDIR
	}
	_, err := d.fs.c.DeleteFile(ctx, f.ID, client.DeleteOptions{IdempotencyKey: d.fs.key()})
	return errno(err)
}

// Symlink stores a symlink: a file of kind symlink whose content is the
// target.
func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return nil, syscall.EROFS
	}
	f, e := d.putNew(ctx, name, target, "symlink", 0o777)
	if e != 0 {
		return nil, e
	}
	return d.fileInode(ctx, f, out), 0
}

// putNew stores a new file of kind (a folder's marker, a symlink) holding
// content at name, which must be free (EEXIST), and counts it as this
// mount's.
func (d *dirNode) putNew(ctx context.Context, name, content, kind string, mode int) (*client.File, syscall.Errno) {
	f, err := d.fs.c.PutFile(ctx, d.fs.remote(d.child(name)), strings.NewReader(content),
		client.PutOptions{Kind: kind, Mode: &mode, IfNoneMatchAny: true, IdempotencyKey: d.fs.key()})
	if err != nil {
		if client.ErrorCode(err) == "PRECONDITION_FAILED" {
			return nil, syscall.EEXIST
		}
		return nil, errno(err)
	}
	d.mine(name)
	return f, 0
}

// Create makes a new file, stored at its first close; until then it lives
// in the cache directory.
func (d *dirNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.fs.readOnly {
		return nil, nil, 0, syscall.EROFS
	}
	n := &fileNode{fs: d.fs, mode: int(mode & 0o7777), kind: "file"}
	h, e := n.newHandle(nil, true)
	if e != 0 {
		return nil, nil, 0, e
	}
	d.mine(name)
	n.fill(&out.Attr) // stored at its first close
	return d.NewInode(ctx, n, fs.StableAttr{Mode: fuse.S_IFREG}), h, 0, 0
}

// Rename is a move: a file keeps its id and history; over an existing
// file it becomes that file's next version (if_exists=overwrite), so an
// editor's atomic save keeps one history. A folder moves file by file.
func (d *dirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return syscall.EROFS
	}
	if flags&^uint32(1) != 0 { // RENAME_EXCHANGE, RENAME_WHITEOUT
		return syscall.ENOTSUP
	}
	dest := newParent.EmbeddedInode().Operations().(*dirNode)
	dest.mine(newName)
	to := dest.child(newName)
	from := d.child(name)
	f, e := d.fs.fileAt(ctx, from)
	if e != 0 {
		return e
	}
	if f == nil || f.Kind == "directory" {
		return d.fs.moveFolder(ctx, from, to)
	}
	if n := d.childFile(name); n != nil {
		if e := n.flushOpen(ctx); e != 0 {
			return e
		}
	}
	moved, err := d.fs.c.Move(ctx, f.ID, d.fs.remote(to), client.MoveOptions{Overwrite: flags&1 == 0, IdempotencyKey: d.fs.key()})
	if err != nil {
		return errno(err)
	}
	if n := d.childFile(name); n != nil {
		n.setMeta(moved)
	}
	return 0
}

// moveFolder moves every file under the folder at from (and its marker)
// to the folder at to.
func (f *filesystem) moveFolder(ctx context.Context, from, to string) syscall.Errno {
	src, dst := f.remote(from), f.remote(to)
	var files []client.File
	for file, err := range f.c.AllFiles(ctx, client.ListOptions{Prefix: src + "/", Limit: 1000}) {
		if err != nil {
			return errno(err)
		}
		files = append(files, *file)
	}
	if marker, e := f.fileAt(ctx, from); e != 0 {
		return e
	} else if marker != nil {
		files = append(files, *marker)
	}
	if len(files) == 0 {
		return syscall.ENOENT
	}
	for _, file := range files {
		if _, err := f.c.Move(ctx, file.ID, dst+strings.TrimPrefix(file.Path, src), client.MoveOptions{Overwrite: true, IdempotencyKey: f.key()}); err != nil {
			return errno(err)
		}
	}
	return 0
}

// Statfs answers a large, mostly free filesystem: the store's capacity is
// the S3 server's.
func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	const blocks = 1 << 32
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks, blocks
	out.Files, out.Ffree = 1<<32, 1<<32
	out.Bsize, out.Frsize, out.NameLen = 4096, 4096, 255
	return 0
}

// Link: hard links are not supported.
func (d *dirNode) Link(context.Context, fs.InodeEmbedder, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

// Getxattr: extended attributes are not supported.
func (d *dirNode) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// Setxattr: extended attributes are not supported.
func (d *dirNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ENOTSUP
}

// childFile is the known file node of name in the folder, nil if none.
func (d *dirNode) childFile(name string) *fileNode {
	c := d.GetChild(name)
	if c == nil {
		return nil
	}
	n, _ := c.Operations().(*fileNode)
	return n
}
