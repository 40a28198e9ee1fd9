package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mount"
)

// mountBudget is the least ratio of rclone mount's time to the AgentFS
// mount's on each line (DESIGN §11): the mount at least as fast.
const mountBudget = 1.0

// feedBudget is the bound on the p50 from a REST write's answer to the
// file's appearance in the mount.
const feedBudget = 100 * time.Millisecond

// mountSide is one place the programs work in: local disk, the AgentFS
// mount, rclone mount.
type mountSide struct {
	name string
	dir  string
	// settled waits until every file written is stored (for local disk,
	// sync; for the AgentFS mount nothing, a closed file is stored; for
	// rclone, until its upload queue is empty).
	settled func(ctx context.Context) error
	stop    func()
}

// mountRows: untar a tree, grep -r it, git status in a clone of it, each
// on local disk, in the AgentFS mount and in rclone mount (--vfs-cache-mode
// writes) of the same S3 server, each timed until every file is stored;
// then the feed latency: a REST write's answer to its appearance in the
// mount.
func (b *bench) mountRows(ctx context.Context) ([]row, error) {
	c := b.cfg
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("no /dev/fuse (%v): the mount measurement needs FUSE (run as root with the fuse module loaded)", err)
	}
	rclone := env("RCLONE_BIN", "rclone")
	if _, err := exec.LookPath(rclone); err != nil {
		return nil, fmt.Errorf("no rclone (%v): install Debian's rclone (scripts/bench.sh does, through ensure_deps rclone)", err)
	}
	tree := c.mountTree
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("-mount-tree %s: not a folder (%v)", tree, err)
	}
	work, err := os.MkdirTemp("", "agentfs-bench-mount-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	tarball := filepath.Join(work, "tree.tar")
	if out, err := exec.CommandContext(ctx, "tar", "-cf", tarball, "-C", filepath.Dir(tree), filepath.Base(tree)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar of %s: %v %s", tree, err, out)
	}
	files := 0
	_ = filepath.WalkDir(tree, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return nil
	})
	// The repository the clones are made of: the tree, committed.
	repo := filepath.Join(work, "repo")
	if err := run(ctx, work, "mkdir repo && tar -xf tree.tar -C repo && cd repo && git init -q -b main . && git add -A && git commit -qm tree"); err != nil {
		return nil, err
	}

	cl, err := client.New(c.url, c.token)
	if err != nil {
		return nil, err
	}
	prefix := b.path("mount")
	var sides []*mountSide
	defer func() {
		for _, s := range sides {
			s.stop()
		}
	}()
	local := filepath.Join(work, "local")
	if err := os.Mkdir(local, 0o755); err != nil {
		return nil, err
	}
	sides = append(sides, &mountSide{name: "disk", dir: local, stop: func() {},
		settled: func(ctx context.Context) error { return run(ctx, local, "sync") }})
	s, err := agentfsSide(cl, prefix, filepath.Join(work, "agentfs"), filepath.Join(work, "agentfs-cache"), false)
	if err != nil {
		return nil, err
	}
	sides = append(sides, s)
	if s, err = agentfsSide(cl, prefix+"-wb", filepath.Join(work, "agentfs-wb"), filepath.Join(work, "agentfs-wb-cache"), true); err != nil {
		return nil, err
	}
	sides = append(sides, s)
	if s, err = b.rcloneSide(ctx, rclone, work); err != nil {
		return nil, err
	}
	sides = append(sides, s)

	type op struct {
		name, script string
		before       string // untimed, run first
	}
	base := filepath.Base(tree)
	ops := []op{
		{name: "untar", script: "tar -xf " + tarball},
		{name: "grep -r", script: "grep -r -c package " + base + " > /dev/null"},
		{name: "git status in a clone", before: "git clone -q " + repo + " clone", script: "cd clone && git status --porcelain > /dev/null"},
	}
	what := fmt.Sprintf("%s (%d files", tree, files)
	if c.quick {
		what += ", the quick tree"
	}
	what += ")"
	var rows []row
	for _, o := range ops {
		took := map[string]time.Duration{}
		for _, s := range sides {
			if o.before != "" {
				if err := run(ctx, s.dir, o.before); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				if err := s.settled(ctx); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
			}
			t0 := time.Now()
			if err := run(ctx, s.dir, o.script); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			ran := time.Since(t0)
			if err := s.settled(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			took[s.name] = time.Since(t0)
			logf("  %s on %s: %s (the program %s, then settled)", o.name, s.name, took[s.name].Round(time.Millisecond), ran.Round(time.Millisecond))
			if err := b.searchIndexed(ctx, s.name); err != nil {
				return nil, err
			}
		}
		for _, side := range []struct{ key, label string }{{"agentfs", "mount"}, {"agentfs-wb", "mount --write-back"}} {
			r := took["rclone"].Seconds() / took[side.key].Seconds()
			verdict := "meets"
			if r < mountBudget {
				verdict = "misses"
			}
			rows = append(rows, row{
				name:    fmt.Sprintf("%s: %s of %s, until stored", side.label, o.name, what),
				agentfs: fmtSec(took[side.key]),
				direct:  fmt.Sprintf("%s (rclone mount); disk %s", fmtSec(took["rclone"]), fmtSec(took["disk"])),
				ratio:   fmt.Sprintf("%.2f× rclone, %.2f× disk", r, took["disk"].Seconds()/took[side.key].Seconds()),
				budget:  fmt.Sprintf("≥ %g× rclone (rclone's time ÷ the mount's)", mountBudget),
				verdict: verdict,
			})
		}
	}
	b.notes = append(b.notes, "mount: rclone mount "+rcloneArgsNote+"; each line's time runs until every file is stored: "+
		"the AgentFS mount's close stores the file; with --write-back (its own cache dir, its default workers) until Settle (no store pending); "+
		"rclone's upload queue (rc vfs/stats) is empty; local disk after sync. After each side (untimed) the bench waits until the server's "+
		"search index holds every text written (its mover runs once writes pause), so that work does not run into the next side's time.")

	feed, err := b.feedLatency(ctx, cl, prefix, sides[1].dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, feed)
	return rows, nil
}

// fmtSec is a duration in seconds.
func fmtSec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// run runs a shell script in dir.
func run(ctx context.Context, dir, script string) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", `cd "$1" && `+script, "sh", dir)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v %s", script, err, oneLine(string(out), 300))
	}
	return nil
}

// agentfsSide mounts prefix of the bench subject at dir, in write-back
// when writeBack (settled: no store pending).
func agentfsSide(cl *client.Client, prefix, dir, cache string, writeBack bool) (*mountSide, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	m, err := mount.New(cl, dir, mount.Options{Prefix: prefix, CacheDir: cache, WriteBack: writeBack})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	name := "agentfs"
	if writeBack {
		name = "agentfs-wb"
	}
	return &mountSide{name: name, dir: dir,
		settled: func(ctx context.Context) error {
			if err := m.Settle(ctx); err != nil { // at once without write-back: a closed file is stored
				return err
			}
			if n := m.Refused(); n > 0 {
				return fmt.Errorf("%d stores refused (in %s/failed)", n, cache)
			}
			return nil
		},
		stop: func() {
			for range 50 {
				if m.Unmount() == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			_ = exec.Command("fusermount3", "-uz", dir).Run()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
		}}, nil
}

// rcloneArgsNote says how rclone mount runs.
const rcloneArgsNote = "--vfs-cache-mode writes --vfs-write-back 0s (an upload starts as soon as the file is closed, not after the default 5 s), on the same S3 server, in the direct side's bucket"

// rcloneSide starts rclone mount of a folder of the direct bucket, with
// its remote control on a loopback port for its upload queue.
func (b *bench) rcloneSide(ctx context.Context, rclone, work string) (*mountSide, error) {
	c := b.cfg
	dir := filepath.Join(work, "rclone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rcAddr := l.Addr().String()
	l.Close()
	cmd := exec.Command(rclone, "mount", "afsbench:"+c.directBucket+"/"+b.tag+"-rclone", dir,
		"--vfs-cache-mode", "writes", "--vfs-write-back", "0s",
		"--cache-dir", filepath.Join(work, "rclone-cache"),
		"--rc", "--rc-addr", rcAddr, "--rc-no-auth")
	// The AWS SDK in rclone refuses AWS_CA_BUNDLE with rclone's own
	// transport; the endpoint is plain HTTP on loopback anyway.
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			environ = append(environ, kv)
		}
	}
	cmd.Env = append(environ,
		"RCLONE_CONFIG_AFSBENCH_TYPE=s3", "RCLONE_CONFIG_AFSBENCH_PROVIDER=Other",
		"RCLONE_CONFIG_AFSBENCH_ENDPOINT=http://"+c.s3Endpoint,
		"RCLONE_CONFIG_AFSBENCH_ACCESS_KEY_ID="+c.s3AccessKey,
		"RCLONE_CONFIG_AFSBENCH_SECRET_ACCESS_KEY="+c.s3SecretKey,
		"RCLONE_CONFIG_AFSBENCH_REGION="+c.s3Region,
		"RCLONE_CONFIG_AFSBENCH_FORCE_PATH_STYLE=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	side := &mountSide{name: "rclone", dir: dir, stop: func() {
		_ = exec.Command("fusermount3", "-u", dir).Run()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			_ = exec.Command("fusermount3", "-uz", dir).Run()
			<-exited
		}
	}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		mounts, _ := os.ReadFile("/proc/self/mounts")
		if strings.Contains(string(mounts), " "+dir+" fuse.rclone") {
			break
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("rclone mount exited: %s", oneLine(stderr.String(), 300))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			side.stop()
			return nil, fmt.Errorf("rclone mount did not mount in 30 s: %s", oneLine(stderr.String(), 300))
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	side.settled = func(ctx context.Context) error {
		for {
			n, err := rcloneUploads(ctx, hc, rcAddr)
			if err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return side, nil
}

// rcloneUploads is how many files rclone mount still has to upload (in
// progress and queued), from its remote control's vfs/stats.
func rcloneUploads(ctx context.Context, hc *http.Client, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/vfs/stats", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("rclone rc vfs/stats: %w", err)
	}
	defer res.Body.Close()
	var stats struct {
		DiskCache *struct {
			UploadsInProgress *int `json:"uploadsInProgress"`
			UploadsQueued     *int `json:"uploadsQueued"`
		} `json:"diskCache"`
	}
	if err := json.NewDecoder(res.Body).Decode(&stats); err != nil {
		return 0, fmt.Errorf("rclone rc vfs/stats: %w", err)
	}
	if res.StatusCode != http.StatusOK || stats.DiskCache == nil || stats.DiskCache.UploadsInProgress == nil || stats.DiskCache.UploadsQueued == nil {
		return 0, errors.New("rclone rc vfs/stats: no diskCache.uploadsInProgress/uploadsQueued in its answer (status " + strconv.Itoa(res.StatusCode) + ")")
	}
	return *stats.DiskCache.UploadsInProgress + *stats.DiskCache.UploadsQueued, nil
}

// feedLatency writes files through REST into a folder the mount has
// listed and times, from each write's answer, until the mount shows the
// file with its content; the p50 counts.
func (b *bench) feedLatency(ctx context.Context, cl *client.Client, prefix, dir string) (row, error) {
	n := b.cfg.mountFeed
	folder := filepath.Join(dir, "feed")
	if err := os.Mkdir(folder, 0o755); err != nil {
		return row{}, err
	}
	if _, err := os.ReadDir(folder); err != nil {
		return row{}, err
	}
	var lat []time.Duration
	for i := range n + 3 {
		name := fmt.Sprintf("f%d.txt", i)
		body := fmt.Sprintf("feed %d %s", i, b.tag)
		local := filepath.Join(folder, name)
		if _, err := os.Stat(local); err == nil {
			return row{}, fmt.Errorf("%s is there before its write", local)
		}
		if _, err := cl.PutFile(ctx, prefix+"/feed/"+name, strings.NewReader(body), client.PutOptions{}); err != nil {
			return row{}, err
		}
		t0 := time.Now()
		for {
			if got, err := os.ReadFile(local); err == nil && string(got) == body {
				break
			}
			if time.Since(t0) > 20*time.Second {
				return row{}, fmt.Errorf("%s never appeared in the mount", local)
			}
			time.Sleep(time.Millisecond)
		}
		if i >= 3 {
			lat = append(lat, time.Since(t0))
		}
	}
	p50 := percentile(lat, 50)
	verdict := "meets"
	if p50 > feedBudget {
		verdict = "misses"
	}
	b.notes = append(b.notes, fmt.Sprintf("mount feed: %d REST writes of new files into a folder the mount has listed (the kernel holds its negative entries 10 s unless the feed invalidates them), p90 %s; polled every 1 ms.",
		n, fmtMS(percentile(lat, 90))))
	return row{
		name:    fmt.Sprintf("mount: a REST write's answer to the file in the mount, p50 of %d", n),
		agentfs: fmtMS(p50),
		budget:  fmt.Sprintf("p50 ≤ %s", fmtMS(feedBudget)),
		verdict: verdict,
	}, nil
}

// searchIndexed waits, untimed, until the server's mover has put every
// pending text into the search index (it waits for writes to pause), so
// that its work does not run into the next side's measurement; it logs
// how long that took. Without -database-url it waits for nothing.
func (b *bench) searchIndexed(ctx context.Context, side string) error {
	if b.cfg.databaseURL == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, b.cfg.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM search_texts WHERE kind = 3").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("%s: %d texts still pending in the search index after 2 minutes", side, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(t0); d > 100*time.Millisecond {
		logf("  (the search index took the texts written on %s %s later)", side, d.Round(time.Millisecond))
	}
	return nil
}
