package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentfs/agentfs"
)

// A program that takes "a file" from a person (the agentfs command line,
// say) takes a file id or a path alike: an argument spelled as a file id is
// one, anything else is a path, resolved through the listing by path.

// IsFileID reports whether s is spelled as a file id: "file_" and 26
// characters of the id alphabet. Anything else names a file by its path.
func IsFileID(s string) bool { return agentfs.WellFormedID("file", s) }

// ErrNoFile is what FileAt and DeletedFileAt return (wrapped in a
// *NoFileError) when no file of the kind asked for holds the path.
var ErrNoFile = errors.New("no such file")

// NoFileError says that no live file (or, for DeletedFileAt, no deleted
// one) holds Path. errors.Is(err, ErrNoFile) matches it.
type NoFileError struct {
	Path    string
	Deleted bool // a deleted file was looked for
}

func (e *NoFileError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("no deleted file held path %q (or it is purged)", e.Path)
	}
	return fmt.Sprintf("no live file holds path %q", e.Path)
}

// Is makes errors.Is(err, ErrNoFile) true.
func (e *NoFileError) Is(target error) bool { return target == ErrNoFile }

// FileAt returns the live file at path (GET /v1/files?path=), or a
// *NoFileError when none holds it.
func (c *Client) FileAt(ctx context.Context, path string) (*File, error) {
	l, err := c.ListFiles(ctx, ListOptions{Path: path, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(l.Data) == 0 {
		return nil, &NoFileError{Path: path}
	}
	return &l.Data[0], nil
}

// DeletedFileAt returns the file that was deleted (or expired) last among
// those that held path and are not purged yet, or a *NoFileError when
// there is none: what "restore PATH" brings back.
func (c *Client) DeletedFileAt(ctx context.Context, path string) (*File, error) {
	var (
		newest *File
		at     time.Time
	)
	for f, err := range c.AllFiles(ctx, ListOptions{Path: path, IncludeDeleted: true, Limit: 1000}) {
		if err != nil {
			return nil, err
		}
		if gone, ok := goneAt(f); ok && (newest == nil || gone.After(at)) {
			newest, at = f, gone
		}
	}
	if newest == nil {
		return nil, &NoFileError{Path: path, Deleted: true}
	}
	return newest, nil
}

// goneAt is when a file stopped being live: deleted, or expired (an
// expired file counts as deleted before the sweeper marks it).
func goneAt(f *File) (time.Time, bool) {
	switch {
	case f.DeletedAt != nil:
		return *f.DeletedAt, true
	case f.ExpiresAt != nil && !f.ExpiresAt.After(time.Now()):
		return *f.ExpiresAt, true
	}
	return time.Time{}, false
}

// ResolveFile returns the file that idOrPath names: the file with that id
// (also a deleted one), or the live file at that path.
func (c *Client) ResolveFile(ctx context.Context, idOrPath string) (*File, error) {
	if IsFileID(idOrPath) {
		return c.File(ctx, idOrPath)
	}
	return c.FileAt(ctx, idOrPath)
}

// FileID returns the id that idOrPath names: itself when it is spelled as
// a file id (no request is sent), else the id of the live file at that
// path.
func (c *Client) FileID(ctx context.Context, idOrPath string) (string, error) {
	if IsFileID(idOrPath) {
		return idOrPath, nil
	}
	f, err := c.FileAt(ctx, idOrPath)
	if err != nil {
		return "", err
	}
	return f.ID, nil
}
