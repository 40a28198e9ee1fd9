package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentfs/agentfs/client"
)

// uploadCommand is agentfs upload: a large file in parallel parts, resumed
// by running the same command again.
func uploadCommand() *command {
	return clientCommand(command{
		name:    "upload",
		summary: "upload a large file in parallel parts, resumable",
		usage:   "agentfs upload LOCAL REMOTE_PATH [--replace] [--parallel N] [--content-type TYPE] [--if-match ETAG] [--sha256 HEX] [--expires-in DURATION]",
		help: `Uploads the local file LOCAL to REMOTE_PATH through an upload session and
prints the file: its SHA-256 is computed first ("hashing"), then the server
chooses the part size and --parallel parts are sent at once ("uploading"),
each retried whole. An interrupted upload is resumed by running the same
command again: the live session comes back and only the parts it lacks are
sent. On a terminal, a file of 1 MiB or more shows its progress on stderr.
agentfs uploads --status pending lists the sessions left to resume.

Example:
  agentfs upload ./train.parquet datasets/train.parquet --replace --parallel 8
`}, false, uploadFlags)
}

func uploadFlags(fs *flag.FlagSet) verbFunc {
	replace := fs.Bool("replace", false, "replace the live file at REMOTE_PATH (keeps its id and url)")
	parallel := fs.Int("parallel", client.DefaultParallel, "send `N` parts at once")
	contentType := fs.String("content-type", "", "the file's media `TYPE` (default: from LOCAL's extension)")
	ifMatch := fs.String("if-match", "", "replace only while the file has this `ETAG` (needs --replace)")
	sum := fs.String("sha256", "", "the file's SHA-256 in `HEX`, if known (default: computed from LOCAL)")
	var expiresIn durationValue
	fs.Var(&expiresIn, "expires-in", "make the file expire this `DURATION` after it is stored (60s to 365d: 90m, 24h, 7d)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("upload needs LOCAL and REMOTE_PATH")
		}
		if *parallel < 1 {
			return usagef("--parallel must be at least 1")
		}
		local := args[0]
		if local == "-" {
			return usagef("upload needs a file, not stdin: its parts are read at their offsets (use put for stdin)")
		}
		if err := notADirectory("upload", local); err != nil {
			return err
		}
		remote, err := intoFolder(remotePathArg(args[1]), local)
		if err != nil {
			return err
		}
		fi, err := os.Stat(local)
		if err != nil {
			return err
		}
		opts := client.UploadOptions{
			Replace: *replace, Parallel: *parallel, IfMatch: *ifMatch, SHA256: *sum, ExpiresIn: time.Duration(expiresIn),
			ContentType: cmp.Or(*contentType, mime.TypeByExtension(filepath.Ext(local))),
		}
		// An empty file, which a session cannot hold, goes in one POST.
		t := &transfer{verb: "upload", remote: remote, viaSession: fi.Size() > 0, whole: fi.Size() == 0}
		bar := cli.watch(&opts, fi.Size(), t)
		f, err := cli.client.UploadFile(ctx, local, remote, opts)
		cli.endBar(bar)
		if err != nil {
			return t.failed(err)
		}
		return cli.printFile(f, fmt.Sprintf("%s  %s  %d bytes  version %d", f.ID, f.Path, f.SizeBytes, f.Version))
	}
}

// barMinSize is the smallest transfer that gets a progress bar: a smaller
// one is over before a bar would say anything.
const barMinSize = 1 << 20

// watch points opts' callbacks at the transfer t and, on a terminal and
// for size bytes or more than barMinSize, at a progress bar on stderr
// whose phases are labelled. End the bar with endBar.
func (cli *cliRun) watch(opts *client.UploadOptions, size int64, t *transfer) *progress {
	var bar *progress
	if cli.stderrTTY && size >= barMinSize {
		bar = &progress{w: cli.stderr, now: time.Now}
		cli.mu.Lock()
		cli.bar = bar
		cli.mu.Unlock()
	}
	opts.OnSession = func(u *client.Upload) {
		t.onSession(u)
		if len(u.Parts) > 0 && cli.stderrTTY {
			cli.note(fmt.Sprintf("resuming %s: %d of %d parts already sent", u.ID, len(u.Parts), u.PartCount))
		}
	}
	opts.HashProgress = func(hashed, total int64) {
		t.onHash()
		bar.update(phaseHashing, hashed, total)
	}
	opts.Progress = func(sent, total int64) {
		t.onSent(sent, total)
		bar.update(phaseUploading, sent, total)
	}
	return bar
}

// endBar moves past the bar; notes print on lines of their own again.
func (cli *cliRun) endBar(bar *progress) {
	cli.mu.Lock()
	cli.bar = nil
	cli.mu.Unlock()
	bar.end()
}

// The phases a progress bar shows.
const (
	phaseHashing     = "hashing"
	phaseUploading   = "uploading"
	phaseDownloading = "downloading"
)

// progress draws a transfer's progress on one line of a terminal.
type progress struct {
	w   io.Writer
	now func() time.Time

	mu    sync.Mutex
	phase string
	t0    time.Time // the phase's first report, from which the rate is measured
	sent0 int64
	drawn time.Time // when the bar was last drawn
	line  string    // what was drawn last
	// extra, when set, is appended to every line drawn (cp -r: the
	// files done).
	extra func() string
}

// update redraws the bar, at most ten times a second, at once when the
// phase changes, and at the end of each phase. A total below zero is
// unknown: the line shows the bytes and the rate, without a bar. A nil
// bar draws nothing.
func (p *progress) update(phase string, sent, total int64) {
	if p == nil {
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if phase != p.phase {
		p.phase, p.t0, p.drawn = phase, time.Time{}, time.Time{}
	}
	if p.t0.IsZero() {
		p.t0, p.sent0 = now, sent
	}
	if (total < 0 || sent < total) && !p.drawn.IsZero() && now.Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.drawn = now
	rate := -1.0
	if secs := now.Sub(p.t0).Seconds(); secs > 0 {
		rate = float64(sent-p.sent0) / secs
	}
	p.line = progressLine(phase, sent, total, rate)
	if p.extra != nil {
		p.line += p.extra()
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.line)
}

// above prints a line on w (stdout, on the same terminal) with the bar
// out of its way, and draws the bar again under it. A nil bar just
// prints.
func (p *progress) above(w io.Writer, line string) {
	if p == nil {
		fmt.Fprintln(w, line)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintln(w, line)
	if p.line != "" {
		fmt.Fprintf(p.w, "\r%s\x1b[K", p.line)
	}
}

// final draws the bar once more, whenever it was drawn last: the end of
// a download whose total was unknown until now.
func (p *progress) final(phase string, sent int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.drawn = time.Time{}
	p.mu.Unlock()
	p.update(phase, sent, -1)
}

// interject prints a line of its own above the bar and draws the bar
// again under it.
func (p *progress) interject(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line == "" {
		fmt.Fprintln(p.w, line)
		return
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K\n%s", line, p.line)
}

// end moves past the bar.
func (p *progress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != "" {
		fmt.Fprintln(p.w)
	}
}

// barWidth is the number of cells of the bar between its brackets.
const barWidth = 30

// progressLine renders "uploading [=====>    ] 45% 120.0/256.0 MiB 38.2 MiB/s",
// or "downloading 120.0 MiB 38.2 MiB/s" when the total is unknown (below
// zero); a negative rate is not shown.
func progressLine(phase string, sent, total int64, rate float64) string {
	if total < 0 {
		div, unit := byteUnit(sent)
		return withRate(fmt.Sprintf("%-9s %.1f %s", phase, float64(sent)/div, unit), rate)
	}
	frac := 1.0
	if total > 0 {
		frac = float64(min(max(sent, 0), total)) / float64(total)
	}
	cells := int(frac * barWidth)
	bar := strings.Repeat("=", cells)
	if cells < barWidth {
		if cells > 0 {
			bar = bar[:cells-1] + ">"
		}
		bar += strings.Repeat(" ", barWidth-cells)
	}
	div, unit := byteUnit(total)
	line := fmt.Sprintf("%-9s [%s] %3d%% %.1f/%.1f %s", phase, bar, int(frac*100), float64(sent)/div, float64(total)/div, unit)
	return withRate(line, rate)
}

// withRate appends a rate of bytes per second, unless it is negative.
func withRate(line string, rate float64) string {
	if rate < 0 {
		return line
	}
	div, unit := byteUnit(int64(rate))
	return line + fmt.Sprintf(" %.1f %s/s", rate/div, unit)
}

// byteUnit chooses the binary unit that shows n best.
func byteUnit(n int64) (float64, string) {
	switch {
	case n >= 1<<30:
		return 1 << 30, "GiB"
	case n >= 1<<20:
		return 1 << 20, "MiB"
	case n >= 1<<10:
		return 1 << 10, "KiB"
	}
	return 1, "B"
}

// sizeValue is a flag holding a size in bytes: "1048576", "64MiB", "2GiB".
type sizeValue int64

func sizeFlag(fs *flag.FlagSet, name string, value int64, usage string) *int64 {
	v := sizeValue(value)
	fs.Var(&v, name, usage)
	return (*int64)(&v)
}

func (v *sizeValue) String() string {
	n := int64(*v)
	for _, u := range []struct {
		name string
		div  int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.div && n%u.div == 0 {
			return strconv.FormatInt(n/u.div, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v *sizeValue) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if rest, ok := strings.CutSuffix(num, suffix); ok {
			num, mult = strings.TrimSpace(rest), m
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<62)/mult {
		return fmt.Errorf("want a positive number of bytes, optionally with KiB, MiB or GiB, not %q", s)
	}
	*v = sizeValue(n * mult)
	return nil
}
