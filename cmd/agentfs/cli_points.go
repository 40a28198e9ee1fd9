package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/agentfs/agentfs/client"
)

// checkpointCommand is agentfs checkpoint: create, list and forget
// checkpoints.
func checkpointCommand() *command {
	return &command{
		name:    "checkpoint",
		summary: "name a point of your history: checkpoint create, ls, rm",
		usage: `agentfs checkpoint create [NAME] [--prefix PREFIX] [--note NOTE]
agentfs checkpoint ls [--prefix PREFIX]
agentfs checkpoint rm ID_OR_NAME`,
		help: `A checkpoint names the present as a point (a position, not a copy) for
--as-of, agentfs diff and agentfs restore, and keeps the versions it needs
while it exists.

Examples:
  agentfs checkpoint create before-refactor --prefix src/
  agentfs diff before-refactor --prefix src/ --patch
  agentfs restore src/ --to before-refactor --wait
`,
		subs: []*command{checkpointCreateCommand(), checkpointLsCommand(), checkpointRmCommand()},
	}
}

func checkpointCreateCommand() *command {
	return clientCommand(command{
		name:    "checkpoint create",
		summary: "make a checkpoint of the present",
		usage:   "agentfs checkpoint create [NAME] [--prefix PREFIX] [--note NOTE]",
		help: `Makes a checkpoint and prints it. A NAME in use is 409 CHECKPOINT_EXISTS.

Example:
  agentfs checkpoint create before-refactor --prefix src/
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.CheckpointOptions
		fs.StringVar(&opts.Prefix, "prefix", "", "the folder whose versions it keeps (`PREFIX`; default all)")
		fs.StringVar(&opts.Note, "note", "", "a `NOTE` kept with it")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) > 1 {
				return usagef("checkpoint create takes at most one NAME")
			}
			if len(args) == 1 {
				opts.Name = args[0]
			}
			cp, err := cli.client.CreateCheckpoint(ctx, opts)
			if err != nil {
				return err
			}
			return cli.printValue(cp, fmt.Sprintf("checkpoint %s %s at %s", cp.ID, deref(cp.Name), cp.Cursor))
		}
	})
}

func checkpointLsCommand() *command {
	return clientCommand(command{
		name:    "checkpoint ls",
		summary: "list checkpoints, newest first",
		usage:   "agentfs checkpoint ls [--prefix PREFIX]",
		help: `Lists checkpoints, newest first: a JSON array when stdout is not a
terminal, a table on one.

Example:
  agentfs checkpoint ls
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.CheckpointListOptions
		fs.StringVar(&opts.Prefix, "prefix", "", "only checkpoints of this `PREFIX`")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 0 {
				return usagef("checkpoint ls takes flags only")
			}
			checkpoints := func(cursor string) ([]client.Checkpoint, bool, *string, error) {
				opts.Cursor = cursor
				return pageOf(cli.client.ListCheckpoints(ctx, opts))
			}
			return printAll(cli, checkpoints, "ID\tNAME\tPREFIX\tCREATED", func(cp client.Checkpoint) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s", cp.ID, deref(cp.Name), cp.Prefix, cp.CreatedAt.Local().Format(time.DateTime))
			})
		}
	})
}

func checkpointRmCommand() *command {
	return clientCommand(command{
		name:    "checkpoint rm",
		summary: "forget a checkpoint",
		usage:   "agentfs checkpoint rm ID_OR_NAME",
		help: `Forgets a checkpoint; the versions it kept become the sweeper's again.

Example:
  agentfs checkpoint rm before-refactor
`}, false, func(*flag.FlagSet) verbFunc {
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 {
				return usagef("checkpoint rm needs one ID_OR_NAME")
			}
			if err := cli.client.DeleteCheckpoint(ctx, args[0]); err != nil {
				return err
			}
			if cli.human {
				fmt.Fprintf(cli.stdout, "forgot checkpoint %s\n", args[0])
			}
			return nil
		}
	})
}

// diffCommand is agentfs diff: what changed between two points.
func diffCommand() *command {
	return clientCommand(command{
		name:    "diff",
		summary: "what changed between two points (--patch: a diff git apply accepts)",
		usage:   "agentfs diff FROM [TO] [--prefix P] [--patch]",
		help: `Lists the files that differ between the points FROM and TO (default now):
a checkpoint id or name, an event cursor, an RFC 3339 time or now. Without
--patch: a JSON array when stdout is not a terminal, one line a change on
one. With --patch: a unified diff of the text files (git apply accepts it).

Examples:
  agentfs diff before-refactor --prefix src/
  agentfs diff before-refactor --patch | git apply -R
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.DiffOptions
		fs.StringVar(&opts.Prefix, "prefix", "", "only paths starting with `P`")
		patch := fs.Bool("patch", false, "print a unified diff of the text files")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 && len(args) != 2 {
				return usagef("diff needs FROM and at most one TO")
			}
			if len(args) == 2 {
				opts.To = args[1]
			}
			if *patch {
				return printPatch(ctx, cli, args[0], opts)
			}
			all, err := everyPage(func(cursor string) ([]client.Change, bool, *string, error) {
				opts.Cursor = cursor
				d, err := cli.client.Diff(ctx, args[0], opts)
				if err != nil {
					return nil, false, nil, err
				}
				return d.Data, d.HasMore, d.NextCursor, nil
			})
			if err != nil {
				return err
			}
			return cli.printOr(all, func() error {
				for _, ch := range all {
					line := ch.Change + "\t" + ch.Path
					if ch.PreviousPath != nil {
						line += "\t(from " + *ch.PreviousPath + ")"
					}
					fmt.Fprintln(cli.stdout, line)
				}
				return nil
			})
		}
	})
}

// printPatch prints the patch between the points, page after page.
func printPatch(ctx context.Context, cli *cliRun, from string, opts client.DiffOptions) error {
	for {
		d, err := cli.client.Diff(ctx, from, client.DiffOptions{To: opts.To, Prefix: opts.Prefix, Cursor: opts.Cursor, Limit: 1000})
		if err != nil {
			return err
		}
		p, err := cli.client.DiffPatch(ctx, from, client.DiffOptions{To: opts.To, Prefix: opts.Prefix, Cursor: opts.Cursor, Limit: 1000})
		if err != nil {
			return err
		}
		if _, err := io.WriteString(cli.stdout, p); err != nil {
			return err
		}
		if !d.HasMore || d.NextCursor == nil {
			return nil
		}
		opts.Cursor = *d.NextCursor
	}
}

// printValue prints v as JSON, or line on a terminal.
func (cli *cliRun) printValue(v any, line string) error {
	return cli.printOr(v, func() error {
		_, err := fmt.Fprintln(cli.stdout, line)
		return err
	})
}

// printOr prints v as JSON when stdout is not a terminal, and on one what
// human prints.
func (cli *cliRun) printOr(v any, human func() error) error {
	if !cli.human {
		return json.NewEncoder(cli.stdout).Encode(v)
	}
	return human()
}

// restoreToPoint is agentfs restore PREFIX --to POINT: a folder put back.
func restoreToPoint(ctx context.Context, cli *cliRun, prefix, to string, dryRun, wait bool, key string) error {
	if dryRun {
		plan, err := cli.client.PlanRestore(ctx, prefix, to)
		if err != nil {
			return err
		}
		return cli.printOr(plan, func() error {
			for _, ch := range plan.Items {
				fmt.Fprintf(cli.stdout, "undo %s\t%s\n", ch.Change, ch.Path)
			}
			return nil
		})
	}
	b, err := cli.client.Restore(ctx, prefix, to, client.RestorePointOptions{IdempotencyKey: key, Wait: wait})
	if err != nil {
		return err
	}
	if err := cli.printBatch(b); err != nil {
		return err
	}
	if wait && b.Status != "succeeded" {
		return fmt.Errorf("restore %s ended %s: %d of %d items failed", b.ID, b.Status, b.Counts.Failed, b.Counts.Total)
	}
	return nil
}

// getAsOf downloads the bytes the file FILE names had at asOf to local
// (stdout for "" or -): FILE is a file id, or the path a file held then.
func getAsOf(ctx context.Context, cli *cliRun, arg, asOf, local string) error {
	f, err := fileAsOf(ctx, cli.client, arg, asOf)
	if err != nil {
		return err
	}
	content, err := cli.client.FileContentAsOf(ctx, f.ID, asOf, client.ContentOptions{})
	if err != nil {
		return err
	}
	defer content.Close()
	if local == "" || local == "-" {
		_, err := copyVerified(cli.stdout, content)
		return err
	}
	dest := localTarget(local, f.Path)
	n, err := writeVerified(dest, content)
	if err != nil {
		return err
	}
	return cli.printFile(f, fmt.Sprintf("wrote %d bytes to %s (%s  %s as of %s)", n, dest, f.ID, f.Path, asOf))
}

// fileAsOf is the file FILE names as it was at asOf: by id, or the file
// live at the path then.
func fileAsOf(ctx context.Context, c *client.Client, arg, asOf string) (*client.File, error) {
	if client.IsFileID(arg) {
		return c.FileAsOf(ctx, arg, asOf)
	}
	p := remotePathArg(arg)
	l, err := c.ListFiles(ctx, client.ListOptions{AsOf: asOf, Prefix: p, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(l.Data) == 0 || l.Data[0].Path != p {
		return nil, fmt.Errorf("no file held path %q at %s (agentfs ls --as-of %s --prefix %s shows what did)", p, asOf, asOf, path.Dir(p)+"/")
	}
	return &l.Data[0], nil
}

// writeVerified writes content to dest whole or not at all: into a
// temporary file beside it, checked against its SHA-256, then renamed.
func writeVerified(dest string, content *client.Content) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".agentfs-*")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name())
	n, err := copyVerified(tmp, content)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", dest, err)
	}
	return n, os.Rename(tmp.Name(), dest)
}
