package mount

import (
	"context"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/agentfs/agentfs/client"
)

// feedNow answers the feed's current end: the events after this cursor
// are exactly those that commit from now on.
func (f *filesystem) feedNow(ctx context.Context) (string, error) {
	page, err := f.c.Events(ctx, client.EventOptions{Prefix: f.prefix, After: client.EventsNow, Limit: 1})
	if err != nil {
		return "", err
	}
	return page.NextCursor, nil
}

// ownPause is how long the feed waits before asking again after a page
// of the mount's own writes only.
const ownPause = 50 * time.Millisecond

// goLive makes the feed live from cursor: what the mount learns from now
// on is kept until the feed reports a change (or stops).
func (f *filesystem) goLive() {
	f.gen++
	f.live.Store(f.gen)
}

// follow reads the event feed of the mount's prefix from cursor (the
// feed's end when the mount started, "" when it could not be read) and,
// for each change made elsewhere (another mount, REST, MCP, a run
// revert), invalidates the kernel's cache entries of exactly the paths it
// names: the entry in its folder, and the cached content and attributes of
// a file the kernel knows; the folders on the way forget their entries
// (known.go). It ends with ctx.
func (f *filesystem) follow(ctx context.Context, cursor string) {
	for ctx.Err() == nil {
		if cursor == "" {
			c, err := f.feedNow(ctx)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			cursor = c
			f.goLive()
			f.flushKernel() // what changed while the feed was cut was not reported
		}
		for ctx.Err() == nil {
			page, err := f.c.Events(ctx, client.EventOptions{Prefix: f.prefix, After: cursor, Limit: 1000, Wait: client.MaxEventWait})
			if err != nil {
				break
			}
			own := 0
			for i := range page.Data {
				e := &page.Data[i]
				if e.IdempotencyKey != nil && strings.HasPrefix(*e.IdempotencyKey, f.keyPrefix) {
					own++
					continue // this mount's own write: the kernel already saw it
				}
				f.invalidate(ctx, e.Path, e.FileID)
				if e.PreviousPath != nil {
					f.invalidate(ctx, *e.PreviousPath, e.FileID)
				}
			}
			cursor = page.NextCursor
			if own > 0 && own == len(page.Data) {
				// The mount's own writes only (tar -x, git clone): let
				// them gather rather than ask once per store; a change
				// elsewhere waits at most this long more.
				select {
				case <-ctx.Done():
				case <-time.After(ownPause):
				}
			}
		}
		f.live.Store(-1) // the events until the feed restarts are missed
		cursor = ""
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// flushKernel drops every entry, attribute and content the kernel caches
// of the mount: the kernel asks again, and the mount answers from the
// store (folders forgot their entries when the feed went live again).
func (f *filesystem) flushKernel() {
	if f.root == nil {
		return
	}
	var walk func(dir *fs.Inode)
	walk = func(dir *fs.Inode) {
		for name, child := range dir.Children() {
			dir.NotifyEntry(name)
			if _, ok := child.Operations().(*dirNode); ok {
				walk(child)
			} else {
				child.NotifyContent(0, 0)
			}
		}
	}
	walk(f.root)
}

// invalidate drops what the kernel caches of the subject's path p: its
// entry in its folder (each folder on the way, for a path that made a new
// folder) and, for a file it holds, its attributes and content, read again
// from the store.
func (f *filesystem) invalidate(ctx context.Context, p, fileID string) {
	local, ok := f.local(p)
	if !ok || f.root == nil {
		return
	}
	dir := f.root
	parts := strings.Split(local, "/")
	for i, name := range parts {
		if d, ok := dir.Operations().(*dirNode); ok {
			d.forget()
		}
		child := dir.GetChild(name)
		if child == nil {
			dir.NotifyEntry(name) // a negative entry, or a folder the kernel has not seen
			return
		}
		if i < len(parts)-1 {
			dir = child // a folder the kernel knows stays
			continue
		}
		if d, ok := child.Operations().(*dirNode); ok {
			d.forget() // a folder's own marker changed
		}
		n, ok := child.Operations().(*fileNode)
		if !ok || n.local() {
			return
		}
		dir.NotifyEntry(name)
		if ok {
			if file, err := f.c.File(ctx, fileID); err == nil && file.DeletedAt == nil && file.Path == p {
				n.setMeta(file)
			}
			child.NotifyContent(0, 0)
		}
	}
}
