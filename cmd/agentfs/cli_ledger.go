package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/agentfs/agentfs/client"
)

// batchCancelCommand is agentfs batch cancel, beside agentfs batch FILE.json.
func batchCancelCommand() *command {
	return clientCommand(command{
		name:    "batch cancel",
		summary: "cancel a batch's pending items",
		usage:   "agentfs batch cancel BATCH_ID [--key KEY]",
		help: `Cancels a batch and prints it: its pending items become canceled, an item
already running finishes, and the batch ends canceled once nothing runs.
Cancelling a batch that has ended prints it unchanged. (A batch file named
cancel is agentfs batch ./cancel.)

Example:
  agentfs batch cancel batch_01jd8x2m4k9q7v3t5r6w8y0z1a
`}, false, batchCancelFlags)
}

// uploadsCommand is agentfs uploads: the upload sessions, the pending ones
// being what an interrupted upload left to resume.
func uploadsCommand() *command {
	return clientCommand(command{
		name:    "uploads",
		summary: "list upload sessions, newest first (pending ones can be resumed)",
		usage:   "agentfs uploads [--status STATUS] [--path PATH] [--limit N]",
		help: `Lists upload sessions, newest first: a table on a terminal, a JSON array
otherwise. A pending session is what an interrupted agentfs upload left: the
same upload command again resumes it and sends only the parts it lacks.
STATUS is pending, completing, completed, aborted, expired or failed.

Example:
  agentfs uploads --status pending
`}, false, uploadsFlags)
}

func uploadsFlags(fs *flag.FlagSet) verbFunc {
	var opts client.UploadListOptions
	fs.StringVar(&opts.Path, "path", "", "only sessions for this exact `PATH`")
	return statusListVerb(fs, "uploads", "sessions", &opts.Status, "ID\tSTATUS\tSIZE\tPARTS\tEXPIRES\tPATH", func(u *client.Upload) string {
		return fmt.Sprintf("%s\t%s\t%d\t%d/%d\t%s\t%s", u.ID, u.Status, u.SizeBytes, len(u.Parts), u.PartCount,
			u.ExpiresAt.Local().Format(time.DateTime), u.Path)
	}, &opts, &opts.Limit, (*client.Client).AllUploads)
}

// batchesCommand is agentfs batches: the batches with their counts.
func batchesCommand() *command {
	return clientCommand(command{
		name:    "batches",
		summary: "list batches with their counts, newest first",
		usage:   "agentfs batches [--status STATUS] [--limit N]",
		help: `Lists batches, newest first, with their counts but not their items: a table
on a terminal, a JSON array otherwise. STATUS is queued, running, succeeded,
partially_succeeded, failed or canceled. agentfs batch cancel ID stops one.

Example:
  agentfs batches --status running
`}, false, batchesFlags)
}

func batchesFlags(fs *flag.FlagSet) verbFunc {
	var opts client.BatchListOptions
	return statusListVerb(fs, "batches", "batches", &opts.Status, "ID\tSTATUS\tTOTAL\tSUCCEEDED\tFAILED\tPENDING\tCANCELED\tCREATED", func(b *client.Batch) string {
		n := b.Counts
		return fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s", b.ID, b.Status, n.Total, n.Succeeded, n.Failed, n.Pending, n.Canceled,
			b.CreatedAt.Local().Format(time.DateTime))
	}, &opts, &opts.Limit, (*client.Client).AllBatches)
}

// listVerb is a verb that lists things named what, taking flags only: it
// defines --limit, then prints every item all yields for the listing
// options opts (asked for pages of the size that serves the limit, which
// it sets in *size), a row of header's columns each on a terminal, at
// most limit of them.
func listVerb[T, O any](fs *flag.FlagSet, verb, what, header string, row func(*T) string,
	opts *O, size *int, all func(*client.Client, context.Context, O) iter.Seq2[*T, error]) verbFunc {
	limit := fs.Int("limit", 0, "at most `N` "+what+" (default: all)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 0 || *limit < 0 {
			return usagef("%s takes flags only", verb)
		}
		out := cli.lister(header, func(v any) string { return row(v.(*T)) })
		*size = pageSize(*limit)
		return listAll(all(cli.client, ctx, *opts), *limit, out)
	}
}

// statusListVerb is listVerb of a listing that --status filters: only
// the what in one state.
func statusListVerb[T, O any](fs *flag.FlagSet, verb, what string, status *string, header string, row func(*T) string,
	opts *O, size *int, all func(*client.Client, context.Context, O) iter.Seq2[*T, error]) verbFunc {
	fs.StringVar(status, "status", "", "only "+what+" in this `STATUS`")
	return listVerb(fs, verb, what, header, row, opts, size, all)
}

// pageSize is the page size that serves a --limit (0: all).
func pageSize(limit int) int {
	if limit > 0 {
		return min(limit, 1000)
	}
	return 1000
}

// listAll prints what seq yields, at most limit of it (0: all).
func listAll[T any](seq iter.Seq2[*T, error], limit int, out rows) error {
	n := 0
	for v, err := range seq {
		if err != nil {
			return err
		}
		if err := out.add(v); err != nil {
			return err
		}
		if n++; n == limit {
			break
		}
	}
	return out.end()
}

func batchCancelFlags(fs *flag.FlagSet) verbFunc {
	key := keyFlag(fs, "cancel")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("batch cancel needs one batch ID")
		}
		b, err := cli.client.CancelBatch(ctx, args[0], client.CancelBatchOptions{IdempotencyKey: *key})
		if client.ErrorCode(err) == "NOT_FOUND" {
			return withNext(err, "agentfs batches lists your batches")
		}
		if err != nil {
			return err
		}
		return cli.printBatch(b)
	}
}

// eventFilter is the flags of agentfs events, kept to say how to resume.
type eventFilter struct {
	run, agent, types, file, prefix, after string
	follow                                 bool
}

// eventsCommand is agentfs events: the event feed as JSON lines, followed
// across reconnects with --follow.
func eventsCommand() *command {
	return clientCommand(command{
		name:    "events",
		summary: "print the event feed as JSON lines; --follow waits for more",
		usage:   "agentfs events [--run RUN_ID] [--agent AGENT_ID] [--type TYPES] [--file ID] [--prefix PREFIX] [--after CURSOR|now] [--follow]",
		help: `Prints the events of your files, oldest first, one JSON object a line on
stdout: every create, replace, delete, restore, move, revert, expiry and
purge, with the run and agent that caused it. Without --after it starts at
the oldest event kept; --after now starts at the end, with exactly what
happens from now on. TYPES is a
comma-separated list of file.created, file.replaced, file.deleted,
file.restored, file.moved, file.reverted, file.expired and file.purged.

Without --follow it prints what there is, then the cursor to go on from on
stderr. With --follow it waits for new events and prints them as they
happen, forever: a dropped connection or a restarting server is waited out
and the feed resumed from the last cursor, so nothing is missed or printed
twice. Ctrl-C stops it and prints, on stderr, the command that resumes
where it stopped (--after CURSOR).

Examples:
  agentfs events --run run-1
  agentfs events --after now --follow --type file.created,file.replaced
`}, false, eventsFlags)
}

func eventsFlags(fs *flag.FlagSet) verbFunc {
	var f eventFilter
	fs.StringVar(&f.run, "run", "", "only events of requests with this X-Run-ID (`RUN_ID`)")
	fs.StringVar(&f.agent, "agent", "", "only events of requests with this X-Agent-ID (`AGENT_ID`)")
	fs.StringVar(&f.types, "type", "", "only these event `TYPES`, comma-separated")
	fs.StringVar(&f.file, "file", "", "only the events of the file `ID`")
	fs.StringVar(&f.prefix, "prefix", "", "only events whose path starts with `PREFIX`")
	fs.StringVar(&f.after, "after", "", "start after this `CURSOR`, or at the end with now (default: the oldest event kept)")
	fs.BoolVar(&f.follow, "follow", false, "wait for new events and print them as they happen, until Ctrl-C")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 0 {
			return usagef("events takes flags only")
		}
		opts := client.EventOptions{After: f.after, RunID: f.run, AgentID: f.agent, FileID: f.file, Prefix: f.prefix, Limit: 1000}
		if f.types != "" {
			opts.Types = strings.Split(f.types, ",")
		}
		var cursor string
		var err error
		if f.follow {
			cursor, err = cli.followEvents(ctx, opts)
		} else {
			cursor, err = cli.listEvents(ctx, opts)
		}
		if err == nil {
			fmt.Fprintf(cli.stderr, "next cursor %s; resume with: %s\n", cursor, f.resume(cursor))
			return nil
		}
		return f.failed(err, cursor)
	}
}

// listEvents prints the events there are and returns the cursor after
// them.
func (cli *cliRun) listEvents(ctx context.Context, opts client.EventOptions) (string, error) {
	for {
		page, err := cli.client.Events(ctx, opts)
		if err != nil {
			return opts.After, err
		}
		if err := cli.printEvents(page.Data); err != nil {
			return opts.After, err
		}
		opts.After = page.NextCursor
		if !page.HasMore {
			return opts.After, nil
		}
	}
}

// followEvents prints events as they commit until ctx ends or the feed
// fails for good, and returns the cursor after the last one printed.
func (cli *cliRun) followEvents(ctx context.Context, opts client.EventOptions) (string, error) {
	fl := cli.client.FollowEvents(opts, client.FollowOptions{})
	for e, err := range fl.All(ctx) {
		if err != nil {
			return fl.Cursor(), err
		}
		if err := cli.printEvents([]client.Event{*e}); err != nil {
			return fl.Cursor(), err
		}
	}
	return fl.Cursor(), nil
}

// printEvents prints events one JSON object a line.
func (cli *cliRun) printEvents(events []client.Event) error {
	enc := json.NewEncoder(cli.stdout)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

// resume is the command that goes on from cursor with the same filters.
func (f eventFilter) resume(cursor string) string {
	words := []string{"agentfs events"}
	for _, fl := range []struct{ name, value string }{{"--run", f.run}, {"--agent", f.agent}, {"--type", f.types},
		{"--file", f.file}, {"--prefix", f.prefix}} {
		if fl.value != "" {
			words = append(words, fl.name, shellQuote(fl.value))
		}
	}
	if cursor != "" {
		words = append(words, "--after", shellQuote(cursor))
	}
	if f.follow {
		words = append(words, "--follow")
	}
	return strings.Join(words, " ")
}

// failed says what to do after the feed stopped at cursor.
func (f eventFilter) failed(err error, cursor string) error {
	switch {
	case client.ErrorCode(err) == "CURSOR_EXPIRED":
		return withNext(err, "the events after that cursor are past the server's retention: start again with --after now, "+
			"or without --after for the oldest event kept")
	case client.ErrorCode(err) != "" && cursor == f.after:
		return err // refused as asked: a resume would be refused the same way
	}
	// Interrupted (Ctrl-C), or cut off: nothing after cursor was printed.
	return withNext(err, "resume with: "+f.resume(cursor))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
