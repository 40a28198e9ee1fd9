package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentfs/agentfs/client"
)

// runCommand is agentfs run: what one run did, its files as an archive,
// and undoing it (the run ledger).
func runCommand() *command {
	return &command{
		name:    "run",
		summary: "what one run did: run show, run archive (its files), run revert (undo it), run recovery (take it over)",
		usage: `agentfs run show RUN_ID
agentfs run archive RUN_ID [OUT] [--format zip|tar]
agentfs run revert RUN_ID [--force] [--wait] [--key KEY]
agentfs run recovery RUN_ID [--json]`,
		help: `Shows, fetches or undoes what happened under a run id (the X-Run-ID,
AGENTFS_RUN_ID of the writers).

Examples:
  agentfs run show run-1
  agentfs run archive run-1 run-1.zip
  agentfs run revert run-1 --wait
  agentfs run recovery run-1
`,
		subs: []*command{
			runShowCommand(),
			runArchiveCommand(),
			runRevertCommand(),
			runRecoveryCommand(),
		},
	}
}

// runShowCommand is agentfs run show: a run's summary.
func runShowCommand() *command {
	return clientCommand(command{
		name:    "run show",
		summary: "a run's counts, bytes written and live files",
		usage:   "agentfs run show RUN_ID",
		help: `Prints the summary of a run as JSON (indented on a terminal): the agents it
ran as, when it first and last wrote, its creates, replaces, deletes,
restores, moves and reverts, the bytes it wrote, and how many files it
created or last wrote are live now. agentfs ls --run RUN_ID lists the files
it created; agentfs events --run RUN_ID what it did, one event a line.

Example:
  agentfs run show run-1
`}, false, runShowFlags)
}

func runShowFlags(*flag.FlagSet) verbFunc {
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("run show needs one RUN_ID")
		}
		r, err := cli.client.Run(ctx, args[0])
		if err != nil {
			return unknownRun(err, args[0])
		}
		enc := json.NewEncoder(cli.stdout)
		if cli.human {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(r)
	}
}

// unknownRun explains a NOT_FOUND for a run id.
func unknownRun(err error, runID string) error {
	if client.ErrorCode(err) == "NOT_FOUND" {
		return withNext(err, fmt.Sprintf("no event of yours carries run id %s (runs are named by X-Run-ID, AGENTFS_RUN_ID)", runID))
	}
	return err
}

// archiveFormat is the format asked for, or the one OUT's name implies.
func archiveFormat(flagValue, out string) (string, error) {
	switch {
	case flagValue == client.ArchiveZip || flagValue == client.ArchiveTar:
		return flagValue, nil
	case flagValue != "":
		return "", usagef("--format must be zip or tar, not %q", flagValue)
	case strings.HasSuffix(strings.ToLower(out), ".tar"):
		return client.ArchiveTar, nil
	}
	return client.ArchiveZip, nil
}

// archiveResult is what run archive prints after writing a file, as JSON
// when stdout is not a terminal.
type archiveResult struct {
	RunID     string `json:"run_id"`
	Format    string `json:"format"`
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
}

// runArchiveCommand is agentfs run archive: a run's live files as one zip
// or tar.
func runArchiveCommand() *command {
	return clientCommand(command{
		name:    "run archive",
		summary: "download the run's live files as one zip or tar",
		usage:   "agentfs run archive RUN_ID [OUT] [--format zip|tar]",
		help: `Downloads, as one archive, every file the run created or last wrote that is
live now, each entry named by its path and holding one whole version.
OUT is a file, or a directory to put the server's name for it in
(run-RUN_ID.zip); the archive appears there only once it is whole, and a
failed download leaves nothing. Without OUT, or with -, the archive goes to
stdout, which must not be a terminal (redirect it, or pipe it to unzip or
tar). --format is zip (stored, not compressed) or tar; without it, an OUT
ending in .tar gets a tar and anything else a zip. On a terminal, an
archive of 1 MiB or more shows the bytes received and the rate on stderr.

Examples:
  agentfs run archive run-1 run-1.zip
  agentfs run archive run-1 --format tar | tar -tvf -
`}, false, runArchiveFlags)
}

func runArchiveFlags(fs *flag.FlagSet) verbFunc {
	formatFlag := fs.String("format", "", "the archive `FORMAT`, zip or tar (default: tar for an OUT ending in .tar, else zip)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 && len(args) != 2 {
			return usagef("run archive needs a RUN_ID and at most one OUT")
		}
		runID, out := args[0], strings.Join(args[1:], "")
		format, err := archiveFormat(*formatFlag, out)
		if err != nil {
			return err
		}
		toStdout := out == "" || out == "-"
		if toStdout && cli.human {
			return usagef("run archive would write a %s archive to stdout, which is a terminal: name a file "+
				"(agentfs run archive %s run.%s) or redirect stdout (> run.%s)", format, shellQuote(runID), format, format)
		}
		bar := cli.downloadBar()
		a, err := cli.client.RunArchive(ctx, runID, client.ArchiveOptions{Format: format, Progress: bar.received})
		if err != nil {
			cli.endBar(bar.progress)
			return unknownRun(err, runID)
		}
		defer a.Close()
		if toStdout {
			n, err := io.Copy(cli.stdout, a)
			bar.end(cli, n, err)
			if err != nil {
				return archiveFailed(ctx, err, n, "the archive on stdout is incomplete: discard it and run the same command again")
			}
			return nil
		}
		dest, n, err := saveArchive(a, out, runID, format)
		bar.end(cli, n, err)
		if err != nil {
			return archiveFailed(ctx, err, n, "nothing was written to "+out+": run the same command again")
		}
		if cli.human {
			_, err := fmt.Fprintf(cli.stdout, "wrote %d bytes to %s (%s of run %s)\n", n, dest, format, runID)
			return err
		}
		return json.NewEncoder(cli.stdout).Encode(archiveResult{RunID: runID, Format: format, Path: dest, SizeBytes: n})
	}
}

// archiveFailed says what became of an archive cut after n bytes.
func archiveFailed(ctx context.Context, err error, n int64, next string) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	} else {
		err = fmt.Errorf("the archive stopped after %d bytes: %w", n, err)
	}
	return withNext(err, next)
}

// saveArchive writes the archive next to out and renames it into place
// once whole, so a failed download leaves nothing; a directory out gets
// the server's file name.
func saveArchive(a *client.Archive, out, runID, format string) (string, int64, error) {
	if fi, err := os.Stat(out); err == nil && fi.IsDir() || strings.HasSuffix(out, string(filepath.Separator)) {
		name := filepath.Base(a.Filename)
		if a.Filename == "" || name == "." || name == ".." || name == string(filepath.Separator) {
			name = "run-" + strings.NewReplacer("/", "_", ":", "_").Replace(runID) + "." + format
		}
		out = filepath.Join(out, name)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*")
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", out, err)
	}
	n, err := io.Copy(tmp, a)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", n, err
	}
	return out, n, nil
}

// downloadProgress shows the bytes of a download of unknown length on a
// terminal, once there are barMinSize of them.
type downloadProgress struct {
	progress *progress // nil: not drawn
}

// downloadBar is a progress line on stderr when it is a terminal.
func (cli *cliRun) downloadBar() *downloadProgress {
	d := &downloadProgress{}
	if cli.stderrTTY {
		d.progress = &progress{w: cli.stderr, now: time.Now}
		cli.mu.Lock()
		cli.bar = d.progress
		cli.mu.Unlock()
	}
	return d
}

// received is the archive's progress callback.
func (d *downloadProgress) received(n, total int64) {
	if n >= barMinSize {
		d.progress.update(phaseDownloading, n, total)
	}
}

// end draws the final count of a download that got far enough to show
// one, whole or not, and moves past the line.
func (d *downloadProgress) end(cli *cliRun, n int64, err error) {
	if n >= barMinSize && err == nil {
		d.progress.final(phaseDownloading, n)
	}
	cli.endBar(d.progress)
}

// runRevert is one agentfs run revert, kept to say how to go on.
type runRevert struct {
	run, key string
	force    bool
}

// command is the agentfs run revert that goes on with this revert (the
// same key waits for the same batch).
func (rv runRevert) command() string {
	words := []string{"agentfs run revert", shellQuote(rv.run)}
	if rv.force {
		words = append(words, "--force")
	}
	if rv.key != "" {
		words = append(words, "--key", shellQuote(rv.key))
	}
	return strings.Join(append(words, "--wait"), " ")
}

// runRevertCommand is agentfs run revert: undoing a run, as a batch.
func runRevertCommand() *command {
	return clientCommand(command{
		name:    "run revert",
		summary: "undo what the run did, as a batch",
		usage:   "agentfs run revert RUN_ID [--force] [--wait] [--key KEY]",
		help: `Undoes what the run did and prints the batch that does it, one undo item per
file, the most recently changed first: a file it created is deleted, one it
replaced or reverted gets back the version it had before the run, one it
deleted is restored, one it moved goes back. Nothing is lost: the undone
content stays in each file's versions, and a deleted file can be restored.
The revert's own changes carry AGENTFS_RUN_ID, so a revert can be reverted
in turn (agentfs run revert THAT_RUN_ID).

A file another run changed after this one is left as it is: its item fails
with 409 CHANGED_SINCE_RUN. --force undoes it anyway, the later change
included.

The batch is printed as JSON, or as one line on a terminal. It runs in the
background: --wait waits until every item has run, prints each item's
outcome on stderr, and exits 1 if any failed. The revert
is sent with one Idempotency-Key (--key to choose it): the same command with
the same key prints the same batch instead of reverting twice.

Examples:
  agentfs run revert run-1 --wait
  agentfs run revert run-1 --force --wait --key undo-run-1
`}, false, runRevertFlags)
}

func runRevertFlags(fs *flag.FlagSet) verbFunc {
	force := fs.Bool("force", false, "undo also the files another run changed after this one (CHANGED_SINCE_RUN without it)")
	wait := fs.Bool("wait", false, "wait until every item has run and print each outcome; exit 1 if any failed")
	key := keyFlag(fs, "revert")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("run revert needs one RUN_ID")
		}
		rv := runRevert{run: args[0], key: cmp.Or(*key, client.NewIdempotencyKey()), force: *force}
		b, err := cli.client.RevertRun(ctx, rv.run, client.RevertRunOptions{Force: rv.force, IdempotencyKey: rv.key})
		var p *client.Problem
		switch {
		case client.ErrorCode(err) == "IDEMPOTENCY_CONFLICT":
			return withNext(err, fmt.Sprintf("the key %s was used for another request (with or without --force is another revert): "+
				"run the command again with another --key, or without --key", rv.key))
		case errors.As(err, &p):
			return unknownRun(err, rv.run)
		case err != nil:
			// The answer is unknown; the key makes asking again safe.
			return withNext(err, "the revert may have been admitted: "+rv.command()+" finds out, and never reverts twice")
		}
		if *wait && !b.Terminal() {
			done, err := cli.client.WaitBatch(ctx, b.ID)
			if err != nil {
				return withNext(err, fmt.Sprintf("the revert goes on in the background as %s: %s waits for it", b.ID, rv.command()))
			}
			b = done
		}
		if err := cli.printRevert(b); err != nil {
			return err
		}
		if !*wait {
			fmt.Fprintf(cli.stderr, "reverting %s in the background as %s; to wait for it: %s\n", rv.run, b.ID, rv.command())
			return nil
		}
		return cli.revertOutcome(b, rv)
	}
}

// printRevert prints a revert's batch as JSON, or as one line on a
// terminal (the items follow on stderr with --wait).
func (cli *cliRun) printRevert(b *client.Batch) error {
	if !cli.human {
		return cli.printBatch(b)
	}
	n := b.Counts
	line := fmt.Sprintf("%s %s: %d undo items (%d succeeded, %d failed, %d pending", b.ID, b.Status, n.Total,
		n.Succeeded, n.Failed, n.Pending)
	if n.Canceled > 0 {
		line += fmt.Sprintf(", %d canceled", n.Canceled)
	}
	_, err := fmt.Fprintln(cli.stdout, line+")")
	return err
}

// revertOutcome prints what each item of an ended revert did on stderr,
// and fails the command if any item failed, saying what --force would do
// about the files changed since the run.
func (cli *cliRun) revertOutcome(b *client.Batch, rv runRevert) error {
	changed := 0
	for _, it := range b.Items {
		path := "?"
		if it.Path != nil {
			path = *it.Path
		}
		line := fmt.Sprintf("item %d %s: %s", it.Index, path, it.Status)
		switch {
		case it.Status == client.BatchItemSucceeded && it.File != nil && it.File.DeletedAt != nil:
			line = fmt.Sprintf("item %d %s: undone (deleted, restorable: %s)", it.Index, path, it.File.ID)
		case it.Status == client.BatchItemSucceeded && it.File != nil:
			line = fmt.Sprintf("item %d %s: undone (version %d, %s)", it.Index, it.File.Path, it.File.Version, it.File.ID)
		case it.Error != nil:
			line += fmt.Sprintf(": %d %s: %s", it.Error.Status, it.Error.Code, cmp.Or(it.Error.Detail, it.Error.Title))
			if it.Error.Code == "CHANGED_SINCE_RUN" {
				changed++
			}
		}
		fmt.Fprintln(cli.stderr, line)
	}
	failed := len(b.FailedItems())
	switch {
	case b.Status == client.BatchCanceled:
		return fmt.Errorf("revert %s was canceled: %d of %d items did not run", b.ID, b.Counts.Canceled, b.Counts.Total)
	case failed == 0:
		return nil
	}
	err := fmt.Errorf("revert %s %s: %d of %d items failed", b.ID, b.Status, failed, b.Counts.Total)
	if changed > 0 && !rv.force {
		force := runRevert{run: rv.run, force: true}
		return withNext(err, fmt.Sprintf("the files another run changed after run %s (%d) were left as they are; "+
			"to undo them anyway (the later changes too; they stay in the files' versions): %s", rv.run, changed, force.command()))
	}
	return err
}
