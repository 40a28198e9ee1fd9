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

	// What the folder knows of its entries (known.go): ents while epoch
	// is the feed's live generation; changes counts the changes made in
	// it (here or, by forget, elsewhere), so a listing that crossed one
	// is not learned.
	mu      sync.Mutex
	ents    map[string]dirEnt
	epoch   int64
	changes int64
	// large: the folder's listing is more than one page, which a lookup
	// does not read (it asks for its name alone).
	large bool
}

// opsOf is the node of inode n, nil for no inode.
func opsOf(n *fs.Inode) fs.InodeEmbedder {
	if n == nil {
		return nil
	}
	return n.Operations()
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
	if list, ok := d.known(); ok {
		return fs.NewListDirStream(list), 0
	}
	list, e := d.list(ctx, true)
	if e != 0 {
		return nil, e
	}
	if d.fs.wb != nil {
		list = d.withLocal(list)
	}
	return fs.NewListDirStream(list), 0
}

// Lookup finds name in the folder: from what the folder knows of its
// entries, without a request (known.go); else the live file at its path (a
// marker is a folder), or a folder when a file lies under it. A folder
// that does not know its entries learns them from one listing first, so
// a walk of it (grep -r, git status, find) asks once per folder, not once
// per name. An inode the kernel already has for the name is kept (the
// folder's children, a file being written), so a lookup after the entry's
// timeout changes nothing.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	ent, ok, knows := d.entry(name)
	if (!knows || ok && d.stale(ent)) && d.fs.live.Load() >= 0 && !d.isLarge() {
		if _, e := d.list(ctx, false); e != 0 {
			return nil, e
		}
		ent, ok, knows = d.entry(name)
	}
	known := d.GetChild(name)
	if c := d.childFile(name); c != nil && c.local() {
		c.fill(&out.Attr) // created here and not stored yet, or open
		return known, 0
	}
	if knows && !ok {
		return nil, syscall.ENOENT
	}
	if knows && !d.stale(ent) {
		switch n := opsOf(known).(type) {
		case *dirNode:
			n.fill(&out.Attr)
			return known, 0
		case *fileNode:
			if n.current() != nil {
				n.fill(&out.Attr)
				return known, 0
			}
		}
		switch {
		case ent.mode == fuse.S_IFDIR:
			return d.dirInode(ctx, out), 0
		case ent.file != nil:
			return d.fileInode(ctx, ent.file, out), 0
		}
	}
	if dn, ok := opsOf(known).(*dirNode); ok && dn.knows() {
		dn.fill(&out.Attr) // nothing in it changed elsewhere since it was known
		return known, 0
	}
	return d.lookupStored(ctx, name, known, out)
}

// lookupStored answers name from the store: a file, or a folder (one
// that holds anything; known is the kernel's inode of it, if any).
func (d *dirNode) lookupStored(ctx context.Context, name string, known *fs.Inode, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
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
			d.drop(name)
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

// storedFile is the stored file at name in the folder, from what the mount
// knows (the node's metadata, or the folder's entry) when the folder knows
// its entries, else from the store; nil when there is none.
func (d *dirNode) storedFile(ctx context.Context, name string) (*client.File, syscall.Errno) {
	ent, ok, knows := d.entry(name)
	if knows {
		if !ok {
			return nil, 0
		}
		if n := d.childFile(name); n != nil {
			if f := n.current(); f != nil {
				return f, 0
			}
		} else if ent.file != nil {
			return ent.file, 0
		}
	}
	return d.fs.fileAt(ctx, d.child(name))
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
	if d.fs.wb != nil {
		// Write-back: the marker is sent as a closed file is.
		if e := d.fs.wb.recordFolder(d.fs.remote(d.child(name)), int(mode&0o7777)); e != 0 {
			return nil, e
		}
		d.put(name, fuse.S_IFDIR, nil)
	} else if _, e := d.putNew(ctx, name, "", "directory", int(mode&0o7777)); e != 0 {
		return nil, e
	}
	n := &dirNode{fs: d.fs}
	d.fs.madeEmpty(n)
	n.fill(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: fuse.S_IFDIR}), 0
}

// Rmdir removes an empty folder: its marker, if it has one.
func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return syscall.EROFS
	}
	d.fs.wb.waitAll()
	p := d.child(name)
	page, err := d.fs.c.ListFolder(ctx, d.fs.remote(p)+"/", client.FolderOptions{Limit: 1})
	if err != nil {
		return errno(err)
	}
	if len(page.Data) > 0 || len(page.Prefixes) > 0 {
		return syscall.ENOTEMPTY
	}
	f, e := d.fs.fileAt(ctx, p)
	if e != 0 {
		return e
	}
	if f == nil { // a folder without a marker: empty now, it is gone
		d.drop(name)
		return 0
	}
	if f.Kind != "directory" {
		return syscall.ENOTDIR
	}
	if _, err = d.fs.c.DeleteFile(ctx, f.ID, client.DeleteOptions{IdempotencyKey: d.fs.key()}); err != nil {
		return errno(err)
	}
	d.drop(name)
	return 0
}

// Unlink deletes the file (restorably: it stays in history).
func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	if d.fs.readOnly {
		return syscall.EROFS
	}
	if n := d.childFile(name); n != nil && d.fs.wb.wait(n) != 0 {
		d.drop(name) // its store was refused: the name goes, its content stays in failed/
		return 0
	}
	f, e := d.storedFile(ctx, name)
	switch {
	case e != 0:
		return e
	case f == nil:
		return syscall.ENOENT
	case f.Kind == "directory":
		return syscall.EISDIR
	}
	if _, err := d.fs.c.DeleteFile(ctx, f.ID, client.DeleteOptions{IdempotencyKey: d.fs.key()}); err != nil {
		return errno(err)
	}
	d.drop(name)
	return 0
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
	d.put(name, typeBits(kind), f)
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
	d.put(name, fuse.S_IFREG, nil)
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
	to := dest.child(newName)
	from := d.child(name)
	if d.fs.wb != nil {
		if e := d.settleBoth(ctx, name, dest, newName); e != 0 {
			return e
		}
	}
	f, e := d.storedFile(ctx, name)
	if e != 0 {
		return e
	}
	if f == nil || f.Kind == "directory" {
		if e := d.fs.moveFolder(ctx, from, to); e != 0 {
			return e
		}
		d.drop(name)
		dest.put(newName, fuse.S_IFDIR, nil)
		return 0
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
	d.drop(name)
	dest.put(newName, typeBits(moved.Kind), moved)
	return 0
}

// settleBoth waits, in write-back, for the pending stores of a rename's
// source (its open changes recorded first) and destination; a folder
// waits for every pending store.
func (d *dirNode) settleBoth(ctx context.Context, name string, dest *dirNode, newName string) syscall.Errno {
	src := d.GetChild(name)
	if src == nil {
		return 0
	}
	n, ok := src.Operations().(*fileNode)
	if !ok {
		d.fs.wb.waitAll()
		return 0
	}
	if e := n.flushOpen(ctx); e != 0 {
		return e
	}
	if e := d.fs.wb.wait(n); e != 0 {
		return e
	}
	if to := dest.childFile(newName); to != nil {
		if e := d.fs.wb.wait(to); e != 0 {
			return e
		}
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

// withLocal adds to a listing the folder's files the store does not have
// yet (a store pending in write-back).
func (d *dirNode) withLocal(list []fuse.DirEntry) []fuse.DirEntry {
	listed := make(map[string]bool, len(list))
	for _, e := range list {
		listed[e.Name] = true
	}
	for name, child := range d.Children() {
		if n, ok := child.Operations().(*fileNode); ok && !listed[name] && n.local() {
			list = append(list, fuse.DirEntry{Name: name, Mode: typeBits(n.kindOf())})
		}
	}
	return list
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
