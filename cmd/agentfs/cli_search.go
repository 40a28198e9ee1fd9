package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mcpserver"
)

// errNoMatches ends agentfs grep with status 1 and no message, as grep
// and rg do when nothing matched.
var errNoMatches = errors.New("no matches")

// grepCommand is agentfs grep: content search, printed like rg -n.
func grepCommand() *command {
	return clientCommand(command{
		name:    "grep",
		summary: "search the contents of files, printed like rg -n",
		usage:   "agentfs grep PATTERN [PREFIX] [-i] [-F] [-C N] [--glob GLOB] [--run RUN_ID]",
		help: `Prints every line of your live text files that matches PATTERN, an RE2
regular expression (Go's regexp syntax), as path:line:text, in path order,
through every page: exactly what rg -n prints over the same files in a
directory, for the patterns both read the same way. PREFIX narrows the
files to the paths that start with it. Exits 1 when nothing matched.

Binary files and files above the server's AGENTFS_SEARCH_MAX_FILE_BYTES are
not searched; the count of them goes to stderr.

Examples:
  agentfs grep 'func \w+Search' src/
  agentfs grep -i -C 2 todo --glob '**/*.md'
  agentfs grep -F 'a.b*c'
`}, false, grepFlags)
}

func grepFlags(fs *flag.FlagSet) verbFunc {
	var opts client.SearchOptions
	fs.BoolVar(&opts.IgnoreCase, "i", false, "match case-insensitively")
	fs.BoolVar(&opts.Literal, "F", false, "PATTERN is a fixed string, not a regular expression")
	fs.IntVar(&opts.Context, "C", 0, "show `N` lines before and after each match (0-10)")
	fs.StringVar(&opts.Glob, "glob", "", "only paths matching `GLOB` (the whole path; ** spans directories)")
	fs.StringVar(&opts.RunID, "run", "", "only files the run `RUN_ID` created or last wrote")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("grep needs a PATTERN and at most one PREFIX")
		}
		if len(args) == 2 {
			opts.Prefix = args[1]
		}
		opts.Limit = 1000
		gp := mcpserver.GrepPrinter{W: cli.stdout, Context: opts.Context > 0}
		var last *client.SearchResults
		for page, err := range cli.client.SearchPages(ctx, args[0], opts) {
			if err != nil {
				if client.ErrorCode(err) == "SEARCH_TOO_BROAD" {
					return withNext(err, "narrow it: a PREFIX, --glob, --run, or a longer literal in PATTERN")
				}
				return err
			}
			gp.Print(page.Data)
			last = page
		}
		if s := last.FilesSkipped; s.Binary+s.TooLarge > 0 {
			fmt.Fprintf(cli.stderr, "agentfs grep: %d binary and %d too large files not searched\n", s.Binary, s.TooLarge)
		}
		if !last.IndexComplete {
			fmt.Fprintln(cli.stderr, "agentfs grep: files written before search existed are still being indexed; some may not be searched yet")
		}
		if last.FilesMatched == 0 {
			return errNoMatches
		}
		return nil
	}
}
