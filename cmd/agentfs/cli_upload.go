package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentfs/agentfs/client"
)

func uploadFlags(fs *flag.FlagSet) func(context.Context, *cliRun, []string) error {
	replace := fs.Bool("replace", false, "replace the live file at REMOTE_PATH (keeps its id and url)")
	parallel := fs.Int("parallel", client.DefaultParallel, "how many parts to send at once")
	contentType := fs.String("content-type", "", "the file's media type (default: from LOCAL's extension)")
	ifMatch := fs.String("if-match", "", "replace only while the file has this ETag (needs --replace)")
	sum := fs.String("sha256", "", "the file's SHA-256 in hex, if known (default: computed from LOCAL)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 2 {
			return usagef("upload needs LOCAL and REMOTE_PATH")
		}
		if *parallel < 1 {
			return usagef("--parallel must be at least 1")
		}
		local, remote := args[0], args[1]
		if local == "-" {
			return usagef("upload needs a file, not stdin: its parts are read at their offsets (use put for stdin)")
		}
		opts := client.UploadOptions{
			Replace: *replace, Parallel: *parallel, IfMatch: *ifMatch, SHA256: *sum,
			ContentType: cmpOr(*contentType, mime.TypeByExtension(filepath.Ext(local))),
		}
		var session *client.Upload
		opts.OnSession = func(u *client.Upload) {
			session = u
			if len(u.Parts) > 0 && isTerminal(cli.stderr) {
				fmt.Fprintf(cli.stderr, "resuming %s: %d of %d parts already sent\n", u.ID, len(u.Parts), u.PartCount)
			}
		}
		bar := cli.progressBar(&opts)
		f, err := cli.client.UploadFile(ctx, local, remote, opts)
		bar.end()
		if err != nil {
			if session != nil && isTerminal(cli.stderr) && resumable(err) {
				fmt.Fprintf(cli.stderr, "the upload session %s is kept until %s: run the same command again to resume it\n",
					session.ID, session.ExpiresAt.Local().Format(time.DateTime))
			}
			return err
		}
		return cli.printFile(f, fmt.Sprintf("%s  %s  %d bytes  version %d", f.ID, f.Path, f.SizeBytes, f.Version))
	}
}

// resumable reports whether running an upload again may finish it: not
// after an answer that running it again would get too.
func resumable(err error) bool {
	var p *client.Problem
	if !errors.As(err, &p) {
		return true // cancelled, or the connection failed
	}
	return p.Retryable
}

// progress draws an upload's progress on stderr when it is a terminal.
type progress struct {
	w   io.Writer
	now func() time.Time

	mu    sync.Mutex
	t0    time.Time // the first report, from which the rate is measured
	sent0 int64
	drawn time.Time // when the bar was last drawn
	any   bool
}

// progressBar sets opts.Progress to draw a bar on stderr when stderr is a
// terminal; end the bar once the upload returns.
func (cli *cliRun) progressBar(opts *client.UploadOptions) *progress {
	if !isTerminal(cli.stderr) {
		return nil
	}
	p := &progress{w: cli.stderr, now: time.Now}
	opts.Progress = p.update
	return p
}

// update redraws the bar, at most ten times a second and once at the end.
func (p *progress) update(sent, total int64) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t0.IsZero() {
		p.t0, p.sent0 = now, sent
	}
	if sent < total && now.Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.drawn, p.any = now, true
	rate := -1.0
	if secs := now.Sub(p.t0).Seconds(); secs > 0 {
		rate = float64(sent-p.sent0) / secs
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(sent, total, rate))
}

// end moves past the bar.
func (p *progress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.any {
		fmt.Fprintln(p.w)
	}
}

// barWidth is the number of cells of the bar between its brackets.
const barWidth = 30

// progressLine renders "[=====>    ] 45% 120.0/256.0 MiB 38.2 MiB/s";
// a negative rate is not shown.
func progressLine(sent, total int64, rate float64) string {
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
	line := fmt.Sprintf("[%s] %3d%% %.1f/%.1f %s", bar, int(frac*100), float64(sent)/div, float64(total)/div, unit)
	if rate >= 0 {
		div, unit := byteUnit(int64(rate))
		line += fmt.Sprintf(" %.1f %s/s", rate/div, unit)
	}
	return line
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
