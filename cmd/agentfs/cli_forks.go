package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/client"
)

// forkCommand is agentfs fork SRC DST: a copy-on-write copy of a folder.
func forkCommand() *command {
	return clientCommand(command{
		name:    "fork",
		summary: "copy a folder to work on it apart (no bytes copied): fork SRC DST, fork ls",
		usage: `agentfs fork SRC DST [--as-of POINT]
agentfs fork ls`,
		help: `Copies every file under the folder SRC (as it was at POINT; default now)
to the same relative path under DST, as new files sharing their bytes:
instant, nothing copied. DST must hold no file (409 PATH_EXISTS), and
neither folder may contain the other. agentfs merge brings DST's changes
back into SRC.

Examples:
  agentfs fork src/ try/
  agentfs fork src/ yesterday/ --as-of before-refactor
  agentfs merge fork_… --dry-run
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.ForkOptions
		fs.StringVar(&opts.AsOf, "as-of", "", "fork the folder as it was at `POINT` (a checkpoint, cursor, RFC 3339 time or now)")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 2 {
				return usagef("fork needs SRC and DST folders")
			}
			f, err := cli.client.CreateFork(ctx, args[0], args[1], opts)
			if err != nil {
				return err
			}
			return cli.printValue(f, fmt.Sprintf("fork %s: %d files of %s copied to %s (base %s)", f.ID, f.Files, f.From, f.To, f.Base))
		}
	})
}

func forkLsCommand() *command {
	return clientCommand(command{
		name:    "fork ls",
		summary: "list forks, newest first",
		usage:   "agentfs fork ls",
		help: `Lists forks, newest first: a JSON array when stdout is not a terminal, a
table on one.

Example:
  agentfs fork ls
`}, false, lsVerb("fork ls", func(ctx context.Context, c *client.Client, cursor string) ([]client.Fork, bool, *string, error) {
		return pageOf(c.ListForks(ctx, 100, cursor))
	}, "ID\tFROM\tTO\tFILES\tCREATED", func(f client.Fork) string {
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", f.ID, f.From, f.To, f.Files, f.CreatedAt.Local().Format(time.DateTime))
	}))
}

// mergeCommand is agentfs merge FORK_ID: a fork's changes brought back.
func mergeCommand() *command {
	return clientCommand(command{
		name:    "merge",
		summary: "merge a fork's changes back into the folder it was copied from",
		usage:   "agentfs merge FORK_ID [--dry-run] [--on-conflict fail|fork|target]",
		help: `Merges a fork back, all at once: files changed only in the fork are
applied, files changed only in the original kept. A file changed on both
sides is a conflict: with --on-conflict fail (the default) the merge stops
with 409 MERGE_CONFLICT listing each and applies nothing; fork or target
picks the side that wins. --dry-run prints what it would do.

Examples:
  agentfs merge fork_… --dry-run
  agentfs merge fork_… --on-conflict fork
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.MergeOptions
		fs.BoolVar(&opts.DryRun, "dry-run", false, "print what the merge would do, change nothing")
		fs.StringVar(&opts.OnConflict, "on-conflict", "", "`fail` (default), fork or target: what a file changed on both sides does")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 {
				return usagef("merge needs one FORK_ID")
			}
			m, err := cli.client.Merge(ctx, args[0], opts)
			if err != nil {
				return err
			}
			return cli.printOr(m, func() error {
				for _, ch := range m.Applied {
					fmt.Fprintf(cli.stdout, "%s\t%s\n", ch.Change, ch.Path)
				}
				for _, c := range m.Conflicts {
					fmt.Fprintf(cli.stdout, "conflict\t%s\t(kept %s)\n", c.Path, deref(c.Resolution))
				}
				verb := "merged"
				if m.DryRun {
					verb = "would merge"
				}
				_, err := fmt.Fprintf(cli.stdout, "%s %d %s of %s\n", verb, len(m.Applied), plural(len(m.Applied), "change"), m.ForkID)
				return err
			})
		}
	})
}

// everyPage reads a listing page by page: page answers one page's rows,
// whether more follow and the cursor of the next.
func everyPage[T any](page func(cursor string) ([]T, bool, *string, error)) ([]T, error) {
	var all []T
	for cursor := ""; ; {
		rows, more, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
		if !more || next == nil {
			return all, nil
		}
		cursor = *next
	}
}

// listPage is what a keyset listing answers (ForkList, WebhookList,
// CheckpointList).
type listPage[T any] = struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// pageOf splits a listing's answer as everyPage takes it.
func pageOf[T any, L ~listPage[T]](l *L, err error) ([]T, bool, *string, error) {
	if err != nil {
		return nil, false, nil, err
	}
	p := listPage[T](*l)
	return p.Data, p.HasMore, p.NextCursor, nil
}

// lsVerb is the verb of a listing that takes no arguments (fork ls,
// webhook ls): every page of list, printed by printAll.
func lsVerb[T any](verb string, list func(ctx context.Context, c *client.Client, cursor string) ([]T, bool, *string, error),
	header string, row func(T) string) func(*flag.FlagSet) verbFunc {
	return func(*flag.FlagSet) verbFunc {
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 0 {
				return usagef("%s takes no arguments", verb)
			}
			return printAll(cli, func(cursor string) ([]T, bool, *string, error) { return list(ctx, cli.client, cursor) }, header, row)
		}
	}
}

// printAll prints every row of a listing read page by page: a JSON array
// when stdout is not a terminal, else a table of header and one line of
// row's a row.
func printAll[T any](cli *cliRun, page func(cursor string) ([]T, bool, *string, error), header string, row func(T) string) error {
	all, err := everyPage(page)
	if err != nil {
		return err
	}
	return cli.printOr(all, func() error {
		fmt.Fprintln(cli.stdout, header)
		for _, v := range all {
			fmt.Fprintln(cli.stdout, row(v))
		}
		return nil
	})
}
