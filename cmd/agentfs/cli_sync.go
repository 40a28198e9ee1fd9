package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs/client"
)

// treeRun is one cp -r or sync: the plan (package client decides what to
// send, fetch or delete), carried out parallel files at a time.
type treeRun struct {
	verb    string // cp or sync
	up      bool   // from this machine to AgentFS
	root    string // the local directory
	rootArg string // the local directory as given, for messages
	prefix  string // the remote folder: "" or ending with '/'
	opts    treeOptions

	cli   *cliRun
	plan  *client.Plan
	start time.Time
	bar   *progress
	moved atomic.Int64 // bytes moved so far
	ended atomic.Int64 // steps ended, done or failed

	mu     sync.Mutex // the counts, and lines on stdout
	done   map[client.StepKind]int
	failed int
}

// copyTree plans the transfer, prints or carries it out, and sums it up.
func (cli *cliRun) copyTree(ctx context.Context, t *treeRun) error {
	t.cli, t.start, t.done = cli, time.Now(), map[client.StepKind]int{}
	if err := t.makePlan(ctx); err != nil {
		return err
	}
	for _, s := range t.plan.Skipped {
		cli.note(fmt.Sprintf("agentfs: skipped %s: %s", s.Path, s.Reason))
	}
	if t.opts.dryRun {
		for _, s := range t.plan.Steps {
			t.printStep(s, stepResult{status: "planned"})
		}
		return t.summary(nil)
	}
	var transfers, deletes []client.Step
	for _, s := range t.plan.Steps {
		if s.Kind == client.StepDelete {
			deletes = append(deletes, s)
		} else {
			transfers = append(transfers, s)
		}
	}
	t.startBar()
	err := t.runSteps(ctx, transfers)
	if err == nil && len(deletes) > 0 {
		if t.failed > 0 {
			cli.note(fmt.Sprintf("agentfs: %d deletions not done, since %d copies failed", len(deletes), t.failed))
		} else {
			err = t.runSteps(ctx, deletes)
		}
	}
	cli.endBar(t.bar)
	return t.summary(err)
}

// makePlan lists both trees and plans the steps.
func (t *treeRun) makePlan(ctx context.Context) error {
	remote, err := t.cli.client.Tree(ctx, t.prefix)
	if err != nil {
		return err
	}
	local, skipped, err := t.walkLocal()
	if err != nil {
		return err
	}
	opts := client.PlanOptions{Delete: t.opts.delete, NoReplace: t.opts.noClobber}
	if t.up {
		t.plan, err = client.PlanUpload(ctx, local, skipped, remote, t.prefix, opts)
	} else {
		t.plan, err = client.PlanDownload(ctx, remote, t.prefix, local, opts)
		if t.plan != nil {
			t.plan.Skipped = append(skipped, t.plan.Skipped...)
		}
	}
	return err
}

// walkLocal lists the local tree; a destination directory that does not
// exist yet is empty.
func (t *treeRun) walkLocal() ([]client.LocalFile, []client.Skipped, error) {
	fi, err := os.Stat(t.root)
	switch {
	case err != nil && !t.up && errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case !fi.IsDir():
		return nil, nil, fmt.Errorf("%s is a file, not a directory", t.rootArg)
	}
	return client.WalkLocal(t.root)
}

// startBar draws the progress on stderr when it is a terminal.
func (t *treeRun) startBar() {
	if !t.cli.stderrTTY || len(t.plan.Steps) == 0 {
		return
	}
	files := len(t.plan.Steps)
	t.bar = &progress{w: t.cli.stderr, now: time.Now,
		extra: func() string { return fmt.Sprintf(" %d/%d files", t.ended.Load(), files) }}
	t.cli.mu.Lock()
	t.cli.bar = t.bar
	t.cli.mu.Unlock()
	t.draw()
}

func (t *treeRun) draw() {
	phase := phaseDownloading
	if t.up {
		phase = phaseUploading
	}
	t.bar.update(phase, t.moved.Load(), t.plan.Bytes())
}

// runSteps carries out steps, parallel at a time. A step's own failure
// (a refused path, a conflict with another writer, a local file) is
// reported and the others go on; a failure of the whole (the server
// unreachable, the token refused, an interruption) stops them all and is
// returned.
func (t *treeRun) runSteps(ctx context.Context, steps []client.Step) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan client.Step)
	var wg sync.WaitGroup
	for range min(t.opts.parallel, len(steps)) {
		wg.Go(func() {
			for s := range jobs {
				res := t.runStep(ctx, s)
				t.ended.Add(1)
				if res.err != nil && stopsTree(ctx, res.err) {
					cancel(res.err)
					continue
				}
				t.record(s, res)
			}
		})
	}
feed:
	for _, s := range steps {
		select {
		case jobs <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return context.Cause(ctx)
}

// stopsTree reports whether a step's failure is the whole transfer's: not
// about the one file.
func stopsTree(ctx context.Context, err error) bool {
	var (
		p  *client.Problem
		pe *fs.PathError
		ce *client.ChecksumError
	)
	switch {
	case ctx.Err() != nil, errors.Is(err, context.Canceled):
		return true
	case errors.As(err, &p):
		return p.Status == 401 || p.Status == 403 || p.Status == 429 || p.Status >= 500
	case errors.As(err, &pe), errors.As(err, &ce):
		return false
	}
	return true // the connection, after the retries
}

// stepResult is what became of one step.
type stepResult struct {
	status   string // done, failed or planned
	file     *client.File
	sha256   string
	replayed bool
	err      error
}

// runStep carries out one step, its progress counted in the bar.
func (t *treeRun) runStep(ctx context.Context, s client.Step) stepResult {
	var (
		ans  client.Answer
		last int64
	)
	ctx = client.WithAnswer(ctx, &ans)
	progress := func(sent, _ int64) {
		t.moved.Add(sent - last)
		last = sent
		if t.bar != nil {
			t.draw()
		}
	}
	res := stepResult{status: "done"}
	switch {
	case s.Kind == client.StepUpload:
		opts := client.PutPathOptions{UploadOptions: client.UploadOptions{Replace: !s.New, ContentType: contentTypeOf(s.Rel),
			SHA256: s.Local.SHA256, Progress: progress}}
		if s.Remote != nil {
			opts.IfMatch = s.Remote.ETag // not over another writer's change
		}
		res.file, res.err = t.cli.client.PutPath(ctx, s.Local.Path, t.prefix+s.Rel, opts)
	case s.Kind == client.StepDownload:
		var d *client.Downloaded
		d, res.err = t.cli.client.DownloadFile(ctx, s.Remote, t.localPath(s.Rel),
			client.DownloadOptions{Resume: true, MakeDirs: true, Progress: progress})
		if d != nil {
			res.sha256 = d.SHA256
		}
	case s.Remote != nil: // a remote delete
		res.file, res.err = t.cli.client.DeleteFile(ctx, s.Remote.ID, client.DeleteOptions{IfMatch: s.Remote.ETag})
	default:
		res.err = t.removeLocal(s.Local.Path)
	}
	if res.err != nil {
		t.moved.Add(-last)
		res.status = "failed"
	}
	res.replayed = ans.Replayed()
	return res
}

// localPath is where a file of the tree is on this machine.
func (t *treeRun) localPath(rel string) string {
	return filepath.Join(t.root, filepath.FromSlash(rel))
}

// removeLocal deletes a local file, and the directories above it that it
// leaves empty, up to the root.
func (t *treeRun) removeLocal(p string) error {
	if err := os.Remove(p); err != nil {
		return err
	}
	root := filepath.Clean(t.root)
	for dir := filepath.Dir(p); dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// record counts a step's outcome and prints it.
func (t *treeRun) record(s client.Step, res stepResult) {
	t.mu.Lock()
	if res.err != nil {
		t.failed++
	} else {
		t.done[s.Kind]++
	}
	t.mu.Unlock()
	t.printStep(s, res)
}

// stepLine is one step of cp -r or sync as JSON, one object a line.
type stepLine struct {
	Op        client.StepKind `json:"op"`
	Status    string          `json:"status"` // done, failed, or planned (--dry-run)
	Path      string          `json:"path"`   // the remote path
	Local     string          `json:"local"`  // the local path
	SizeBytes int64           `json:"size_bytes"`
	New       bool            `json:"new"`
	SHA256    string          `json:"sha256,omitempty"`
	FileID    string          `json:"file_id,omitempty"`
	Version   int64           `json:"version,omitempty"`
	Replayed  bool            `json:"replayed,omitempty"`
	Error     any             `json:"error,omitempty"` // the problem, or {"detail": ...}
}

// printStep prints a step: a line for a person, or its JSON.
func (t *treeRun) printStep(s client.Step, res stepResult) {
	remote, local := remoteShow(t.prefix, s.Rel), t.localPath(s.Rel)
	rec := stepLine{Op: s.Kind, Status: res.status, Path: remote, Local: local, SizeBytes: s.Size(), New: s.New,
		SHA256: res.sha256, Replayed: res.replayed}
	if s.Local != nil && rec.SHA256 == "" {
		rec.SHA256 = s.Local.SHA256
	}
	if f := res.file; f != nil {
		rec.FileID, rec.Version, rec.SHA256 = f.ID, f.Version, f.SHA256
	} else if s.Remote != nil {
		rec.FileID = s.Remote.ID
	}
	if s.Kind == client.StepDelete && s.Remote == nil {
		rec.Path = ""
	}
	if s.Kind == client.StepDelete && s.Local == nil {
		rec.Local = ""
	}
	if res.err != nil {
		rec.Error = stepError(res.err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.cli.human {
		_ = t.cli.printJSON(rec, "")
		return
	}
	line := t.describe(s, res)
	if res.err != nil {
		t.cli.note(line)
		return
	}
	t.bar.above(t.cli.stdout, line)
}

// describe is a step's line for a person, as aws s3 sync prints them.
func (t *treeRun) describe(s client.Step, res stepResult) string {
	remote, local := remoteShow(t.prefix, s.Rel), localShow(t.rootArg, s.Rel)
	var what string
	switch {
	case s.Kind == client.StepUpload:
		what = fmt.Sprintf("upload: %s to %s", local, remote)
	case s.Kind == client.StepDownload:
		what = fmt.Sprintf("download: %s to %s", remote, local)
	case s.Remote != nil:
		what = "delete: " + remote
	default:
		what = "delete: " + local
	}
	switch {
	case res.status == "planned":
		return "(dry run) " + what
	case res.err != nil:
		return fmt.Sprintf("failed %s: %s", what, failureText(res.err))
	case res.replayed:
		return what + " (replayed)"
	}
	return what
}

// stepError is a step's failure as JSON: the problem, or its message.
func stepError(err error) any {
	var p *client.Problem
	if errors.As(err, &p) {
		return p
	}
	return map[string]string{"detail": err.Error()}
}

// failureText is a step's failure in a few words, with what to do.
func failureText(err error) string {
	var p *client.Problem
	if !errors.As(err, &p) {
		return err.Error()
	}
	text := fmt.Sprintf("%d %s: %s", p.Status, p.Code, cmp.Or(p.Detail, p.Title))
	switch p.Code {
	case "PRECONDITION_FAILED", "PATH_EXISTS":
		text += " (another writer changed it meanwhile; run the same command again to see the change)"
	}
	return text
}

// summary prints what the transfer did and returns its outcome: err (an
// interruption, or the failure that stopped it), or the failed steps.
func (t *treeRun) summary(err error) error {
	sum := treeSummary{Op: "summary", Command: t.verb, Direction: "download", DryRun: t.opts.dryRun,
		Unchanged: t.plan.Unchanged, Kept: t.plan.Kept, Skipped: len(t.plan.Skipped), Failed: t.failed,
		Bytes: t.moved.Load(), Seconds: time.Since(t.start).Seconds()}
	if t.up {
		sum.Direction = "upload"
	}
	if t.opts.dryRun {
		sum.Bytes = t.plan.Bytes()
		for _, s := range t.plan.Steps {
			t.done[s.Kind]++
		}
	}
	sum.Uploaded, sum.Downloaded, sum.Deleted = t.done[client.StepUpload], t.done[client.StepDownload], t.done[client.StepDelete]
	if t.cli.human {
		fmt.Fprintln(t.cli.stdout, sum.text())
	} else {
		_ = t.cli.printJSON(sum, "")
	}
	total, made := len(t.plan.Steps), sum.Uploaded+sum.Downloaded+sum.Deleted
	switch {
	case errors.Is(err, context.Canceled):
		return withNext(err, fmt.Sprintf("%d of %d changes were made: run the same command again to go on (what is done is not sent again)",
			made, total))
	case err != nil:
		return err
	case t.failed > 0:
		return fmt.Errorf("%s: %d of %d changes failed: run the same command again to retry them (what is done is not sent again)",
			t.verb, t.failed, total)
	}
	return nil
}

// treeSummary is the last line of cp -r and sync.
type treeSummary struct {
	Op         string  `json:"op"` // summary
	Command    string  `json:"command"`
	Direction  string  `json:"direction"` // upload or download
	DryRun     bool    `json:"dry_run"`
	Uploaded   int     `json:"uploaded"`
	Downloaded int     `json:"downloaded"`
	Deleted    int     `json:"deleted"`
	Unchanged  int     `json:"unchanged"`
	Kept       int     `json:"kept"`
	Skipped    int     `json:"skipped"`
	Failed     int     `json:"failed"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
}

// text is the summary for a person.
func (s treeSummary) text() string {
	var parts []string
	moved, verb := s.Uploaded, "uploaded"
	if s.Direction == "download" {
		moved, verb = s.Downloaded, "downloaded"
	}
	if s.DryRun {
		verb = "would " + strings.TrimSuffix(verb, "ed")
	}
	parts = append(parts, fmt.Sprintf("%s %d %s (%s)", verb, moved, plural(moved, "file"), sizeText(s.Bytes)))
	if s.Deleted > 0 {
		del := "deleted"
		if s.DryRun {
			del = "would delete"
		}
		parts = append(parts, fmt.Sprintf("%s %d", del, s.Deleted))
	}
	parts = append(parts, fmt.Sprintf("%d unchanged", s.Unchanged))
	for _, c := range []struct {
		n    int
		what string
	}{{s.Kept, "kept (--no-clobber)"}, {s.Skipped, "skipped"}, {s.Failed, "failed"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return fmt.Sprintf("%s: %s in %s", s.Command, strings.Join(parts, ", "), waitText(time.Duration(s.Seconds*float64(time.Second))))
}

// sizeText is a number of bytes for a person: "21 bytes", "3.5 MiB".
func sizeText(n int64) string {
	div, unit := byteUnit(n)
	if unit == "B" {
		return fmt.Sprintf("%d %s", n, plural(int(n), "byte"))
	}
	return fmt.Sprintf("%.1f %s", float64(n)/div, unit)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
