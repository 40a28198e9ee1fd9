package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
)

// SearchOptions narrow a content search (client.SearchOptions).
type SearchOptions = client.SearchOptions

// SearchPage is one page of a content search (the API's SearchResults).
type SearchPage = client.SearchResults

type grepFilesIn struct {
	Pattern    string `json:"pattern" jsonschema:"the RE2 regular expression (Go regexp syntax) to look for in each line, or a fixed string with literal"`
	Path       string `json:"path,omitempty" jsonschema:"the directory to search below; default: every file"`
	Glob       string `json:"glob,omitempty" jsonschema:"only files whose path relative to path matches this glob: * and ? within a name, ** across directories, [abc], {a,b}; e.g. **/*.go"`
	Literal    bool   `json:"literal,omitempty" jsonschema:"true: pattern is a fixed string, not a regular expression"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"true: match case-insensitively"`
	Context    int    `json:"context,omitempty" jsonschema:"lines to show before and after each match (0-10)"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"the most matching lines to answer (1-1000, default 100); a cursor continues"`
	Cursor     string `json:"cursor,omitempty" jsonschema:"next_cursor of a previous call, to continue the search"`
}

// GrepResult is grep_files' structured output: the API's SearchResults
// with the pattern asked for.
type GrepResult struct {
	Pattern string `json:"pattern"`
	SearchPage
}

func grepFilesTool() *toolSpec {
	return define(tool("grep_files"), func(s *jsonschema.Schema) {
		cursorProperty(s)
		s.Properties["pattern"].MinLength = ptr(1)
		s.Properties["pattern"].MaxLength = ptr(agentfs.MaxSearchPatternBytes)
		s.Properties["glob"].MaxLength = ptr(maxGlobLen)
		s.Properties["context"].Minimum = ptr(0.0)
		s.Properties["context"].Maximum = ptr(float64(agentfs.MaxSearchContext))
		s.Properties["max_results"].Minimum = ptr(1.0)
		s.Properties["max_results"].Maximum = ptr(1000.0)
	}, func(ctx context.Context, tb *toolbox, in *grepFilesIn, cc *callContext) (*reply[GrepResult], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		opts := SearchOptions{Literal: in.Literal, IgnoreCase: in.IgnoreCase, Prefix: dirPrefix(dir), Context: in.Context,
			Limit: in.MaxResults, Cursor: in.Cursor}
		if in.Glob != "" {
			opts.Glob = dirPrefix(dir) + strings.TrimPrefix(in.Glob, "/")
		}
		page, err := tb.b.Search(ctx, in.Pattern, opts)
		if err != nil {
			return nil, err
		}
		return &reply[GrepResult]{Text: grepText(in.Pattern, page), Out: GrepResult{Pattern: in.Pattern, SearchPage: *page}}, nil
	})
}

// grepText writes a page as ripgrep does with -n (and -C), then what the
// search counted and how to go on.
func grepText(pattern string, p *SearchPage) string {
	var b strings.Builder
	gp := GrepPrinter{W: &b}
	for _, m := range p.Data {
		gp.Context = gp.Context || len(m.Before) > 0 || len(m.After) > 0
	}
	gp.Print(p.Data)
	if len(p.Data) == 0 {
		b.WriteString("No matches found for " + strconv.Quote(pattern) + "\n")
	}
	fmt.Fprintf(&b, "[%d files matched, %d searched", p.FilesMatched, p.FilesSearched)
	if s := p.FilesSkipped; s.Binary+s.TooLarge > 0 {
		fmt.Fprintf(&b, "; skipped %d binary and %d too large", s.Binary, s.TooLarge)
	}
	b.WriteString("]")
	if !p.IndexComplete {
		b.WriteString("\n[Files written before search was enabled are still being indexed: some may not be searched yet.]")
	}
	if p.HasMore && p.NextCursor != nil {
		fmt.Fprintf(&b, "\n[More matches remain. Call grep_files with the same arguments and cursor=%q to continue, or narrow the search with path or glob.]", *p.NextCursor)
	}
	return b.String()
}

// GrepPrinter prints matches as ripgrep does with -n (and -C), page after
// page: path:line:text for a match, path-line-text for context (each line
// once), and with Context, -- between groups of lines that are not
// adjacent. grep_files and agentfs grep print with it.
type GrepPrinter struct {
	W       io.Writer
	Context bool
	// where the last line printed was
	lastPath string
	lastLine int64
}

// Print prints one page's matches, continuing from the pages before.
func (g *GrepPrinter) Print(ms []client.SearchMatch) {
	for start := 0; start < len(ms); {
		end := start
		for end < len(ms) && ms[end].Path == ms[start].Path {
			end++
		}
		path := ms[start].Path
		for _, l := range grepLines(ms[start:end]) {
			if path == g.lastPath && l.n <= g.lastLine && !l.match {
				continue // shown already, around a match of the page before
			}
			if g.Context && g.lastPath != "" && (path != g.lastPath || l.n > g.lastLine+1) {
				fmt.Fprint(g.W, "--\n")
			}
			sep := "-"
			if l.match {
				sep = ":"
			}
			fmt.Fprintf(g.W, "%s%s%d%s%s\n", path, sep, l.n, sep, l.text)
			g.lastPath, g.lastLine = path, l.n
		}
		start = end
	}
}

// grepLine is one line of a file to print: a match or context.
type grepLine struct {
	n     int64
	text  string
	match bool
}

// grepLines are the lines of one file's matches in order, each once: a
// line that is both context and a match is a match.
func grepLines(ms []client.SearchMatch) []grepLine {
	byLine := map[int64]grepLine{}
	add := func(l grepLine) {
		if old, ok := byLine[l.n]; !ok || l.match && !old.match {
			byLine[l.n] = l
		}
	}
	for _, m := range ms {
		text := m.Text
		if m.Truncated {
			text += " [line cut at 4 KiB]"
		}
		add(grepLine{n: m.Line, text: text, match: true})
		for k, t := range m.Before {
			add(grepLine{n: m.Line - int64(len(m.Before)-k), text: t})
		}
		for k, t := range m.After {
			add(grepLine{n: m.Line + 1 + int64(k), text: t})
		}
	}
	out := make([]grepLine, 0, len(byLine))
	for _, l := range byLine {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b grepLine) int { return cmp.Compare(a.n, b.n) })
	return out
}
