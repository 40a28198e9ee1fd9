package agentfs

import (
	"fmt"
	"strings"
	"time"
)

// Fork is a copy-on-write copy of the files under one prefix (DESIGN §19):
// every file live under From at the point forked appears at the same
// relative path under To as a new file sharing its blob, and a merge
// brings what changed under To back into From.
type Fork struct {
	ID        string
	Subject   string
	From, To  string
	Base      int64 // the position forked, then that of the last merge
	BaseAt    time.Time
	Files     int
	By        Attribution
	CreatedAt time.Time
	MergedAt  *time.Time
}

// NewFork is a request to fork (POST /v1/forks).
type NewFork struct {
	Subject  string
	From, To string
	AsOf     PointSpec // Kind PointNow when absent
	By       Attribution
}

// CheckForkPrefixes says whether from and to (folders, NormalizeFolder)
// may be forked one to the other: neither empty, and neither inside the
// other (a *PointError of field "to").
func CheckForkPrefixes(from, to string) error {
	switch {
	case from == "" || to == "":
		return &PointError{Field: "to", Reason: "a fork copies one folder to another: both from and to are needed"}
	case strings.HasPrefix(to, from) || strings.HasPrefix(from, to):
		return &PointError{Field: "to", Reason: fmt.Sprintf("%q and %q: neither prefix may contain the other", from, to)}
	}
	return nil
}

// MaxForkFiles is the default bound on the files one fork copies
// (AGENTFS_FORK_MAX_FILES sets it).
const MaxForkFiles = 100000

// ForkFilter selects a page of a subject's forks, newest first.
type ForkFilter struct {
	Limit int
	After *Cursor
}

// Merge conflict policies: fail (nothing applied), or the side that wins.
const (
	OnConflictFail   = "fail"
	OnConflictFork   = "fork"
	OnConflictTarget = "target"
)

// MergeRequest is a request to merge a fork back (POST
// /v1/forks/{id}/merge).
type MergeRequest struct {
	Subject    string
	ForkID     string
	OnConflict string // OnConflict…; "" is fail
	DryRun     bool
	By         Attribution
}

// FileSide is one side of a merge at one relative path: a file's version
// and content, or nil when the side holds no file there.
type FileSide struct {
	FileID      string
	Version     int
	SHA256      string
	SizeBytes   int64
	ContentType string
	BlobKey     string
}

// MergeConflict is a path changed on both sides of a merge to different
// bytes. Path is the target's path; Won names the side kept when the merge
// resolved it ("" when it did not).
type MergeConflict struct {
	Path               string
	Base, Fork, Target *FileSide
	Won                string
}

// Merge is the outcome of a merge: the changes applied to the target (as a
// diff of §18 lists them), the conflicts and how they were resolved, and
// the fork's new base.
type Merge struct {
	ForkID    string
	Base      Point
	Applied   []Change
	Conflicts []MergeConflict
	DryRun    bool
}

// MergeConflictError is a merge with on_conflict fail that found
// conflicts: every one is listed and nothing was applied (409
// MERGE_CONFLICT).
type MergeConflictError struct {
	Conflicts []MergeConflict
}

func (e *MergeConflictError) Error() string {
	paths := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		paths[i] = c.Path
	}
	noun := "paths"
	if len(paths) == 1 {
		noun = "path"
	}
	return fmt.Sprintf("%d %s changed on both sides: %s; nothing was merged (on_conflict fork or target resolves them)",
		len(paths), noun, strings.Join(paths, ", "))
}

// Origins of file events written by a fork or a merge (Origin.Via).
const (
	ViaFork  = "fork"
	ViaMerge = "merge"
)
