package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentfs/agentfs/client"
)

// versionsCommand is agentfs versions: a file's versions, newest first.
func versionsCommand() *command {
	return clientCommand(command{
		name:    "versions",
		summary: "list a file's versions, newest first",
		usage:   "agentfs versions FILE [--limit N]",
		help: `Lists the versions of a file, newest first, through every page: a table on a
terminal, a JSON array otherwise (as ls prints files). Every write that
changed the bytes or the content type made one; the current one is marked.
FILE is a file id or the path of a live file. The versions of a deleted
file stay listed (by its id) until it is purged. agentfs get reads the
current content; agentfs revert brings an old version back.

Examples:
  agentfs versions reports/summary.md
  agentfs versions file_01jd8x2m4k9q7v3t5r6w8y0z1a
`}, false, versionsFlags)
}

func versionsFlags(fs *flag.FlagSet) verbFunc {
	limit := fs.Int("limit", 0, "at most `N` versions (default: all)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		id, err := cli.oneFile(ctx, "versions", args, *limit >= 0, cli.fileID)
		if err != nil {
			return err
		}
		opts := client.VersionListOptions{Limit: pageSize(*limit)}
		out := cli.lister("VERSION\tSIZE\tCREATED\tSHA256\tRUN\t", func(v any) string {
			fv := v.(*client.FileVersion)
			current := ""
			if fv.Current {
				current = "current"
			}
			return fmt.Sprintf("%d\t%d\t%s\t%s\t%s\t%s", fv.Version, fv.SizeBytes, fv.CreatedAt.Local().Format(time.DateTime),
				shortHash(fv.SHA256), deref(fv.RunID), current)
		})
		return listAll(cli.client.AllVersions(ctx, id, opts), *limit, out)
	}
}

// rows prints a listing as it comes: a JSON array, or a table on a
// terminal.
type rows struct {
	add func(v any) error
	end func() error
}

// lister prints a listing: a JSON array whose elements stand one to a
// line (as ls prints files), or on a terminal a table with this header
// whose rows line renders.
func (cli *cliRun) lister(header string, line func(v any) string) rows {
	if !cli.human {
		n := 0
		return rows{
			add: func(v any) error {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				sep := ",\n"
				if n++; n == 1 {
					sep = "[\n"
				}
				_, err = fmt.Fprintf(cli.stdout, "%s%s", sep, b)
				return err
			},
			end: func() error {
				end := "\n]"
				if n == 0 {
					end = "[]"
				}
				_, err := fmt.Fprintln(cli.stdout, end)
				return err
			},
		}
	}
	tw := tabwriter.NewWriter(cli.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.TrimRight(header, "\t"))
	return rows{
		add: func(v any) error {
			_, err := fmt.Fprintln(tw, strings.TrimRight(line(v), "\t"))
			return err
		},
		end: tw.Flush,
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// revertCommand is agentfs revert: an old version back, as a new one.
func revertCommand() *command {
	return clientCommand(command{
		name:    "revert",
		summary: "make an old version the current content, as a new version",
		usage:   "agentfs revert FILE N [--if-match ETAG] [--key KEY]",
		help: `Makes version N of a file its current content again, as a new version (no
bytes are copied), and prints the file. FILE is a file id or the path of a
live file. Reverting to the content the file already has changes nothing.
With --if-match, only while the current content has that etag, so a write
made meanwhile is not undone unseen. A deleted file must be restored first
(agentfs restore FILE).

Examples:
  agentfs revert reports/summary.md 2
  agentfs revert file_01jd8x2m4k9q7v3t5r6w8y0z1a 2
`}, false, revertFlags)
}

func revertFlags(fs *flag.FlagSet) verbFunc {
	ifMatch, key := guardFlags(fs, "revert only while the current content has this `ETAG`", "revert")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("revert needs FILE (a file id or a path) and a version number N")
		}
		n, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || n < 1 {
			return usagef("revert: version %q is not a version number (1 or more; agentfs versions %s lists them)", args[1], shellQuote(args[0]))
		}
		id, err := cli.fileID(ctx, args[0])
		if err != nil {
			return err
		}
		f, err := cli.client.Revert(ctx, id, n, client.RevertOptions{IfMatch: *ifMatch, IdempotencyKey: *key})
		switch code := client.ErrorCode(err); code {
		case "":
		case "NOT_FOUND":
			return withNext(err, fmt.Sprintf("agentfs versions %s lists the versions kept; a deleted file must be restored first (agentfs restore %s)", id, id))
		case "PRECONDITION_FAILED":
			return withNext(err, fmt.Sprintf("the file changed since %s: agentfs versions %s shows what it holds now", *ifMatch, id))
		default:
			return err
		}
		return cli.printFile(f, fmt.Sprintf("%s  %s  version %d now holds the content of version %d", f.ID, f.Path, f.Version, n))
	}
}

// mvCommand is agentfs mv: another path for a file, which keeps its id.
func mvCommand() *command {
	return clientCommand(command{
		name:    "mv",
		summary: "give a file another path (keeps its id, url and history)",
		usage:   "agentfs mv FILE NEWPATH [--replace] [--if-match ETAG] [--key KEY]",
		help: `Moves a file to NEWPATH and prints it: it keeps its id, url, version and
history, and no bytes are copied. FILE is a file id or the path of a live
file; a NEWPATH ending with / is a folder, the file keeps its name in it.
Without --replace a live file at NEWPATH is 409 PATH_EXISTS; with it that
file is deleted (restorable, history kept) in the same step.

Examples:
  agentfs mv notes/draft.md notes/final.md
  agentfs mv file_01jd8x2m4k9q7v3t5r6w8y0z1a archive/
`}, false, mvFlags)
}

func mvFlags(fs *flag.FlagSet) verbFunc {
	replace := fs.Bool("replace", false, "delete a live file at NEWPATH (restorable) instead of failing")
	ifMatch, key := guardFlags(fs, "move only while the file has this `ETAG`", "move")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("mv needs FILE (a file id or a path) and NEWPATH")
		}
		id, dest, err := cli.moveTarget(ctx, args[0], remotePathArg(args[1]))
		if err != nil {
			return err
		}
		f, err := cli.client.Move(ctx, id, dest, client.MoveOptions{Replace: *replace, IfMatch: *ifMatch, IdempotencyKey: *key})
		var p *client.Problem
		if errors.As(err, &p) && p.Code == "PATH_EXISTS" {
			return withNext(err, fmt.Sprintf("%s holds %s: run the same command with --replace to delete it (restorable) and move there",
				cmp.Or(p.ExistingFileID, "a live file"), dest))
		}
		if err != nil {
			return err
		}
		return cli.printFile(f, fmt.Sprintf("%s  moved to %s", f.ID, f.Path))
	}
}

// moveTarget is the id of the file to move and its new path: a folder
// (ending with '/', or empty: the top) keeps the file's name.
func (cli *cliRun) moveTarget(ctx context.Context, arg, dest string) (string, string, error) {
	if dest != "" && !strings.HasSuffix(dest, "/") {
		id, err := cli.fileID(ctx, arg)
		return id, dest, err
	}
	src, err := cli.resolve(ctx, arg)
	if err != nil {
		return "", "", err
	}
	return src.ID, dest + path.Base(src.Path), nil
}

// shareCommand is agentfs share: a link for someone without a token.
func shareCommand() *command {
	return clientCommand(command{
		name:    "share",
		summary: "print a share link to a file, for someone without a token",
		usage:   "agentfs share FILE [--expires-in DURATION] [--version N] [--json] [--key KEY]",
		help: `Creates a share link to a file and prints its URL, which serves the content
without a token until the link expires (--expires-in, 1m to 7d, default 1h)
or is revoked. FILE is a file id or the path of a live file. The URL is
shown only now: keep it. --version N shares that version; without it the
link serves whatever the content is when opened. --json prints the whole
link instead (also when piped), with its id (lnk_...), which
DELETE /v1/links/{id} revokes.

Examples:
  agentfs share reports/summary.md --expires-in 24h
  agentfs share file_01jd8x2m4k9q7v3t5r6w8y0z1a --json
`}, false, shareFlags)
}

func shareFlags(fs *flag.FlagSet) verbFunc {
	var expiresIn durationValue
	fs.Var(&expiresIn, "expires-in", "how long the link works, a `DURATION` from 1m to 7d (default 1h)")
	version := fs.Int64("version", 0, "share version `N` only (default: the current content, whatever it is)")
	key := keyFlag(fs, "link")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		id, err := cli.oneFile(ctx, "share", args, *version >= 0, cli.fileID)
		if err != nil {
			return err
		}
		l, err := cli.client.CreateLink(ctx, id, client.LinkOptions{
			ExpiresIn: time.Duration(expiresIn), Version: *version, IdempotencyKey: *key})
		var p *client.Problem
		if errors.As(err, &p) && p.Code == "VALIDATION_FAILED" && expiresIn != 0 {
			return withNext(err, "--expires-in takes 1m to 7d")
		}
		if err != nil {
			return err
		}
		if cli.forcedJSON || l.URL == nil {
			indent := ""
			if isTerminal(cli.stdout) {
				indent = "  "
			}
			return cli.printJSON(l, indent)
		}
		_, err = fmt.Fprintln(cli.stdout, *l.URL)
		return err
	}
}

// expireCommand is agentfs expire: an expiry set from now, or removed.
func expireCommand() *command {
	return clientCommand(command{
		name:    "expire",
		summary: "make a file expire after a while, or never",
		usage: `agentfs expire FILE DURATION [--if-match ETAG] [--key KEY]
agentfs expire FILE --never`,
		help: `Makes a file expire DURATION from now (60s to 365d: 90m, 24h, 7d, 1d12h, or
seconds), or never with --never, and prints it. FILE is a file id or the
path of a live file. From then on the file counts as deleted (its content
is gone from reads and listings, its path is free), and it can be restored
until it is purged. agentfs rm deletes it now; put --expires-in sets an
expiry at upload.

Examples:
  agentfs expire scratch/notes.txt 7d
  agentfs expire file_01jd8x2m4k9q7v3t5r6w8y0z1a --never
`}, false, expireFlags)
}

func expireFlags(fs *flag.FlagSet) verbFunc {
	never := fs.Bool("never", false, "remove the file's expiry")
	ifMatch, key := guardFlags(fs, "change it only while the file has this `ETAG`", "change")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		var at *time.Time
		switch {
		case *never && len(args) == 1:
		case !*never && len(args) == 2:
			d, err := parseHumanDuration(args[1])
			if err != nil {
				return usagef("expire: %v", err)
			}
			t := time.Now().Add(d)
			at = &t
		default:
			return usagef("expire needs FILE (a file id or a path) and a DURATION, or --never")
		}
		id, err := cli.fileID(ctx, args[0])
		if err != nil {
			return err
		}
		f, err := cli.client.SetExpiry(ctx, id, at, client.ExpiryOptions{IfMatch: *ifMatch, IdempotencyKey: *key})
		if client.ErrorCode(err) == "VALIDATION_FAILED" {
			return withNext(err, fmt.Sprintf("DURATION takes 60s to 365d; agentfs rm %s deletes it now", shellQuote(args[0])))
		}
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s  %s  never expires", f.ID, f.Path)
		if f.ExpiresAt != nil {
			line = fmt.Sprintf("%s  %s  expires %s", f.ID, f.Path, f.ExpiresAt.Local().Format(time.DateTime))
		}
		return cli.printFile(f, line)
	}
}

// durationValue is a flag of a DURATION (see parseHumanDuration); zero means
// unset.
type durationValue time.Duration

func (v *durationValue) String() string {
	if *v == 0 {
		return ""
	}
	return time.Duration(*v).String()
}

func (v *durationValue) Set(s string) error {
	d, err := parseHumanDuration(s)
	if err != nil {
		return err
	}
	*v = durationValue(d)
	return nil
}

// maxDurationDays keeps a count of days far from overflowing a
// time.Duration; the server's own bounds are much smaller.
const maxDurationDays = 100 * 365

// parseHumanDuration reads a positive DURATION as people write it: a Go
// duration (90m, 1h30m, 45s), days in front of one (7d, 1d12h), or a
// whole number of seconds (3600).
func parseHumanDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("duration %q: want a positive duration such as 90m, 24h, 7d, 1d12h or 3600 (seconds)", s)
	s = strings.TrimSpace(s)
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, bad
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 1 || n > maxDurationDays*24*3600 {
			return 0, bad
		}
		return time.Duration(n) * time.Second, nil
	}
	var days int64
	if dstr, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseInt(dstr, 10, 64)
		if err != nil || n < 0 || n > maxDurationDays || rest != "" && (rest[0] < '0' || rest[0] > '9') {
			return 0, bad
		}
		days, s = n, rest
	}
	d := time.Duration(days) * 24 * time.Hour
	if s != "" {
		more, err := time.ParseDuration(s)
		if err != nil || more < 0 || more > time.Duration(maxDurationDays)*24*time.Hour {
			return 0, bad
		}
		d += more
	}
	if d <= 0 {
		return 0, bad
	}
	return d, nil
}
