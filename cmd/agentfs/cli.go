package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentfs/agentfs/client"
)

// The client verbs talk to a running server through package client, so
// they retry exactly as the SDK does.

// defaultURL is where `make run` serves.
const defaultURL = "http://127.0.0.1:8080"

const clientEnvHelp = `
Configuration: AGENTFS_URL (default ` + defaultURL + `), AGENTFS_TOKEN, and
AGENTFS_AGENT_ID / AGENTFS_RUN_ID, sent as X-Agent-ID / X-Run-ID.
Output is JSON when stdout is not a terminal; a failure prints the problem
(with its code) on stderr and exits 1.
`

// clientVerb is one CLI verb that talks to the API.
type clientVerb struct {
	usage string // synopsis, description and example
	// anonymous verbs need no AGENTFS_TOKEN.
	anonymous bool
	// flags declares the verb's flags; the returned func runs it.
	flags func(fs *flag.FlagSet) func(ctx context.Context, cli *cliRun, args []string) error
}

var clientVerbs = map[string]clientVerb{
	"put": {usage: `Usage: agentfs put LOCAL REMOTE_PATH [--replace] [--content-type TYPE] [--if-match ETAG] [--key KEY] [--threshold SIZE]

Uploads the local file LOCAL (or - for stdin) to REMOTE_PATH and prints the
file. Without --replace a live file at REMOTE_PATH is 409 PATH_EXISTS; with
it that file is replaced and keeps its id and url. The upload is retried
with one Idempotency-Key (--key to choose it, so that running the same
command again replays instead of writing twice). Stdin is sent once.
A file of --threshold or more (default 64MiB), or one the server finds too
large for one request, goes through a resumable upload session, as with
agentfs upload; a progress bar shows on stderr when it is a terminal.

Example:
  agentfs put ./summary.md reports/summary.md --replace
`, flags: putFlags},
	"upload": {usage: `Usage: agentfs upload LOCAL REMOTE_PATH [--replace] [--parallel N] [--content-type TYPE] [--if-match ETAG] [--sha256 HEX]

Uploads the local file LOCAL to REMOTE_PATH through an upload session and
prints the file: its SHA-256 is computed first, then the server chooses the
part size and --parallel parts are sent at once, each retried whole. An
interrupted upload is resumed by running the same command again: the live
session comes back and only the parts it lacks are sent. A progress bar
shows on stderr when it is a terminal.

Example:
  agentfs upload ./train.parquet datasets/train.parquet --replace --parallel 8
`, flags: uploadFlags},
	"batch": {usage: `Usage: agentfs batch FILE.json [--wait] [--key KEY]

Admits the operations in FILE.json (or - for stdin) as one batch and prints
the batch as JSON. FILE.json holds {"operations":[...]}, each one of
  {"op":"put","path":P,"content":C,"encoding":"utf8"|"base64","content_type":T,"if_exists":"error"|"replace","idempotency_key":K}
  {"op":"delete","file_id":ID}   {"op":"restore","file_id":ID}
  {"op":"copy","file_id":ID,"path":P,"if_exists":"error"|"replace"}
The whole batch is validated first; then its items run in order in the
background. --wait waits until every item has run; the command then exits 1
if any failed, after printing each failed item's code on stderr. The batch
is sent with one Idempotency-Key (--key to choose it: the same command with
the same key returns the same batch instead of running it twice).

Example:
  agentfs batch ops.json --wait --key nightly-2025-01-02
`, flags: batchFlags},
	"get": {usage: `Usage: agentfs get ID [LOCAL]
       agentfs get --path REMOTE_PATH [LOCAL]

Downloads a live file's content to LOCAL (a file or a directory), or to
stdout without LOCAL or with -. Written to LOCAL, the content's SHA-256 is
checked before the file appears, and the file's metadata is printed.

Examples:
  agentfs get file_01jd8x2m4k9q7v3t5r6w8y0z1a ./summary.md
  agentfs get --path reports/summary.md > summary.md
`, flags: getFlags},
	"ls": {usage: `Usage: agentfs ls [--run RUN_ID] [--agent AGENT_ID] [--prefix PREFIX] [--path PATH] [--deleted] [--limit N]

Lists files, newest first, through every page: a JSON array when stdout is
not a terminal, a table on one. --run and --agent match the X-Run-ID and
X-Agent-ID of the request that created each file.

Example:
  agentfs ls --run run-1 --prefix reports/
`, flags: lsFlags},
	"rm": {usage: `Usage: agentfs rm ID [--if-match ETAG] [--key KEY]

Deletes a file (soft: it can be restored until its purge_after) and prints
it. Deleting a deleted file again is safe.

Example:
  agentfs rm file_01jd8x2m4k9q7v3t5r6w8y0z1a
`, flags: rmFlags},
	"restore": {usage: `Usage: agentfs restore ID [--key KEY]

Undoes a delete and prints the file. 409 PATH_EXISTS means another live
file took its path meanwhile.

Example:
  agentfs restore file_01jd8x2m4k9q7v3t5r6w8y0z1a
`, flags: restoreFlags},
	"protocol": {anonymous: true, usage: `Usage: agentfs protocol

Prints what the server guarantees: its idempotency rules, retry policy and
limits (GET /v1/protocol).

Example:
  agentfs protocol
`, flags: protocolFlags},
}

// cliRun is what a running client verb works with.
type cliRun struct {
	name   string
	client *client.Client
	stdout io.Writer
	stderr io.Writer
	// human: stdout is a terminal, so print tables and short lines.
	human bool
}

// clientCmd runs one client verb.
func clientCmd(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	verb := clientVerbs[name]
	fs := flag.NewFlagSet("agentfs "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, verb.usage)
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		if flags.Len() > 0 {
			fmt.Fprint(stderr, "\nFlags:\n", flags.String())
		}
		fmt.Fprint(stderr, clientEnvHelp)
	}
	runVerb := verb.flags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	c, err := newCLIClient(getenv, verb.anonymous)
	if err != nil {
		return err
	}
	cli := &cliRun{name: name, client: c, stdout: stdout, stderr: stderr, human: isTerminal(stdout)}
	err = runVerb(ctx, cli, pos)
	if errors.Is(err, errUsage) {
		fs.Usage()
	}
	return cli.report(err)
}

// parseInterleaved parses flags that may come after positional arguments
// (agentfs put a.txt reports/a.txt --replace) and returns the positional
// ones. Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// newCLIClient configures the client from AGENTFS_* variables.
func newCLIClient(getenv func(string) string, anonymous bool) (*client.Client, error) {
	base := getenv("AGENTFS_URL")
	if base == "" {
		base = defaultURL
	}
	token := getenv("AGENTFS_TOKEN")
	if token == "" && !anonymous {
		return nil, errors.New("AGENTFS_TOKEN is not set: create one with `agentfs token create --subject NAME`")
	}
	var opts []client.Option
	if id := getenv("AGENTFS_AGENT_ID"); id != "" {
		opts = append(opts, client.WithAgentID(id))
	}
	if id := getenv("AGENTFS_RUN_ID"); id != "" {
		opts = append(opts, client.WithRunID(id))
	}
	return client.New(base, token, opts...)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// problemError is a verb's failure whose problem was already printed on
// stderr; main adds one summary line.
type problemError struct {
	verb string
	p    *client.Problem
}

func (e *problemError) Error() string {
	return fmt.Sprintf("%s failed: %d %s", e.verb, e.p.Status, e.p.Code)
}

func (e *problemError) Unwrap() error { return e.p }

// report prints a problem on stderr: JSON, or readable lines on a terminal.
func (cli *cliRun) report(err error) error {
	var p *client.Problem
	if !errors.As(err, &p) {
		return err
	}
	if isTerminal(cli.stderr) {
		fmt.Fprintf(cli.stderr, "agentfs %s: %d %s: %s\n", cli.name, p.Status, p.Code, cmpOr(p.Detail, p.Title))
		for _, fe := range p.Errors {
			fmt.Fprintf(cli.stderr, "  %s: %s\n", fe.Field, fe.Message)
		}
		if p.ExistingFileID != "" {
			fmt.Fprintf(cli.stderr, "  existing_file_id: %s\n", p.ExistingFileID)
		}
		fmt.Fprintf(cli.stderr, "  request_id: %s\n", p.RequestID)
	} else {
		_ = json.NewEncoder(cli.stderr).Encode(p)
	}
	return &problemError{verb: cli.name, p: p}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// usagef is a wrong invocation of a verb: its usage is printed.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

func putFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	replace := fs.Bool("replace", false, "replace the live file at REMOTE_PATH (keeps its id and url)")
	contentType := fs.String("content-type", "", "the file's media type (default: from LOCAL's extension)")
	ifMatch := fs.String("if-match", "", "replace only while the file has this ETag (needs --replace)")
	key := fs.String("key", "", "Idempotency-Key of this upload (default: a new random one)")
	threshold := sizeFlag(fs, "threshold", client.DefaultSessionThreshold, "send a file of this `SIZE` or more (bytes, or with KiB, MiB, GiB) through an upload session")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("put needs LOCAL and REMOTE_PATH")
		}
		local, remote := args[0], args[1]
		var (
			f   *client.File
			err error
		)
		if local == "-" {
			f, err = cli.client.PutFile(ctx, remote, os.Stdin, client.PutOptions{
				Replace: *replace, ContentType: *contentType, IfMatch: *ifMatch, IdempotencyKey: *key,
			})
		} else {
			opts := client.PutPathOptions{Threshold: *threshold, IdempotencyKey: *key, UploadOptions: client.UploadOptions{
				Replace: *replace, ContentType: cmpOr(*contentType, mime.TypeByExtension(filepath.Ext(local))), IfMatch: *ifMatch,
			}}
			bar := cli.progressBar(&opts.UploadOptions)
			f, err = cli.client.PutPath(ctx, local, remote, opts)
			bar.end()
		}
		if err != nil {
			return err
		}
		return cli.printFile(f, fmt.Sprintf("%s  %s  %d bytes  version %d", f.ID, f.Path, f.SizeBytes, f.Version))
	}
}

func getFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	byPath := fs.String("path", "", "download the live file at this path instead of by ID")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		var (
			f     *client.File
			local string
			err   error
		)
		switch {
		case *byPath != "" && len(args) <= 1:
			if f, err = liveFileAt(ctx, cli.client, *byPath); err != nil {
				return err
			}
			local = strings.Join(args, "")
		case *byPath == "" && (len(args) == 1 || len(args) == 2):
			if f, err = cli.client.File(ctx, args[0]); err != nil {
				return err
			}
			local = strings.Join(args[1:], "")
		default:
			return usagef("get needs ID or --path REMOTE_PATH, and at most one LOCAL")
		}
		content, err := cli.client.FileContent(ctx, f.ID, client.ContentOptions{})
		if err != nil {
			return err
		}
		defer content.Close()
		if local == "" || local == "-" {
			_, err := copyVerified(cli.stdout, content)
			return err
		}
		dest, n, err := download(content, local, f)
		if err != nil {
			return err
		}
		if content.ETag != f.ETag { // replaced while we looked: show what was written
			if f, err = cli.client.File(ctx, f.ID); err != nil {
				return err
			}
		}
		return cli.printFile(f, fmt.Sprintf("wrote %d bytes to %s (%s  %s)", n, dest, f.ID, f.Path))
	}
}

// liveFileAt finds the live file that holds path.
func liveFileAt(ctx context.Context, c *client.Client, p string) (*client.File, error) {
	l, err := c.ListFiles(ctx, client.ListOptions{Path: p, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(l.Data) == 0 {
		return nil, fmt.Errorf("no live file holds path %q", p)
	}
	return &l.Data[0], nil
}

// copyVerified copies the whole content to w and checks it against the
// SHA-256 the server announced.
func copyVerified(w io.Writer, content *client.Content) (int64, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), content)
	if err != nil {
		return n, fmt.Errorf("read content: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); content.SHA256 != "" && got != content.SHA256 {
		return n, fmt.Errorf("the content received has SHA-256 %s, the server announced %s", got, content.SHA256)
	}
	return n, nil
}

// download writes the content next to local and renames it into place
// once it is whole and verified, so a failed download leaves nothing.
func download(content *client.Content, local string, f *client.File) (string, int64, error) {
	if fi, err := os.Stat(local); err == nil && fi.IsDir() || strings.HasSuffix(local, string(filepath.Separator)) {
		local = filepath.Join(local, path.Base(f.Path))
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".part-*")
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", local, err)
	}
	n, err := copyVerified(tmp, content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), local)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", 0, err
	}
	return local, n, nil
}

func lsFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	var opts client.ListOptions
	fs.StringVar(&opts.RunID, "run", "", "only files created by this X-Run-ID")
	fs.StringVar(&opts.AgentID, "agent", "", "only files created by this X-Agent-ID")
	fs.StringVar(&opts.Prefix, "prefix", "", "only paths starting with this")
	fs.StringVar(&opts.Path, "path", "", "only this exact path")
	fs.BoolVar(&opts.IncludeDeleted, "deleted", false, "include deleted files not purged yet")
	limit := fs.Int("limit", 0, "at most this many files (default: all)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 0 || *limit < 0 {
			return usagef("ls takes flags only")
		}
		opts.Limit = 1000
		if *limit > 0 {
			opts.Limit = min(*limit, 1000)
		}
		list := fileLister(cli)
		n := 0
		for f, err := range cli.client.AllFiles(ctx, opts) {
			if err != nil {
				return err
			}
			if err := list.add(f); err != nil {
				return err
			}
			if n++; n == *limit {
				break
			}
		}
		return list.end()
	}
}

// lister prints files as they come: a JSON array, or a table.
type lister struct {
	add func(*client.File) error
	end func() error
}

func fileLister(cli *cliRun) lister {
	if !cli.human {
		n := 0
		return lister{
			add: func(f *client.File) error {
				b, err := json.Marshal(f)
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
				if n == 0 {
					_, err := fmt.Fprintln(cli.stdout, "[]")
					return err
				}
				_, err := fmt.Fprintln(cli.stdout, "\n]")
				return err
			},
		}
	}
	tw := tabwriter.NewWriter(cli.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSIZE\tVERSION\tUPDATED\tPATH")
	return lister{
		add: func(f *client.File) error {
			p := f.Path
			if f.DeletedAt != nil {
				p += "  (deleted)"
			}
			_, err := fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", f.ID, f.SizeBytes, f.Version, f.UpdatedAt.Local().Format(time.DateTime), p)
			return err
		},
		end: tw.Flush,
	}
}

func rmFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	ifMatch := fs.String("if-match", "", "delete only while the file has this ETag")
	key := fs.String("key", "", "Idempotency-Key of this delete (default: a new random one)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("rm needs one file ID")
		}
		f, err := cli.client.DeleteFile(ctx, args[0], client.DeleteOptions{IfMatch: *ifMatch, IdempotencyKey: *key})
		if err != nil {
			return err
		}
		line := fmt.Sprintf("deleted %s  %s", f.ID, f.Path)
		if f.PurgeAfter != nil {
			line += "; restorable until " + f.PurgeAfter.Local().Format(time.DateTime)
		}
		return cli.printFile(f, line)
	}
}

func restoreFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	key := fs.String("key", "", "Idempotency-Key of this restore (default: a new random one)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("restore needs one file ID")
		}
		f, err := cli.client.RestoreFile(ctx, args[0], client.RestoreOptions{IdempotencyKey: *key})
		if err != nil {
			return err
		}
		return cli.printFile(f, fmt.Sprintf("restored %s  %s", f.ID, f.Path))
	}
}

func protocolFlags(*flag.FlagSet) func(context.Context, *cliRun, []string) error {
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 0 {
			return usagef("protocol takes no arguments")
		}
		p, err := cli.client.Protocol(ctx)
		if err != nil {
			return err
		}
		if !cli.human {
			_, err := fmt.Fprintf(cli.stdout, "%s\n", strings.TrimSpace(string(p.Raw)))
			return err
		}
		var v any
		if err := json.Unmarshal(p.Raw, &v); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		_, err = fmt.Fprintf(cli.stdout, "%s\n", b)
		return err
	}
}

// printFile prints a file as JSON, or as line on a terminal.
func (cli *cliRun) printFile(f *client.File, line string) error {
	if cli.human {
		_, err := fmt.Fprintln(cli.stdout, line)
		return err
	}
	return json.NewEncoder(cli.stdout).Encode(f)
}
