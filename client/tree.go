package client

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"

	"github.com/agentfs/agentfs"
)

// A tree is the files under a folder: a local directory, or the live files
// whose paths start with a prefix ("reports/"). Copying or mirroring one
// tree onto another is planned here (PlanUpload, PlanDownload: what to
// send, fetch or delete, comparing contents by SHA-256) so that every
// program that syncs makes the same decisions; the agentfs command line
// carries the plans out.

// LocalFile is a regular file of a local tree.
type LocalFile struct {
	// Rel is its path below the tree's root, '/'-separated and in Unicode
	// NFC: the tail of the remote path it goes to.
	Rel string
	// Path is where it is on this machine.
	Path string
	Size int64
	// SHA256 is its content's lowercase hex SHA-256, once a plan needed it.
	SHA256 string
}

// Skipped is an entry that a transfer leaves alone, and why.
type Skipped struct {
	Rel    string
	Path   string // the local path, or the remote one
	Reason string
}

// partialName matches the hidden files a download fills (DownloadFile):
// they belong to a transfer, not to the tree.
var partialName = regexp.MustCompile(`^\..+(\.agentfs-part-[0-9a-z]+|\.part-[0-9]+)$`)

// WalkLocal lists the regular files under the directory root, sorted by
// Rel. What cannot be copied is returned as skipped, not as an error:
// entries that are not regular files (symbolic links are not followed;
// devices, sockets), and names no AgentFS path can have (not UTF-8, a
// backslash, a control character). Partial downloads are left out. An
// unreadable directory is an error.
func WalkLocal(root string) ([]LocalFile, []Skipped, error) {
	var (
		files   []LocalFile
		skipped []Skipped
		seen    = map[string]string{}
	)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if p == root || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = norm.NFC.String(filepath.ToSlash(rel))
		skip := func(reason string) error {
			skipped = append(skipped, Skipped{Rel: rel, Path: p, Reason: reason})
			return nil
		}
		switch {
		case partialName.MatchString(d.Name()):
			return nil
		case !d.Type().IsRegular():
			return skip("not a regular file (" + kindOf(d.Type()) + ")")
		}
		if _, err := agentfs.NormalizePath(rel); err != nil {
			return skip("no AgentFS path can have this name: " + err.Error())
		}
		if other, dup := seen[rel]; dup {
			return skip("the same name as " + other + " in Unicode NFC")
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		seen[rel] = p
		files = append(files, LocalFile{Rel: rel, Path: p, Size: fi.Size()})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(files, func(a, b LocalFile) int { return strings.Compare(a.Rel, b.Rel) })
	return files, skipped, nil
}

// kindOf names a file type in a few words.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a file"
}

// Tree returns the live files under prefix, sorted by path, through every
// page of the listing. prefix is a folder ("reports/"), or "" for all.
func (c *Client) Tree(ctx context.Context, prefix string) ([]File, error) {
	var files []File
	for f, err := range c.AllFiles(ctx, ListOptions{Prefix: prefix, Limit: 1000}) {
		if err != nil {
			return nil, err
		}
		files = append(files, *f)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// StepKind is what a plan's step does.
type StepKind string

// What a step does to the destination tree.
const (
	StepUpload   StepKind = "upload"   // send Local to Prefix+Rel
	StepDownload StepKind = "download" // write Remote to the local tree
	StepDelete   StepKind = "delete"   // delete Remote, or Local, which the source lacks
)

// Step is one thing a plan does to the destination.
type Step struct {
	Kind StepKind
	Rel  string
	// Local is the local side: the file to send, the one a download
	// overwrites, or the one to delete; nil when there is none.
	Local *LocalFile
	// Remote is the remote side: the file to fetch, the one an upload
	// replaces (its etag makes the replace conditional), or the one to
	// delete; nil when there is none.
	Remote *File
	// New: the destination holds nothing there yet.
	New bool
}

// Size is the number of bytes the step moves.
func (s Step) Size() int64 {
	switch {
	case s.Kind == StepUpload:
		return s.Local.Size
	case s.Kind == StepDownload:
		return s.Remote.SizeBytes
	}
	return 0
}

// Plan is what copying or mirroring a tree onto another does: the steps,
// sorted by Rel with the deletes last, and what it leaves alone.
type Plan struct {
	Steps []Step
	// Unchanged counts the files both trees hold with the same content.
	Unchanged int
	// Kept counts the files left as they are because the destination holds
	// other content and PlanOptions.NoReplace said so.
	Kept int
	// Skipped is what cannot be copied, and why.
	Skipped []Skipped
}

// Bytes is the number of bytes the plan moves.
func (p *Plan) Bytes() int64 {
	var n int64
	for _, s := range p.Steps {
		n += s.Size()
	}
	return n
}

// Count is the number of steps of a kind.
func (p *Plan) Count(kind StepKind) int {
	n := 0
	for _, s := range p.Steps {
		if s.Kind == kind {
			n++
		}
	}
	return n
}

// PlanOptions adjust PlanUpload and PlanDownload.
type PlanOptions struct {
	// Delete plans to delete what the destination holds that the source
	// does not (a remote file is soft deleted: restorable).
	Delete bool
	// NoReplace leaves a destination file that holds other content as it
	// is, instead of planning to overwrite it.
	NoReplace bool
	// Parallel is how many local files are hashed at once; 4 when 0.
	Parallel int
}

// PlanUpload plans sending the local tree to the remote tree under
// prefix (as Tree listed it): a local file the remote lacks is uploaded,
// one whose SHA-256 differs replaces the remote file, an identical one is
// left alone; with Delete, a remote file the local tree lacks is deleted.
// Local files of the same size as their remote counterpart are hashed
// (their SHA256 set) to tell; a different size is a change by itself.
// skipped are the local entries WalkLocal skipped: a remote file at their
// path is never deleted.
func PlanUpload(ctx context.Context, local []LocalFile, skipped []Skipped, remote []File, prefix string, opts PlanOptions) (*Plan, error) {
	byRel := remoteByRel(remote, prefix)
	if err := hashSameSize(ctx, local, func(l *LocalFile) int64 { return sizeOf(byRel[l.Rel]) }, opts.Parallel); err != nil {
		return nil, err
	}
	plan := &Plan{Skipped: slices.Clone(skipped)}
	present := map[string]bool{}
	for _, s := range skipped {
		present[s.Rel] = true
	}
	for i := range local {
		l := &local[i]
		present[l.Rel] = true
		r := byRel[l.Rel]
		plan.add(Step{Kind: StepUpload, Rel: l.Rel, Local: l, Remote: r, New: r == nil}, r != nil && r.SizeBytes == l.Size && r.SHA256 == l.SHA256, opts)
	}
	if opts.Delete {
		for i := range remote {
			if rel := strings.TrimPrefix(remote[i].Path, prefix); !present[rel] {
				plan.Steps = append(plan.Steps, Step{Kind: StepDelete, Rel: rel, Remote: &remote[i]})
			}
		}
	}
	return plan, nil
}

// PlanDownload plans writing the remote tree under prefix (as Tree listed
// it) to the local tree (as WalkLocal listed it): a remote file the local
// tree lacks is downloaded, one whose SHA-256 differs overwrites the local
// file, an identical one is left alone; with Delete, a local file the
// remote tree lacks is deleted. A remote file whose path is also a folder
// of other remote files ("a" beside "a/b") cannot be a local file and is
// skipped.
func PlanDownload(ctx context.Context, remote []File, prefix string, local []LocalFile, opts PlanOptions) (*Plan, error) {
	byRel := remoteByRel(remote, prefix)
	if err := hashSameSize(ctx, local, func(l *LocalFile) int64 { return sizeOf(byRel[l.Rel]) }, opts.Parallel); err != nil {
		return nil, err
	}
	localByRel := map[string]*LocalFile{}
	for i := range local {
		localByRel[local[i].Rel] = &local[i]
	}
	folders := map[string]bool{}
	for rel := range byRel {
		for i := range len(rel) {
			if rel[i] == '/' {
				folders[rel[:i]] = true
			}
		}
	}
	plan := &Plan{}
	for i := range remote {
		r := &remote[i]
		rel := strings.TrimPrefix(r.Path, prefix)
		if folders[rel] {
			plan.Skipped = append(plan.Skipped, Skipped{Rel: rel, Path: r.Path,
				Reason: "a local file cannot have this name: it is also a folder of other files"})
			continue
		}
		l := localByRel[rel]
		plan.add(Step{Kind: StepDownload, Rel: rel, Local: l, Remote: r, New: l == nil}, l != nil && l.Size == r.SizeBytes && l.SHA256 == r.SHA256, opts)
	}
	if opts.Delete {
		for i := range local {
			if byRel[local[i].Rel] == nil {
				plan.Steps = append(plan.Steps, Step{Kind: StepDelete, Rel: local[i].Rel, Local: &local[i]})
			}
		}
	}
	return plan, nil
}

// add plans s, unless its two sides are alike, or the destination is to be
// kept.
func (p *Plan) add(s Step, alike bool, opts PlanOptions) {
	switch {
	case alike:
		p.Unchanged++
	case !s.New && opts.NoReplace:
		p.Kept++
	default:
		p.Steps = append(p.Steps, s)
	}
}

// remoteByRel indexes a remote tree by path below prefix.
func remoteByRel(remote []File, prefix string) map[string]*File {
	m := make(map[string]*File, len(remote))
	for i := range remote {
		m[strings.TrimPrefix(remote[i].Path, prefix)] = &remote[i]
	}
	return m
}

func sizeOf(f *File) int64 {
	if f == nil {
		return -1
	}
	return f.SizeBytes
}

// hashSameSize computes the SHA-256 of each local file whose size is the
// size of its counterpart (counterpart gives it, -1 for none), parallel at
// a time.
func hashSameSize(ctx context.Context, local []LocalFile, counterpart func(*LocalFile) int64, parallel int) error {
	jobs := make(chan *LocalFile)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range cmp.Or(parallel, 4) {
		wg.Go(func() {
			for l := range jobs {
				if err := hashLocal(ctx, l); err != nil {
					errOnce.Do(func() { first = err })
					cancel()
				}
			}
		})
	}
	for i := range local {
		if l := &local[i]; l.SHA256 == "" && counterpart(l) == l.Size {
			select {
			case jobs <- l:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// hashLocal sets l.SHA256 from its content.
func hashLocal(ctx context.Context, l *LocalFile) error {
	f, err := os.Open(l.Path)
	if err != nil {
		return fmt.Errorf("hash %s: %w", l.Path, err)
	}
	defer f.Close()
	sum, err := sha256Of(ctx, f)
	if err != nil {
		return fmt.Errorf("hash %s: %w", l.Path, err)
	}
	l.SHA256 = sum
	return nil
}
