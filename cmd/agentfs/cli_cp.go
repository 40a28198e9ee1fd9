package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
)

// catCommand is agentfs cat: files' content on stdout.
func catCommand() *command {
	return clientCommand(command{
		name:    "cat",
		summary: "print the content of files, by path or id",
		usage:   "agentfs cat FILE...",
		help: `Prints the content of each FILE to stdout, one after the other, as cat(1)
does. FILE is a file id (file_ and 26 characters) or the path of a live
file (agentfs:PATH says it is a path). Each content's SHA-256 is checked as
it streams; a mismatch fails the command once its bytes are out.

Example:
  agentfs cat reports/summary.md
`}, false, catFlags)
}

func catFlags(*flag.FlagSet) verbFunc {
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) == 0 {
			return usagef("cat needs at least one FILE (a file id or a path)")
		}
		for _, arg := range args {
			id, err := cli.fileID(ctx, arg)
			if err != nil {
				return err
			}
			content, err := cli.client.FileContent(ctx, id, client.ContentOptions{})
			if err != nil {
				return err
			}
			_, err = copyVerified(cli.stdout, content)
			content.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", arg, err)
			}
		}
		return nil
	}
}

// cpCommand is agentfs cp: a file or a tree, up or down.
func cpCommand() *command {
	return clientCommand(command{
		name:    "cp",
		summary: "copy a file or (-r) a folder between this machine and AgentFS",
		usage: `agentfs cp LOCAL REMOTE [-r] [--no-clobber] [--parallel N] [--dry-run]
agentfs cp REMOTE LOCAL [-r] [--no-clobber] [--parallel N] [--dry-run]`,
		help: `Copies a file, or with -r a folder, from this machine to AgentFS or back. A
LOCAL argument is an absolute path or starts with ./, ../ or ~/ (or is .,
.. or ~); anything else is REMOTE, and agentfs:PATH is a remote path said
explicitly. A REMOTE file may also be named by its id.

One file goes to the destination as named, or into it when the destination
is a folder (an existing directory, or a path ending with /): its name is
kept. It replaces what the destination holds there (a remote file keeps
its id and gets a new version, which identical bytes do not make), unless
--no-clobber leaves that alone. Uploads are put's (one POST, or an upload
session from 64 MiB on); downloads are checked against the SHA-256 before
they appear.

With -r, everything under SRC goes to under DST (SRC/a/b.txt becomes
DST/a/b.txt, as with aws s3 cp --recursive), --parallel files at a time,
with a progress bar on a terminal. What DST already holds with the same
SHA-256 is not sent again, so an interrupted cp -r goes on where it stopped
when run again (a large upload resumes its session, a large download its
partial file). A file another writer changes meanwhile is not overwritten:
its copy fails, and the next run sees the change. Symbolic links, other
special files and names that no AgentFS path can have are skipped and
named on stderr. agentfs sync also deletes what SRC lacks.

Output: a line per file copied (JSON, one object a line, when piped or with
--json) and a summary. It exits 1 if any file failed.

Examples:
  agentfs cp ./report.pdf reports/
  agentfs cp -r ./out reports/2026-12/
  agentfs cp -r reports/ ./reports-copy
`}, false, cpFlags)
}

// treeOptions are the flags of cp and sync.
type treeOptions struct {
	recursive bool
	noClobber bool
	delete    bool
	dryRun    bool
	parallel  int
	redirect  bool // downloads read from S3 through presigned URLs
}

// defaultTreeParallel is how many files cp -r and sync move at once.
const defaultTreeParallel = 8

// treeFlags are the flags cp and sync share: --dry-run and --parallel,
// with usages in the verb's words.
func (o *treeOptions) treeFlags(fs *flag.FlagSet, dryRunUsage, parallelUsage string) {
	fs.BoolVar(&o.dryRun, "dry-run", false, dryRunUsage)
	fs.IntVar(&o.parallel, "parallel", defaultTreeParallel, parallelUsage)
}

func cpFlags(fs *flag.FlagSet) verbFunc {
	var o treeOptions
	fs.BoolVar(&o.recursive, "r", false, "copy a folder: everything under SRC to under DST")
	fs.BoolVar(&o.recursive, "recursive", false, "the same as -r")
	fs.BoolVar(&o.noClobber, "no-clobber", false, "leave what DST holds alone, whatever it holds")
	o.treeFlags(fs, "print what would be copied, and copy nothing", "copy `N` files at once (with -r)")
	fs.BoolVar(&o.redirect, "redirect", false, "downloads: read the bytes from S3 through presigned URLs when the server offers them")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		src, dst, err := transferSides("cp", args, o, cli.getenv)
		if err != nil {
			return err
		}
		if src.local {
			return cli.cpUp(ctx, src, dst, o)
		}
		return cli.cpDown(ctx, src, dst, o)
	}
}

// location is one side of cp or sync: a local path or a remote one.
type location struct {
	arg   string // as given, for messages
	local bool
	path  string // the local path (~ expanded), or the remote path ("" is the top)
}

// parseLocation tells a local argument (an absolute path, or one starting
// with ./, ../ or ~/; ., .. and ~ themselves) from a remote one (anything
// else; agentfs:PATH explicitly).
func parseLocation(arg string, getenv func(string) string) location {
	if p, ok := strings.CutPrefix(arg, remotePrefix); ok {
		return location{arg: arg, path: p}
	}
	if !isLocalArg(arg) {
		return location{arg: arg, path: arg}
	}
	p := arg
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		p = home + p[1:]
	}
	return location{arg: arg, local: true, path: p}
}

// isLocalArg reports whether arg is written as a local path.
func isLocalArg(arg string) bool {
	switch arg {
	case ".", "..", "~":
		return true
	}
	for _, prefix := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(arg, prefix) {
			return true
		}
	}
	return false
}

// localForm writes a local path so that cp and sync read it as local.
func localForm(p string) string {
	if isLocalArg(p) {
		return p
	}
	return "./" + p
}

// transferSides checks the arguments and options of cp or sync and reads
// SRC and DST: one local, the other remote.
func transferSides(verb string, args []string, o treeOptions, getenv func(string) string) (location, location, error) {
	if len(args) != 2 {
		return location{}, location{}, usagef("%s needs SRC and DST", verb)
	}
	if o.parallel < 1 {
		return location{}, location{}, usagef("--parallel must be at least 1")
	}
	src, dst := parseLocation(args[0], getenv), parseLocation(args[1], getenv)
	switch {
	case src.local && dst.local:
		return src, dst, usagef("%s: %s and %s are both local paths: %s copies between this machine and AgentFS "+
			"(a remote path does not start with /, ./, ../ or ~/; agentfs:PATH is one explicitly)", verb, src.arg, dst.arg, verb)
	case !src.local && !dst.local:
		msg := fmt.Sprintf("%s: %s and %s are both remote paths: a local path is absolute or starts with ./, ../ or ~/", verb, src.arg, dst.arg)
		for _, l := range []location{src, dst} {
			if _, err := os.Stat(l.arg); err == nil {
				msg += fmt.Sprintf(" (write %s for the local %s)", localForm(l.arg), l.arg)
				break
			}
		}
		return src, dst, usagef("%s", msg)
	}
	return src, dst, nil
}

// remoteFolder is the remote path as the prefix of a folder: "" for the
// top, else in NFC ending with '/'.
func remoteFolder(p string) (string, error) {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	n, err := agentfs.NormalizePath(p)
	if err != nil {
		return "", fmt.Errorf("remote folder %q: %v", p, err)
	}
	return n + "/", nil
}

// isFolderForm reports whether a remote path names a folder by its
// spelling: the top, or ending with '/'.
func isFolderForm(p string) bool { return p == "" || strings.HasSuffix(p, "/") }

// cpUp copies a local file or tree to AgentFS.
func (cli *cliRun) cpUp(ctx context.Context, src, dst location, o treeOptions) error {
	fi, err := os.Stat(src.path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		remote, err := intoFolder(dst.path, src.path)
		if err != nil {
			return err
		}
		return cli.uploadOne(ctx, src, remote, fi.Size(), o)
	}
	if !o.recursive {
		return usagef("cp: %s is a directory: cp -r copies the tree under it", src.arg)
	}
	prefix, err := remoteFolder(dst.path)
	if err != nil {
		return err
	}
	return cli.copyTree(ctx, &treeRun{verb: "cp", up: true, root: src.path, rootArg: src.arg, prefix: prefix, opts: o})
}

// cpDown copies a remote file or tree to this machine.
func (cli *cliRun) cpDown(ctx context.Context, src, dst location, o treeOptions) error {
	if !isFolderForm(src.path) {
		f, err := cli.resolve(ctx, src.arg)
		switch {
		case err == nil:
			return cli.downloadOne(ctx, f, dst, o)
		case !errors.Is(err, client.ErrNoFile):
			return err
		case !o.recursive:
			if l, lerr := cli.client.ListFiles(ctx, client.ListOptions{Prefix: src.path + "/", Limit: 1}); lerr == nil && len(l.Data) > 0 {
				return usagef("cp: no file is at %s, but the folder %s/ holds files: cp -r copies them", src.path, src.path)
			}
			return err
		}
	}
	if !o.recursive {
		return usagef("cp: %s is a folder: cp -r copies the files under it", cmp.Or(src.path, "agentfs: (the top)"))
	}
	prefix, err := remoteFolder(src.path)
	if err != nil {
		return err
	}
	return cli.copyTree(ctx, &treeRun{verb: "cp", up: false, root: dst.path, rootArg: dst.arg, prefix: prefix, opts: o})
}

// uploadOne copies one local file to the remote path, replacing what it
// holds unless --no-clobber.
func (cli *cliRun) uploadOne(ctx context.Context, src location, remote string, size int64, o treeOptions) error {
	if o.dryRun {
		return cli.printPlanned(fmt.Sprintf("(dry run) upload: %s to %s", src.arg, remote),
			stepLine{Op: client.StepUpload, Status: "planned", Path: remote, Local: src.path, SizeBytes: size})
	}
	t := &transfer{verb: "cp", remote: remote, viaSession: size >= client.DefaultSessionThreshold, whole: size == 0}
	opts := client.PutPathOptions{UploadOptions: client.UploadOptions{Replace: !o.noClobber,
		ContentType: mime.TypeByExtension(filepath.Ext(src.path))}}
	bar := cli.watch(&opts.UploadOptions, size, t)
	f, err := cli.client.PutPath(ctx, src.path, remote, opts)
	cli.endBar(bar)
	if o.noClobber && client.ErrorCode(err) == "PATH_EXISTS" {
		cli.note(fmt.Sprintf("agentfs: %s already holds a file; left as it is (--no-clobber)", remote))
		return nil
	}
	if err != nil {
		return t.failed(err)
	}
	return cli.printFile(f, fmt.Sprintf("upload: %s to %s (%s, version %d)", src.arg, f.Path, f.ID, f.Version))
}

// downloadOne copies one remote file to the local destination: into it
// when it is a directory or ends with a separator.
func (cli *cliRun) downloadOne(ctx context.Context, f *client.File, dst location, o treeOptions) error {
	target := localTarget(dst.path, f.Path)
	if o.dryRun {
		return cli.printPlanned(fmt.Sprintf("(dry run) download: %s to %s", f.Path, target),
			stepLine{Op: client.StepDownload, Status: "planned", Path: f.Path, Local: target, SizeBytes: f.SizeBytes})
	}
	if _, err := os.Lstat(target); err == nil && o.noClobber {
		cli.note(fmt.Sprintf("agentfs: %s exists; left as it is (--no-clobber)", target))
		return nil
	}
	bar := cli.downloadBar()
	d, err := cli.client.DownloadFile(ctx, f, target, client.DownloadOptions{Resume: true, MakeDirs: true,
		Redirect: o.redirect, Progress: func(n, total int64) { bar.received(n, total) }})
	var n int64
	if d != nil {
		n = d.Bytes
	}
	bar.end(cli, n, err)
	if err != nil {
		return err
	}
	return cli.printFile(f, fmt.Sprintf("download: %s to %s (%d bytes)", f.Path, d.Path, d.Bytes))
}

// printPlanned prints what a dry run would do.
func (cli *cliRun) printPlanned(line string, rec stepLine) error {
	if cli.human {
		_, err := fmt.Fprintln(cli.stdout, line)
		return err
	}
	return cli.printJSON(rec, "")
}

// syncCommand is agentfs sync: a folder mirrored, only what changed.
func syncCommand() *command {
	return clientCommand(command{
		name:    "sync",
		summary: "make a folder here or in AgentFS like another: only changed files move",
		usage: `agentfs sync LOCAL_DIR REMOTE_FOLDER [--delete] [--dry-run] [--parallel N]
agentfs sync REMOTE_FOLDER LOCAL_DIR [--delete] [--dry-run] [--parallel N]`,
		help: `Makes DST hold what SRC holds, as aws s3 sync and mc mirror do: a file SRC
has and DST lacks is copied, one whose SHA-256 differs is replaced (a remote
file keeps its id and gets a new version), one alike on both sides is not
touched. With --delete, what DST holds that SRC lacks is deleted (a remote
file softly: restorable until its purge_after); deletions wait until every
copy succeeded. --dry-run prints what it would do and does nothing.

Local and remote arguments are told apart as for cp: a local one is
absolute or starts with ./, ../ or ~/; agentfs:PATH is remote explicitly.
Files move --parallel at a time with the client's retries and an
Idempotency-Key each, so a retry never writes twice; a large upload goes
through a resumable session, a large download resumes its partial file. A
remote file changed by another writer while sync runs is not overwritten
or deleted: that step fails, and the next run sees the change. Run again,
sync sends nothing for what is already alike.

Output: a line per change (JSON, one object a line, when piped or with
--json) and a summary. It exits 1 if any step failed.

Examples:
  agentfs sync ./site sites/www/ --delete
  agentfs sync reports/ ./reports --dry-run
`}, false, syncFlags)
}

func syncFlags(fs *flag.FlagSet) verbFunc {
	o := treeOptions{recursive: true}
	fs.BoolVar(&o.delete, "delete", false, "delete what DST holds that SRC lacks (remote files are restorable)")
	o.treeFlags(fs, "print what would change, and change nothing", "move `N` files at once")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		src, dst, err := transferSides("sync", args, o, cli.getenv)
		if err != nil {
			return err
		}
		t := &treeRun{verb: "sync", up: src.local, opts: o}
		local, remote := src, dst
		if !src.local {
			local, remote = dst, src
		}
		t.root, t.rootArg = local.path, local.arg
		if t.prefix, err = remoteFolder(remote.path); err != nil {
			return err
		}
		if fi, err := os.Stat(local.path); err == nil && !fi.IsDir() || err != nil && src.local {
			if err == nil {
				err = fmt.Errorf("%s is a file: sync mirrors folders (agentfs cp copies one file)", local.arg)
			}
			return err
		}
		return cli.copyTree(ctx, t)
	}
}

// remoteShow is a remote path as messages show it.
func remoteShow(prefix, rel string) string { return prefix + rel }

// localShow is a local file of a tree as messages show it: below the
// root as the user wrote it.
func localShow(rootArg, rel string) string {
	return strings.TrimSuffix(rootArg, "/") + "/" + filepath.FromSlash(rel)
}

// contentTypeOf is the media type an upload of rel declares.
func contentTypeOf(rel string) string { return mime.TypeByExtension(path.Ext(rel)) }
