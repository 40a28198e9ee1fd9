package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/client"
)

// The client verbs talk to a running server through package client, so
// they retry exactly as the SDK does.

// defaultURL is where `make run` serves.
const defaultURL = "http://127.0.0.1:8080"

// clientEnvHelp ends the help of every client verb.
const clientEnvHelp = `Configuration: AGENTFS_URL (default ` + defaultURL + `), AGENTFS_TOKEN, and
AGENTFS_AGENT_ID / AGENTFS_RUN_ID, sent as X-Agent-ID / X-Run-ID.
AGENTFS_MAX_ATTEMPTS (default 8; 1 turns retries off) bounds the attempts of
each request; every wait between two attempts is announced on stderr.
Output is JSON when stdout is not a terminal; a failure prints the problem
(with its code) on stderr and exits 1.
`

// verbFunc runs one client verb.
type verbFunc func(ctx context.Context, cli *cliRun, args []string) error

// clientCommand makes a client verb a command: it parses its flags (with
// --json and --output), then gets a client configured from the
// environment. A write the server answered as a replay says so on stderr.
func clientCommand(c command, anonymous bool, setup func(fs *flag.FlagSet) verbFunc) *command {
	c.footer = clientEnvHelp
	c.output = true
	c.flags = func(fs *flag.FlagSet) action {
		runVerb := setup(fs)
		return func(ctx context.Context, p *proc, args []string) error {
			cli, err := newCLIRun(c.name, p, anonymous)
			if err != nil {
				return err
			}
			err = runVerb(client.WithAnswer(ctx, &cli.answer), cli, args)
			if err == nil {
				cli.noteReplay()
			}
			return cli.report(err)
		}
	}
	return &c
}

// clientCommands are the verbs that talk to a running server through
// package client, so they retry exactly as the SDK does.
func clientCommands() []*command {
	fork := forkCommand()
	fork.subs = []*command{forkLsCommand()}
	return []*command{
		putCommand(),
		uploadCommand(),
		batchCommand(),
		getCommand(),
		catCommand(),
		cpCommand(),
		syncCommand(),
		lsCommand(),
		grepCommand(),
		mountCommand(),
		rmCommand(),
		restoreCommand(),
		protocolCommand(),
		// Points in time: checkpoints and diffs (restore to a point is
		// agentfs restore PREFIX --to POINT).
		checkpointCommand(),
		diffCommand(),
		webhookCommand(),
		// Forks and merges (DESIGN §19).
		fork,
		mergeCommand(),
		// File history, sharing and expiry (file history and lifecycle).
		versionsCommand(),
		revertCommand(),
		mvCommand(),
		shareCommand(),
		expireCommand(),
		// What happened: upload sessions, batches, the event feed and runs
		// (lifecycle and the run ledger).
		uploadsCommand(),
		batchesCommand(),
		eventsCommand(),
		runCommand(),
	}
}

// cliRun is what a running client verb works with.
type cliRun struct {
	name   string
	client *client.Client
	stdout io.Writer
	stderr io.Writer
	// human: stdout is a terminal (or --output table), so print tables
	// and short lines.
	human bool
	// forcedJSON: --json (or --output json) asked for JSON, also where a
	// verb prints something else by default.
	forcedJSON bool
	// stderrTTY: stderr is a terminal, so problems are printed as lines
	// (unless JSON was asked for) and large transfers show a progress bar.
	stderrTTY   bool
	base        string // the server, for messages
	maxAttempts int    // AGENTFS_MAX_ATTEMPTS
	getenv      func(string) string
	// answer is what the server said about the verb's last request: a
	// write answered as a replay is announced.
	answer client.Answer

	mu       sync.Mutex
	bar      *progress // the bar being drawn on stderr, if any
	attempts int       // the highest attempt announced so far
}

// newCLIRun configures a verb's client from the AGENTFS_* variables; its
// retries are announced on stderr.
func newCLIRun(name string, p *proc, anonymous bool) (*cliRun, error) {
	cli := &cliRun{name: name, stdout: p.stdout, stderr: p.stderr, human: p.humanOutput(), forcedJSON: p.format == formatJSON,
		stderrTTY: isTerminal(p.stderr), base: cmp.Or(p.getenv("AGENTFS_URL"), defaultURL), getenv: p.getenv}
	var err error
	if cli.maxAttempts, err = maxAttempts(p.getenv); err != nil {
		return nil, err
	}
	if cli.client, err = newCLIClient(p.getenv, anonymous, client.WithOnRetry(cli.retrying)); err != nil {
		return nil, err
	}
	return cli, nil
}

// newCLIClient configures the client from AGENTFS_* variables.
func newCLIClient(getenv func(string) string, anonymous bool, extra ...client.Option) (*client.Client, error) {
	base := cmp.Or(getenv("AGENTFS_URL"), defaultURL)
	token := getenv("AGENTFS_TOKEN")
	if token == "" && !anonymous {
		return nil, errors.New("AGENTFS_TOKEN is not set: create one with `agentfs token create --subject NAME` " +
			"(make run prints one, and keeps it in .data/agentfs.env)")
	}
	attempts, err := maxAttempts(getenv)
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithRetryPolicy(client.RetryPolicy{MaxAttempts: attempts})}
	if id := getenv("AGENTFS_AGENT_ID"); id != "" {
		opts = append(opts, client.WithAgentID(id))
	}
	if id := getenv("AGENTFS_RUN_ID"); id != "" {
		opts = append(opts, client.WithRunID(id))
	}
	c, err := client.New(base, token, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// maxAttempts reads AGENTFS_MAX_ATTEMPTS: the attempts of each request,
// the first included.
func maxAttempts(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv("AGENTFS_MAX_ATTEMPTS"))
	if v == "" {
		return client.DefaultMaxAttempts, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("configuration: AGENTFS_MAX_ATTEMPTS must be a number from 1 (no retries) to 100, not %q", v)
	}
	return n, nil
}

// retrying announces a wait between two attempts on stderr, so that a
// server that is down does not look like a hang.
func (cli *cliRun) retrying(attempt int, wait time.Duration, err error) {
	cli.mu.Lock()
	cli.attempts = max(cli.attempts, attempt+1)
	cli.mu.Unlock()
	of := fmt.Sprintf(" of %d", cli.maxAttempts)
	if attempt+1 > cli.maxAttempts {
		of = "" // events --follow, which retries without limit once the feed has answered
	}
	cli.note(fmt.Sprintf("agentfs: %s; retrying in %s (attempt %d%s)", retryReason(err), waitText(wait), attempt+1, of))
}

// note prints one line on stderr, above the progress bar if one is drawn.
func (cli *cliRun) note(line string) {
	cli.mu.Lock()
	defer cli.mu.Unlock()
	if cli.bar != nil {
		cli.bar.interject(line)
		return
	}
	fmt.Fprintln(cli.stderr, line)
}

// retryReason says in a few words why an attempt failed.
func retryReason(err error) string {
	var p *client.Problem
	if errors.As(err, &p) {
		return strings.TrimSpace(fmt.Sprintf("%d %s", p.Status, p.Code))
	}
	return transportReason(err)
}

// transportReason says in a few words why a connection failed: the cause
// without the URL and the layers that name it.
func transportReason(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the answer"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// unreachable reports whether err means that no server answered at all.
func unreachable(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns)
}

// waitText renders a wait as people read it: "700ms", "3.2s", "12s".
func waitText(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
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
// stderr; main adds one summary line, with what to do next if known.
type problemError struct {
	verb string
	p    *client.Problem
	next string
}

func (e *problemError) Error() string {
	msg := fmt.Sprintf("%s failed: %d %s", e.verb, e.p.Status, e.p.Code)
	if e.next != "" {
		msg += "; " + e.next
	}
	return msg
}

func (e *problemError) Unwrap() error { return e.p }

// verbError is a verb's failure that is not the server's answer: the
// connection, the local file, or an interruption.
type verbError struct {
	msg string
	err error
}

func (e *verbError) Error() string { return e.msg }
func (e *verbError) Unwrap() error { return e.err }

// nextStep is an error with advice on what to do next: what the server
// kept, or the flag that would have worked.
type nextStep struct {
	error
	next string
}

func (e *nextStep) Unwrap() error { return e.error }

// withNext attaches advice to err.
func withNext(err error, next string) error {
	if err == nil || next == "" {
		return err
	}
	return &nextStep{error: err, next: next}
}

// report prints a problem on stderr (JSON, or readable lines on a
// terminal) and returns the one-line summary of any failure.
func (cli *cliRun) report(err error) error {
	if err == nil || errors.Is(err, errUsage) {
		return err
	}
	var next string
	if ns := (*nextStep)(nil); errors.As(err, &ns) {
		next = ns.next
	}
	var p *client.Problem
	if !errors.As(err, &p) {
		return &verbError{msg: cli.describe(err, next), err: err}
	}
	if cli.stderrTTY && !cli.forcedJSON {
		fmt.Fprintf(cli.stderr, "agentfs %s: %d %s: %s\n", cli.name, p.Status, p.Code, cmp.Or(p.Detail, p.Title))
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
	return &problemError{verb: cli.name, p: p, next: next}
}

// describe is the summary of a failure that is not a problem.
func (cli *cliRun) describe(err error, next string) string {
	var msg string
	switch {
	case errors.Is(err, context.Canceled):
		msg = cli.name + " interrupted"
	case unreachable(err):
		cli.mu.Lock()
		attempts := max(cli.attempts, 1)
		cli.mu.Unlock()
		msg = fmt.Sprintf("%s: cannot reach AgentFS at %s (%s", cli.name, cli.base, transportReason(err))
		if attempts > 1 {
			msg += fmt.Sprintf(", %d attempts", attempts)
		}
		msg += "); is it running? make run starts one; AGENTFS_URL names another"
	default:
		var ns *nextStep
		if errors.As(err, &ns) {
			err = ns.error
		}
		msg = err.Error()
	}
	if next != "" {
		msg += "; " + next
	}
	return msg
}

// putCommand is agentfs put: one file up, through an upload session when it
// is large, retried under one Idempotency-Key.
func putCommand() *command {
	return clientCommand(command{
		name:    "put",
		summary: "upload a file (through an upload session from 64 MiB on)",
		usage:   "agentfs put LOCAL REMOTE_PATH [--replace] [--content-type TYPE] [--if-match ETAG] [--key KEY] [--threshold SIZE] [--expires-in DURATION]",
		help: `Uploads the local file LOCAL (or - for stdin) to REMOTE_PATH and prints the
file. Without --replace a live file at REMOTE_PATH is 409 PATH_EXISTS; with
it that file is replaced and keeps its id and url. The upload is retried
with one Idempotency-Key (--key to choose it, so that running the same
command again replays instead of writing twice). Stdin is sent once.
A file of --threshold or more (default 64MiB), or one the server finds too
large for one request, goes through a resumable upload session, as with
agentfs upload. On a terminal, a file of 1 MiB or more shows its progress
on stderr. Interrupted (Ctrl-C), put says what the server kept and how to
finish. --expires-in makes the file expire (count as deleted) that long
after the upload, 60s to 365d (90m, 24h, 7d); agentfs expire changes it.

Example:
  agentfs put ./summary.md reports/summary.md --replace
`}, false, putFlags)
}

func putFlags(fs *flag.FlagSet) verbFunc {
	replace := fs.Bool("replace", false, "replace the live file at REMOTE_PATH (keeps its id and url)")
	contentType := fs.String("content-type", "", "the file's media `TYPE` (default: from LOCAL's extension)")
	ifMatch, key := guardFlags(fs, "replace only while the file has this `ETAG` (needs --replace)", "upload")
	threshold := sizeFlag(fs, "threshold", client.DefaultSessionThreshold, "send a file of this `SIZE` or more (bytes, or with KiB, MiB, GiB) through an upload session")
	var expiresIn durationValue
	fs.Var(&expiresIn, "expires-in", "make the file expire this `DURATION` after the upload (60s to 365d: 90m, 24h, 7d)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("put needs LOCAL and REMOTE_PATH")
		}
		local := args[0]
		remote, err := intoFolder(remotePathArg(args[1]), local)
		if err != nil {
			return err
		}
		if err := notADirectory("put", local); err != nil {
			return err
		}
		t := &transfer{verb: "put", remote: remote, key: cmp.Or(*key, client.NewIdempotencyKey())}
		var f *client.File
		if local == "-" {
			in := &stdinBody{r: os.Stdin}
			f, err = cli.client.PutFile(ctx, remote, in, client.PutOptions{
				Replace: *replace, ContentType: *contentType, IfMatch: *ifMatch, IdempotencyKey: t.key,
				ExpiresIn: time.Duration(expiresIn),
			})
			t.sentWhole(in.ended.Load())
		} else {
			fi, serr := os.Stat(local)
			if serr != nil {
				return serr
			}
			t.viaSession = fi.Size() >= *threshold
			t.whole = fi.Size() == 0 // an empty body is whole once the request is sent
			opts := client.PutPathOptions{Threshold: *threshold, IdempotencyKey: t.key, UploadOptions: client.UploadOptions{
				Replace: *replace, ContentType: cmp.Or(*contentType, mime.TypeByExtension(filepath.Ext(local))), IfMatch: *ifMatch,
				ExpiresIn: time.Duration(expiresIn),
			}}
			bar := cli.watch(&opts.UploadOptions, fi.Size(), t)
			f, err = cli.client.PutPath(ctx, local, remote, opts)
			cli.endBar(bar)
		}
		if err != nil {
			return t.failed(err)
		}
		return cli.printFile(f, fmt.Sprintf("%s  %s  %d bytes  version %d", f.ID, f.Path, f.SizeBytes, f.Version))
	}
}

// stdinBody is put's body from stdin; ended records that it was read to
// its end, so the whole content may have reached the server.
type stdinBody struct {
	r     io.Reader
	ended atomic.Bool
}

func (s *stdinBody) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.ended.Store(true)
	}
	return n, err
}

// transfer follows one put or upload, so that a failure can say what the
// server kept: an upload session to resume, nothing at all, or a write
// whose outcome only its Idempotency-Key can tell.
type transfer struct {
	verb   string
	remote string
	key    string // the Idempotency-Key of a single POST

	mu         sync.Mutex
	viaSession bool           // the file goes through an upload session
	session    *client.Upload // the session, once created or resumed
	whole      bool           // some attempt sent the whole body
}

func (t *transfer) onSession(u *client.Upload) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.viaSession, t.session = true, u
}

// onHash marks the session path: content is hashed only for sessions.
func (t *transfer) onHash() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.viaSession = true
}

// onSent watches the bytes a single POST has sent.
func (t *transfer) onSent(sent, total int64) {
	if total > 0 && sent >= total {
		t.sentWhole(true)
	}
}

func (t *transfer) sentWhole(whole bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.whole = t.whole || whole
}

// failed adds to err what the server kept and what to do next. A problem
// that retrying cannot change is a definite answer: PATH_EXISTS gets the
// flag that would have worked, anything else as it is.
func (t *transfer) failed(err error) error {
	var p *client.Problem
	if errors.As(err, &p) && !p.Retryable {
		if p.Code == "PATH_EXISTS" {
			return withNext(err, fmt.Sprintf("%s already holds %s: run the same command with --replace to replace it "+
				"(it keeps its id and url and gets a new version)", cmp.Or(p.ExistingFileID, "a live file"), t.remote))
		}
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.session != nil:
		return withNext(err, fmt.Sprintf("the upload session %s is kept until %s: run the same command again to resume it "+
			"(only the parts it lacks are sent)", t.session.ID, t.session.ExpiresAt.Local().Format(time.DateTime)))
	case t.viaSession:
		return withNext(err, "nothing was stored (no upload session had started): run the same command again")
	case t.whole && t.key == "":
		return withNext(err, fmt.Sprintf("the request was sent whole, so the server may have stored it: "+
			"check with agentfs ls --path %s before running the same command again", t.remote))
	case t.whole:
		return withNext(err, fmt.Sprintf("the whole file was sent, so the server may have stored it: run the same command "+
			"with --key %s to find out safely (a stored upload is answered again, never written twice), "+
			"or ask GET /v1/operations/%s", t.key, t.key))
	}
	return withNext(err, "nothing was stored (the file was not sent whole): run the same command again")
}

// getCommand is agentfs get: a file's content by id or by path, verified
// before it appears.
func getCommand() *command {
	return clientCommand(command{
		name:    "get",
		summary: "download a file by id or by path (stdout without LOCAL)",
		usage:   "agentfs get FILE [LOCAL] [--as-of POINT] [--redirect]",
		help: `Downloads a live file's content to LOCAL (a file or a directory), or to
stdout without LOCAL or with -. FILE is a file id (file_ and 26 characters)
or the path of a live file (agentfs:PATH says it is a path). Written to
LOCAL, the content's SHA-256 is checked before the file appears, and the
file's metadata is printed. With --redirect, a server with a public S3
endpoint hands out a presigned URL and the bytes come from S3 itself (the
SHA-256 is still checked); other servers stream them as usual. agentfs cat
prints files; agentfs cp -r downloads a folder.

Examples:
  agentfs get reports/summary.md ./summary.md
  agentfs get file_01jd8x2m4k9q7v3t5r6w8y0z1a > summary.md
  agentfs get --redirect videos/big.mp4 ./   # the bytes straight from S3
`}, false, getFlags)
}

func getFlags(fs *flag.FlagSet) verbFunc {
	byPath := fs.String("path", "", "the `REMOTE_PATH` of the live file, as FILE can give it")
	asOf := fs.String("as-of", "", "the content the file had at this `POINT` (a checkpoint, a cursor, an RFC 3339 time)")
	redirect := fs.Bool("redirect", false, "read the bytes from S3 through a presigned URL when the server offers one")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if *byPath != "" {
			args = append([]string{"agentfs:" + *byPath}, args...)
		}
		if len(args) != 1 && len(args) != 2 {
			return usagef("get needs FILE (a file id or a path) and at most one LOCAL")
		}
		if *asOf != "" {
			return getAsOf(ctx, cli, args[0], *asOf, strings.Join(args[1:], ""))
		}
		f, err := cli.resolve(ctx, args[0])
		if err != nil {
			return err
		}
		local := strings.Join(args[1:], "")
		if local == "" || local == "-" {
			content, err := cli.client.FileContent(ctx, f.ID, client.ContentOptions{Redirect: *redirect})
			if err != nil {
				return err
			}
			defer content.Close()
			_, err = copyVerified(cli.stdout, content)
			return err
		}
		d, err := cli.client.DownloadFile(ctx, f, localTarget(local, f.Path), client.DownloadOptions{Redirect: *redirect})
		if err != nil {
			return err
		}
		if d.ETag != f.ETag { // replaced while we looked: show what was written
			if f, err = cli.client.File(ctx, f.ID); err != nil {
				return err
			}
		}
		return cli.printFile(f, fmt.Sprintf("wrote %d bytes to %s (%s  %s)", d.Bytes, d.Path, f.ID, f.Path))
	}
}

// localTarget is where a download of the remote path goes when asked to
// go to local: into it when it is a directory (or ends with a separator),
// under the remote path's last segment; else local itself.
func localTarget(local, remote string) string {
	if fi, err := os.Stat(local); err == nil && fi.IsDir() || strings.HasSuffix(local, string(filepath.Separator)) {
		return filepath.Join(local, path.Base(remote))
	}
	return local
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

// lsCommand is agentfs ls: the files, newest first, through every page.
func lsCommand() *command {
	return clientCommand(command{
		name:    "ls",
		summary: "list files, newest first",
		usage:   "agentfs ls [PREFIX] [--run RUN_ID] [--agent AGENT_ID] [--prefix PREFIX] [--path PATH] [--deleted] [--as-of POINT] [--fields MEMBERS] [--limit N]",
		help: `Lists files, newest first, through every page: a JSON array when stdout is
not a terminal, a table on one. A PREFIX argument is the same as --prefix.
--run and --agent match the X-Run-ID and X-Agent-ID of the request that
created each file. --fields asks the server for only the members named
(and the id), which is faster for large listings.

Examples:
  agentfs ls reports/
  agentfs ls reports/ --fields path,size_bytes
  agentfs ls --run run-1 --prefix reports/
`}, false, lsFlags)
}

func lsFlags(fs *flag.FlagSet) verbFunc {
	var opts client.ListOptions
	fs.StringVar(&opts.RunID, "run", "", "only files created with this X-Run-ID (`RUN_ID`)")
	fs.StringVar(&opts.AgentID, "agent", "", "only files created with this X-Agent-ID (`AGENT_ID`)")
	fs.StringVar(&opts.Prefix, "prefix", "", "only paths starting with `PREFIX`")
	fs.StringVar(&opts.Path, "path", "", "only this exact `PATH`")
	fs.BoolVar(&opts.IncludeDeleted, "deleted", false, "include deleted files not purged yet")
	fs.StringVar(&opts.AsOf, "as-of", "", "the files live at this `POINT`, in path order, as they were then")
	fs.Func("fields", "only these `MEMBERS` of each file, comma-separated (path,size_bytes,...; id always)", func(s string) error {
		opts.Fields = strings.Split(s, ",")
		return nil
	})
	list := listVerb(fs, "ls", "files", "ID\tSIZE\tVERSION\tUPDATED\tPATH", func(f *client.File) string {
		p := f.Path
		if f.DeletedAt != nil {
			p += "  (deleted)"
		}
		return fmt.Sprintf("%s\t%d\t%d\t%s\t%s", f.ID, f.SizeBytes, f.Version, f.UpdatedAt.Local().Format(time.DateTime), p)
	}, &opts, &opts.Limit, (*client.Client).AllFiles)
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) > 1 {
			return usagef("ls takes one PREFIX at most (and flags)")
		}
		if len(args) == 1 {
			if opts.Prefix != "" {
				return usagef("ls takes its prefix once: as an argument or as --prefix")
			}
			opts.Prefix, args = args[0], nil
		}
		if len(opts.Fields) > 0 && len(args) == 0 {
			if limit := intFlag(fs.Lookup("limit").Value); limit >= 0 {
				return listFields(ctx, cli, opts, limit)
			}
		}
		return list(ctx, cli, args)
	}
}

// rmCommand is agentfs rm: a soft delete, restorable until the purge.
func rmCommand() *command {
	return clientCommand(command{
		name:    "rm",
		summary: "delete a file (restorable until its purge_after)",
		usage:   "agentfs rm FILE [--if-match ETAG] [--key KEY]",
		help: `Deletes a file (soft: it can be restored until its purge_after) and prints
it. FILE is a file id or the path of a live file. Deleting a deleted file
again is safe.

Examples:
  agentfs rm reports/draft.md
  agentfs rm file_01jd8x2m4k9q7v3t5r6w8y0z1a
`}, false, rmFlags)
}

func rmFlags(fs *flag.FlagSet) verbFunc {
	ifMatch, key := guardFlags(fs, "delete only while the file has this `ETAG`", "delete")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		id, err := cli.oneFile(ctx, "rm", args, true, cli.fileID)
		if err != nil {
			return err
		}
		f, err := cli.client.DeleteFile(ctx, id, client.DeleteOptions{IfMatch: *ifMatch, IdempotencyKey: *key})
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

// restoreCommand is agentfs restore: undoing a delete.
func restoreCommand() *command {
	return clientCommand(command{
		name:    "restore",
		summary: "undo a delete, or put a folder back to a point (--to)",
		usage: `agentfs restore FILE [--key KEY]
agentfs restore PREFIX --to POINT [--dry-run] [--wait] [--key KEY]`,
		help: `Undoes a delete and prints the file. FILE is a file id, or a path: the file
deleted (or expired) last among those that held it. 409 PATH_EXISTS means
another live file took its path meanwhile.

With --to, puts every file under PREFIX back to its state at POINT (a
checkpoint id or name, an event cursor, an RFC 3339 time or now) as a
durable batch, and prints it; --dry-run prints the plan and changes
nothing. A file changed after the plan fails its item (412).

Examples:
  agentfs restore reports/draft.md
  agentfs restore file_01jd8x2m4k9q7v3t5r6w8y0z1a
  agentfs restore src/ --to before-refactor --wait
`}, false, restoreFlags)
}

func restoreFlags(fs *flag.FlagSet) verbFunc {
	key := keyFlag(fs, "restore")
	to := fs.String("to", "", "put PREFIX back to this `POINT` instead of undoing a delete")
	dryRun := fs.Bool("dry-run", false, "with --to: print the plan, change nothing")
	wait := fs.Bool("wait", false, "with --to: wait until every item has run")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if *to != "" && len(args) == 1 {
			return restoreToPoint(ctx, cli, args[0], *to, *dryRun, *wait, *key)
		}
		id, err := cli.oneFile(ctx, "restore", args, !*dryRun && !*wait, cli.deletedFileID)
		if err != nil {
			return err
		}
		f, err := cli.client.RestoreFile(ctx, id, client.RestoreOptions{IdempotencyKey: *key})
		if err != nil {
			return err
		}
		return cli.printFile(f, fmt.Sprintf("restored %s  %s", f.ID, f.Path))
	}
}

// protocolCommand is agentfs protocol: the server's rules, without a token.
func protocolCommand() *command {
	return clientCommand(command{
		name:    "protocol",
		summary: "show the server's retry and idempotency rules (no token needed)",
		usage:   "agentfs protocol",
		help: `Prints what the server guarantees: its idempotency rules, retry policy and
limits (GET /v1/protocol). It needs no AGENTFS_TOKEN.

Example:
  agentfs protocol
`}, true, protocolFlags)
}

func protocolFlags(*flag.FlagSet) verbFunc {
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
	return cli.printJSON(f, "")
}

// printJSON prints v as one JSON document (indented by indent, if any),
// with "replayed": true when the server answered the verb's write as a
// replay.
func (cli *cliRun) printJSON(v any, indent string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if cli.answer.Replayed() && len(b) > 2 && b[0] == '{' && b[len(b)-1] == '}' {
		b = append(b[:len(b)-1], []byte(`,"replayed":true}`)...)
	}
	if indent != "" {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", indent); err != nil {
			return err
		}
		b = out.Bytes()
	}
	_, err = fmt.Fprintf(cli.stdout, "%s\n", b)
	return err
}

// noteReplay says on stderr that the server answered the verb's write
// with the outcome its Idempotency-Key had recorded: nothing was done
// again.
func (cli *cliRun) noteReplay() {
	if !cli.answer.Replayed() {
		return
	}
	cli.note(fmt.Sprintf("agentfs: %s replayed: Idempotency-Key %s had recorded this answer, so nothing was done again",
		cli.name, cli.answer.IdempotencyKey()))
}
