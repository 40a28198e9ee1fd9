package mount

import (
	"context"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/client"
)

// What a folder knows of its entries.
//
// A folder knows its entries when this mount made it (mkdir: it holds what
// the mount put in it and nothing else) or listed it in one page (GET
// /v1/files?delimiter=/), while the event feed is live. From then on the
// mount keeps the entries itself (its own creates, stores, renames and
// deletes change them), and the feed's report of any change under the
// folder made elsewhere, or the feed's restart (events may have been
// missed), makes it forget them. While it knows, a lookup, a stat and a
// readdir are answered without a request: an absent name is ENOENT, a
// present one has the metadata last stored or listed. That is the
// freshness of close-to-open across mounts: what another door stored is
// seen once its event arrived (DESIGN §14's feed, p50 a few ms here).

// dirEnt is one entry of a folder: its type bits and, for a file (or a
// folder's marker), its metadata when the mount has it, as of at.
type dirEnt struct {
	mode uint32
	file *client.File
	at   time.Time
}

// DefaultMetadataTTL bounds the age of a file's mode and mtime that a
// folder answers without asking (Options.MetadataTTL): a chmod or touch
// made elsewhere changes no version and makes no event, so only asking
// again shows it. Five minutes, as rclone mount's --dir-cache-time: a
// minute (NFS's attribute cache) made a git status in a clone that took
// longer than that to write list every folder again. A file's existence,
// content and size are the feed's to change, however old.
const DefaultMetadataTTL = 5 * time.Minute

// stale reports whether the entry's mode and mtime are too old to answer.
func (d *dirNode) stale(e dirEnt) bool {
	return e.mode != fuse.S_IFDIR && d.fs.now().Sub(e.at) > d.fs.metaTTL
}

// knowsLocked reports whether the folder's entries are known; d.mu is
// held.
func (d *dirNode) knowsLocked() bool {
	return d.ents != nil && d.epoch >= 0 && d.epoch == d.fs.live.Load()
}

// knows reports whether the folder's entries are known.
func (d *dirNode) knows() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.knowsLocked()
}

// entry answers name's entry, and whether the folder knows its entries
// (when it does, a missing entry is a missing name).
func (d *dirNode) entry(name string) (dirEnt, bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.knowsLocked() {
		return dirEnt{}, false, false
	}
	e, ok := d.ents[name]
	return e, ok, true
}

// put notes the entry name, which this mount made or changed. Like every
// change the mount makes in the folder, it also keeps a listing that was
// under way from being learned: it may predate the change.
func (d *dirNode) put(name string, mode uint32, f *client.File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changes++
	if d.knowsLocked() {
		d.ents[name] = dirEnt{mode: mode, file: f, at: d.fs.now()}
	}
}

// drop notes that this mount removed name.
func (d *dirNode) drop(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changes++
	if d.knowsLocked() {
		delete(d.ents, name)
	}
}

// forget drops what the folder knows: something under it changed
// elsewhere.
func (d *dirNode) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ents = nil
	d.changes++
}

// madeEmpty makes a new folder's knowledge: empty, when the feed is live.
func (f *filesystem) madeEmpty(d *dirNode) {
	if e := f.live.Load(); e >= 0 {
		d.epoch, d.ents = e, map[string]dirEnt{}
	}
}

// update notes a change of the file at name that this mount made, when
// the folder has the entry.
func (d *dirNode) update(name string, f *client.File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changes++
	if e, ok := d.ents[name]; ok && d.knowsLocked() {
		d.ents[name] = dirEnt{mode: e.mode, file: f, at: d.fs.now()}
	}
}

// isLarge reports whether the folder's listing is more than one page.
func (d *dirNode) isLarge() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.large
}

// list reads the folder's entries from the store (only the first page
// unless all; nil when there are more), and learns them when they came in
// one page while the feed was live and nothing under the folder changed
// meanwhile.
func (d *dirNode) list(ctx context.Context, all bool) ([]fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	epoch, changes := d.fs.live.Load(), d.changes
	d.mu.Unlock()
	at := d.fs.now()
	prefix := d.folderPrefix()
	ents := map[string]dirEnt{}
	var out []fuse.DirEntry
	add := func(name string, e dirEnt) {
		if name == "" {
			return
		}
		if old, ok := ents[name]; ok {
			if old.mode == fuse.S_IFDIR && e.file != nil && e.mode == fuse.S_IFDIR {
				ents[name] = e // the folder's marker, listed after its prefix
			}
			return
		}
		ents[name] = e
		out = append(out, fuse.DirEntry{Name: name, Mode: e.mode})
	}
	opts := client.FolderOptions{Limit: 1000}
	pages := 0
	for {
		page, err := d.fs.c.ListFolder(ctx, prefix, opts)
		if err != nil {
			return nil, errno(err)
		}
		pages++
		for i := range page.Data {
			f := &page.Data[i]
			add(strings.TrimPrefix(f.Path, prefix), dirEnt{mode: typeBits(f.Kind), file: f, at: at})
		}
		for _, p := range page.Prefixes {
			add(strings.TrimSuffix(strings.TrimPrefix(p, prefix), "/"), dirEnt{mode: fuse.S_IFDIR})
		}
		if !page.HasMore || page.NextCursor == nil {
			break
		}
		d.mu.Lock()
		d.large = true
		d.mu.Unlock()
		if !all {
			return nil, 0
		}
		opts.Cursor = *page.NextCursor
	}
	if pages == 1 && epoch >= 0 {
		d.learn(ents, epoch, changes)
	}
	return out, 0
}

// learn keeps a listing as the folder's entries, unless something under
// it changed (or the feed restarted) while it was read. A file of the
// folder that is not stored yet, or open, stays an entry; a stored one
// the kernel holds takes the listed metadata.
func (d *dirNode) learn(ents map[string]dirEnt, epoch, changes int64) {
	type listed struct {
		n *fileNode
		f *client.File
	}
	var nodes []listed
	for name, child := range d.Children() {
		n, ok := child.Operations().(*fileNode)
		switch {
		case !ok:
		case n.local():
			ents[name] = dirEnt{mode: typeBits(n.kindOf()), at: d.fs.now()}
		case ents[name].file != nil:
			nodes = append(nodes, listed{n, ents[name].file})
		}
	}
	d.mu.Lock()
	if d.changes != changes || d.fs.live.Load() != epoch {
		d.mu.Unlock()
		return
	}
	d.ents, d.epoch = ents, epoch
	d.mu.Unlock()
	for _, l := range nodes {
		if cur := l.n.current(); cur != nil && cur.ID == l.f.ID && cur.Version <= l.f.Version {
			l.n.setMeta(l.f)
		}
	}
}

// known answers the folder's entries without a request, when it knows
// them.
func (d *dirNode) known() ([]fuse.DirEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.knowsLocked() {
		return nil, false
	}
	out := make([]fuse.DirEntry, 0, len(d.ents))
	for name, e := range d.ents {
		out = append(out, fuse.DirEntry{Name: name, Mode: e.mode})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, true
}

// parentDir is the folder holding the node and the node's name in it.
func parentDir(n interface{ Parent() (string, *fs.Inode) }) (string, *dirNode) {
	name, p := n.Parent()
	if p == nil {
		return "", nil
	}
	d, _ := p.Operations().(*dirNode)
	return name, d
}
