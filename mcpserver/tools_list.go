package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentfs/agentfs"
	"github.com/google/jsonschema-go/jsonschema"
)

// pageFiles is the page size of the listings the tools read.
const pageFiles = 1000

// scan reads the files under prefix from cursor, page after page, until
// limit files were read or none are left, and hands each to visit. It
// stops early, at a page boundary, once enough() says so. It returns the
// cursor to continue from ("" when every file was read) and how many files
// it read.
func (tb *toolbox) scan(ctx context.Context, prefix, cursor string, limit int, visit func(*File), enough func() bool) (string, int, error) {
	read := 0
	for {
		page, err := tb.b.List(ctx, ListFilter{Prefix: prefix, Cursor: cursor, Limit: min(pageFiles, limit-read), AsOf: asOfIn(ctx)})
		if err != nil {
			return "", read, err
		}
		for i := range page.Files {
			visit(&page.Files[i])
		}
		read += len(page.Files)
		if !page.HasMore || page.NextCursor == "" {
			return "", read, nil
		}
		cursor = page.NextCursor
		if read >= limit || enough != nil && enough() {
			return cursor, read, nil
		}
	}
}

// cursorProperty bounds a cursor argument.
func cursorProperty(s *jsonschema.Schema) {
	s.Properties["cursor"].MaxLength = ptr(1024)
}

// relative is p below the directory prefix.
func relative(prefix, p string) string { return strings.TrimPrefix(p, prefix) }

// missingDir explains an empty listing of dir: a file (not a directory),
// or nothing at all.
func (tb *toolbox) missingDir(ctx context.Context, dir string) error {
	_, err := tb.fileAt(ctx, dir)
	var p *Problem
	switch {
	case err == nil:
		return validation("path", fmt.Sprintf("%s is a file, not a directory; use get_file_info or read_text_file", dir))
	case errors.As(err, &p) && p.Code == CodeNotFound:
		return notFound(fmt.Sprintf("no directory %s: no file's path starts with %s/", dir, dir))
	}
	return err
}

type listDirectoryIn struct {
	Path   string `json:"path" jsonschema:"the directory, e.g. reports; \"\", \".\" or \"/\" for the root"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, to continue the listing"`
	AsOf   string `json:"as_of,omitempty" jsonschema:"list the directory as it was at this point: a checkpoint id or name, an event cursor, an RFC 3339 time, or now"`
}

// DirEntry is one entry of a directory.
type DirEntry struct {
	Name string `json:"name"`
	Type string `json:"type" jsonschema:"file or directory"`
}

// DirectoryListing is list_directory's structured output.
type DirectoryListing struct {
	Path    string     `json:"path"`
	Entries []DirEntry `json:"entries"`
	// HasMore says entries may follow: call again with NextCursor.
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func listDirectoryTool() *toolSpec {
	return define(tool("list_directory"), cursorProperty, func(ctx context.Context, tb *toolbox, in *listDirectoryIn, cc *callContext) (*reply[DirectoryListing], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		ctx = withAsOf(ctx, in.AsOf)
		prefix := dirPrefix(dir)
		seen := map[DirEntry]bool{}
		var next, more string
		if fl, ok := tb.b.(folderLister); ok && asOfIn(ctx) == "" {
			// One level by delimiter: one index seek per entry, names only.
			page, err := fl.Folder(ctx, prefix, in.Cursor, min(tb.opts.ScanFiles, pageFiles))
			if err != nil {
				return nil, err
			}
			for _, p := range page.Files {
				seen[DirEntry{Name: relative(prefix, p), Type: "file"}] = true
			}
			for _, p := range page.Folders {
				seen[DirEntry{Name: strings.TrimSuffix(relative(prefix, p), "/"), Type: "directory"}] = true
			}
			if next = page.NextCursor; page.HasMore && next != "" {
				more = fmt.Sprintf("[More entries follow. Call list_directory with the same path and cursor=%q to continue.]", next)
			}
		} else {
			var read int
			var err error
			next, read, err = tb.scan(ctx, prefix, in.Cursor, tb.opts.ScanFiles, func(f *File) {
				name, _, isDir := strings.Cut(relative(prefix, f.Path), "/")
				seen[DirEntry{Name: name, Type: map[bool]string{true: "directory", false: "file"}[isDir]}] = true
			}, nil)
			if err != nil {
				return nil, err
			}
			if next != "" {
				more = fmt.Sprintf("[More entries may follow: this call read %d files. Call list_directory with the same path and cursor=%q to continue (a directory may show again).]", read, next)
			}
		}
		if len(seen) == 0 && in.Cursor == "" && dir != "" {
			return nil, tb.missingDir(ctx, dir)
		}
		out := DirectoryListing{Path: dir, Entries: sortedEntries(seen), HasMore: next != "", NextCursor: next}
		var b strings.Builder
		for _, e := range out.Entries {
			fmt.Fprintf(&b, "%s %s\n", map[string]string{"file": "[FILE]", "directory": "[DIR]"}[e.Type], e.Name)
		}
		if len(out.Entries) == 0 {
			b.WriteString("(empty: there are no files)\n")
		}
		if more != "" {
			b.WriteString(more + "\n")
		}
		return &reply[DirectoryListing]{Text: strings.TrimSuffix(b.String(), "\n"), Out: out}, nil
	})
}

func sortedEntries(seen map[DirEntry]bool) []DirEntry {
	out := make([]DirEntry, 0, len(seen))
	for e := range seen {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b DirEntry) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

type directoryTreeIn struct {
	Path   string `json:"path" jsonschema:"the directory, e.g. reports; \"\", \".\" or \"/\" for the root"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, to continue"`
	AsOf   string `json:"as_of,omitempty" jsonschema:"show the tree as it was at this point: a checkpoint id or name, an event cursor, an RFC 3339 time, or now"`
}

// TreeEntry is one node of directory_tree: a file, or a directory with
// its children.
type TreeEntry struct {
	Name     string       `json:"name"`
	Type     string       `json:"type"`
	Children []*TreeEntry `json:"children,omitempty"`
}

// DirectoryTree is directory_tree's structured output.
type DirectoryTree struct {
	Path       string       `json:"path"`
	Tree       []*TreeEntry `json:"tree"`
	HasMore    bool         `json:"has_more"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// treeOutputSchema describes DirectoryTree, whose nodes nest (a schema
// inference cannot express the recursion).
func treeOutputSchema() *jsonschema.Schema {
	entry := &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"name":     {Type: "string"},
			"type":     {Type: "string", Enum: []any{"file", "directory"}},
			"children": {Type: "array", Items: &jsonschema.Schema{Ref: "#/$defs/entry"}},
		},
		Required:             []string{"name", "type"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	return &jsonschema.Schema{
		Type: "object",
		Defs: map[string]*jsonschema.Schema{"entry": entry},
		Properties: map[string]*jsonschema.Schema{
			"path":        {Type: "string"},
			"tree":        {Type: "array", Items: &jsonschema.Schema{Ref: "#/$defs/entry"}},
			"has_more":    {Type: "boolean"},
			"next_cursor": {Type: "string"},
		},
		Required:             []string{"path", "tree", "has_more"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

func directoryTreeTool() *toolSpec {
	t := tool("directory_tree")
	t.OutputSchema = treeOutputSchema()
	return define(t, cursorProperty, func(ctx context.Context, tb *toolbox, in *directoryTreeIn, cc *callContext) (*reply[DirectoryTree], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		ctx = withAsOf(ctx, in.AsOf)
		prefix := dirPrefix(dir)
		root := &TreeEntry{Type: "directory"}
		next, n, err := tb.scan(ctx, prefix, in.Cursor, tb.opts.ScanFiles, func(f *File) {
			addToTree(root, strings.Split(relative(prefix, f.Path), "/"))
		}, nil)
		if err != nil {
			return nil, err
		}
		if n == 0 && in.Cursor == "" && dir != "" {
			return nil, tb.missingDir(ctx, dir)
		}
		sortTree(root)
		out := DirectoryTree{Path: dir, Tree: root.Children, HasMore: next != "", NextCursor: next}
		if out.Tree == nil {
			out.Tree = []*TreeEntry{}
		}
		text, err := json.MarshalIndent(out.Tree, "", "  ")
		if err != nil {
			return nil, err
		}
		s := string(text)
		if next != "" {
			s += fmt.Sprintf("\n[Partial tree: this call read %d files. Call directory_tree with the same path and cursor=%q for the rest (directories may show again).]", n, next)
		}
		return &reply[DirectoryTree]{Text: s, Out: out}, nil
	})
}

// addToTree adds a file, given as its path segments, below root.
func addToTree(root *TreeEntry, segs []string) {
	node := root
	for i, seg := range segs {
		typ := "directory"
		if i == len(segs)-1 {
			typ = "file"
		}
		var child *TreeEntry
		for _, c := range node.Children {
			if c.Name == seg && c.Type == typ {
				child = c
				break
			}
		}
		if child == nil {
			child = &TreeEntry{Name: seg, Type: typ}
			node.Children = append(node.Children, child)
		}
		node = child
	}
}

func sortTree(n *TreeEntry) {
	slices.SortFunc(n.Children, func(a, b *TreeEntry) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	for _, c := range n.Children {
		sortTree(c)
	}
	if n.Type == "directory" && n.Children == nil {
		n.Children = []*TreeEntry{}
	}
}

type searchFilesIn struct {
	Path            string   `json:"path" jsonschema:"the directory to search below; \"\", \".\" or \"/\" for the root"`
	Pattern         string   `json:"pattern" jsonschema:"glob over paths relative to path: * and ? within a name, ** across directories, [abc], {a,b}; e.g. *.md (this directory) or **/*.md (all below)"`
	ExcludePatterns []string `json:"excludePatterns,omitempty" jsonschema:"globs of relative paths to leave out; a pattern that matches a directory leaves out everything below it"`
	Cursor          string   `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, to continue the search"`
}

// SearchResult is search_files' structured output.
type SearchResult struct {
	Path       string   `json:"path"`
	Pattern    string   `json:"pattern"`
	Matches    []string `json:"matches"`
	HasMore    bool     `json:"has_more"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// maxMatches is how many matches search_files collects before it answers
// with a cursor.
const maxMatches = 1000

func searchFilesTool() *toolSpec {
	return define(tool("search_files"), func(s *jsonschema.Schema) {
		cursorProperty(s)
		s.Properties["pattern"].MinLength = ptr(1)
		s.Properties["pattern"].MaxLength = ptr(maxGlobLen)
		s.Properties["excludePatterns"].MaxItems = ptr(100)
		s.Properties["excludePatterns"].Items.MaxLength = ptr(maxGlobLen)
	}, func(ctx context.Context, tb *toolbox, in *searchFilesIn, cc *callContext) (*reply[SearchResult], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		match, err := compileGlob(in.Pattern)
		if err != nil {
			return nil, validation("pattern", err.Error())
		}
		var excludes []*glob
		for i, e := range in.ExcludePatterns {
			g, err := compileGlob(e)
			if err != nil {
				return nil, validation(fmt.Sprintf("excludePatterns[%d]", i), err.Error())
			}
			excludes = append(excludes, g)
		}
		prefix := dirPrefix(dir)
		out := SearchResult{Path: dir, Pattern: in.Pattern, Matches: []string{}}
		next, read, err := tb.scan(ctx, prefix, in.Cursor, 10*tb.opts.ScanFiles, func(f *File) {
			rel := relative(prefix, f.Path)
			if match.match(rel) && !excluded(excludes, rel) {
				out.Matches = append(out.Matches, f.Path)
			}
		}, func() bool { return len(out.Matches) >= maxMatches })
		if err != nil {
			return nil, err
		}
		slices.Sort(out.Matches)
		out.HasMore, out.NextCursor = next != "", next
		text := strings.Join(out.Matches, "\n")
		if len(out.Matches) == 0 {
			text = "No matches found"
		}
		if next != "" {
			text += fmt.Sprintf("\n[More files remain to search: this call read %d files. Call search_files with the same arguments and cursor=%q to continue.]", read, next)
		}
		return &reply[SearchResult]{Text: text, Out: out}, nil
	})
}

// excluded reports whether rel, or a directory above it, matches one of
// the exclude patterns.
func excluded(excludes []*glob, rel string) bool {
	for _, g := range excludes {
		for i := 1; i <= len(rel); i++ {
			if (i == len(rel) || rel[i] == '/') && g.match(rel[:i]) {
				return true
			}
		}
	}
	return false
}

type listRunFilesIn struct {
	RunID   string `json:"run_id,omitempty" jsonschema:"the run whose files to list (X-Run-ID of the request that created them); default: this session's run"`
	AgentID string `json:"agent_id,omitempty" jsonschema:"the agent whose files to list (X-Agent-ID of the request that created them)"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, for the next page"`
}

// RunFiles is list_run_files' structured output.
type RunFiles struct {
	RunID      string `json:"run_id,omitempty"`
	AgentID    string `json:"agent_id,omitempty"`
	Files      []File `json:"files"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// runFilesPage is list_run_files' page size.
const runFilesPage = 100

func listRunFilesTool() *toolSpec {
	return define(tool("list_run_files"), func(s *jsonschema.Schema) {
		cursorProperty(s)
		s.Properties["run_id"].MaxLength = ptr(agentfs.MaxTagValueLen)
		s.Properties["agent_id"].MaxLength = ptr(agentfs.MaxTagValueLen)
	}, func(ctx context.Context, tb *toolbox, in *listRunFilesIn, cc *callContext) (*reply[RunFiles], error) {
		run, agent := in.RunID, in.AgentID
		if run == "" && agent == "" {
			myAgent, myRun := tb.attribution(ctx)
			if run = myRun; run == "" {
				agent = myAgent
			}
		}
		if run == "" && agent == "" {
			return nil, validation("run_id", "give run_id or agent_id: this session has no run id of its own")
		}
		for _, v := range []struct{ field, value string }{{"run_id", run}, {"agent_id", agent}} {
			if v.value != "" && !agentfs.ValidTagValue(v.value) {
				return nil, validation(v.field, tagValueSyntax)
			}
		}
		page, err := tb.b.List(ctx, ListFilter{RunID: run, AgentID: agent, Cursor: in.Cursor, Limit: runFilesPage})
		if err != nil {
			return nil, err
		}
		out := RunFiles{RunID: run, AgentID: agent, Files: page.Files, HasMore: page.HasMore, NextCursor: page.NextCursor}
		if out.Files == nil {
			out.Files = []File{}
		}
		return &reply[RunFiles]{Text: runFilesText(out), Out: out}, nil
	})
}

func runFilesText(r RunFiles) string {
	var b strings.Builder
	who := "run " + r.RunID
	if r.RunID == "" {
		who = "agent " + r.AgentID
	} else if r.AgentID != "" {
		who += " and agent " + r.AgentID
	}
	if len(r.Files) == 0 {
		fmt.Fprintf(&b, "No live files created by %s.", who)
	} else {
		fmt.Fprintf(&b, "Files created by %s, newest first:\n", who)
	}
	for _, f := range r.Files {
		fmt.Fprintf(&b, "[FILE] %s (%s, %d bytes, version %d, %s)\n", f.Path, f.ID, f.SizeBytes, f.Version, f.CreatedAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	if r.HasMore {
		fmt.Fprintf(&b, "[More files: call list_run_files with the same arguments and cursor=%q for the next page.]", r.NextCursor)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

type runSummaryIn struct {
	RunID string `json:"run_id,omitempty" jsonschema:"the run to summarize (the X-Run-ID its requests carried); default: this session's run"`
}

func runSummaryTool() *toolSpec {
	return define(tool("run_summary"), func(s *jsonschema.Schema) {
		s.Properties["run_id"].MaxLength = ptr(agentfs.MaxTagValueLen)
	}, func(ctx context.Context, tb *toolbox, in *runSummaryIn, cc *callContext) (*reply[Run], error) {
		run, err := tb.runArg(ctx, in.RunID, cc)
		if err != nil {
			return nil, err
		}
		r, err := tb.b.Run(ctx, run)
		if err != nil {
			return nil, err
		}
		if r.AgentIDs == nil {
			r.AgentIDs = []string{}
		}
		return &reply[Run]{Text: runText(r), Out: *r}, nil
	})
}

// runArg is the run a tool's run_id names, this session's run without
// one; the call is counted for it.
func (tb *toolbox) runArg(ctx context.Context, runID string, cc *callContext) (string, error) {
	_, myRun := tb.attribution(ctx)
	run := cmp.Or(runID, myRun)
	if run == "" {
		return "", validation("run_id", "give run_id: this session has no run id of its own")
	}
	if !agentfs.ValidTagValue(run) {
		return "", validation("run_id", tagValueSyntax)
	}
	cc.runID = run
	return run, nil
}

func runText(r *Run) string {
	c := r.Counts
	agents := "no agent id"
	if len(r.AgentIDs) > 0 {
		agents = "agents " + strings.Join(r.AgentIDs, ", ")
	}
	return fmt.Sprintf("Run %s (%s), from %s to %s: created %d, replaced %d, deleted %d, restored %d, moved %d, reverted %d; "+
		"%d bytes written; %d of the files it created or last wrote are live now. list_run_files lists the files it created.",
		r.RunID, agents, r.FirstAt.Format(rfc3339), r.LastAt.Format(rfc3339), c.Created, c.Replaced, c.Deleted, c.Restored,
		c.Moved, c.Reverted, r.BytesWritten, r.LiveFiles)
}
