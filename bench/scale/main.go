// Command scaletest puts a steady mixed load on AgentFS through a load
// balancer, runs faults on a schedule, and checks what the load left
// (DESIGN §24; scripts/scale-test.sh, `make scale-test`, starts the parts
// and runs it):
//
//   - keyed uploads of new files, replaces of files each worker owns,
//     batches of puts, uploads in parts, and event followers, all through
//     the Go client with its retries and idempotency keys;
//   - each -fault command (bash) at its share of -duration;
//   - then: acknowledged writes lost, duplicated effects, gaps or repeats
//     in what each follower saw, errors the client returned after its
//     retries, the longest stall after each fault, and every live
//     version's blob read back from S3 (size and SHA-256).
//
// Every loop is bounded in count and in time, and it refuses any address
// but the loopback interface. It exits 0 when every check holds, 1 when
// one does not, 2 on a wrong invocation.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

type fault struct {
	name, cmd, check string
	at               time.Time
	ran              bool
	note             string
}

type faultList []*fault

func (f *faultList) String() string { return "" }
func (f *faultList) Set(v string) error {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok || name == "" || cmd == "" {
		return fmt.Errorf("want NAME=COMMAND, not %q", v)
	}
	*f = append(*f, &fault{name: name, cmd: cmd})
	return nil
}

type checkList map[string]string

func (c checkList) String() string { return "" }
func (c checkList) Set(v string) error {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want NAME=COMMAND, not %q", v)
	}
	c[name] = cmd
	return nil
}

type config struct {
	url, token, databaseURL        string
	s3Endpoint, s3Access, s3Secret string
	bucket                         string
	duration                       time.Duration
	faults                         faultList
	checks                         checkList
	apiPIDs, pgPIDs, proxyPIDs     string
	s3PIDs                         string
	creators, replacers            int
	maxOps                         int
}

func main() {
	cfg := config{checks: checkList{}}
	flag.StringVar(&cfg.url, "url", "", "AgentFS base URL (the load balancer), on 127.0.0.1")
	flag.StringVar(&cfg.token, "token", "", "bearer token with read and write")
	flag.StringVar(&cfg.databaseURL, "database-url", "", "Postgres URL (for the checks; multi-host with target_session_attrs=read-write)")
	flag.StringVar(&cfg.s3Endpoint, "s3-endpoint", "", "S3 host:port on 127.0.0.1 (for the DB-S3 check)")
	flag.StringVar(&cfg.s3Access, "s3-access-key", "", "S3 access key")
	flag.StringVar(&cfg.s3Secret, "s3-secret-key", "", "S3 secret key")
	flag.StringVar(&cfg.bucket, "bucket", "agentfs", "S3 bucket AgentFS uses")
	flag.DurationVar(&cfg.duration, "duration", 150*time.Second, "length of the load (30s to 10m); faults come at 20%, 40%, 60%... of it")
	flag.Var(&cfg.faults, "fault", "NAME=COMMAND: a fault, run with bash -c at its time (repeat, in order)")
	flag.Var(cfg.checks, "fault-check", "NAME=COMMAND: a command printing a fault's state, run each second for 30 s after it (its changes are shown)")
	flag.StringVar(&cfg.apiPIDs, "api-pids", "", "pid files of the API instances, comma-separated (CPU use)")
	flag.StringVar(&cfg.pgPIDs, "pg-pids", "", "postmaster.pid files of the Postgres nodes (CPU use of each whole server)")
	flag.StringVar(&cfg.proxyPIDs, "proxy-pids", "", "pid files of the load balancer")
	flag.StringVar(&cfg.s3PIDs, "s3-pids", "", "pid files of the S3 nodes")
	flag.IntVar(&cfg.creators, "creators", 3, "workers uploading new files")
	flag.IntVar(&cfg.replacers, "replacers", 3, "workers replacing files of their own")
	flag.IntVar(&cfg.maxOps, "max-ops", 20000, "most operations of each worker")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "scaletest:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaletest:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func (c config) validate() error {
	for _, u := range []struct{ name, v string }{{"-url", c.url}, {"-database-url", c.databaseURL}} {
		p, err := url.Parse(u.v)
		if err != nil || p.Host == "" {
			return fmt.Errorf("%s: want a URL, not %q", u.name, u.v)
		}
		for _, h := range strings.Split(p.Host, ",") {
			if err := loopback(h); err != nil {
				return fmt.Errorf("%s: %w", u.name, err)
			}
		}
	}
	if err := loopback(c.s3Endpoint); err != nil {
		return fmt.Errorf("-s3-endpoint: %w", err)
	}
	if c.token == "" {
		return errors.New("-token is required")
	}
	if c.duration < 30*time.Second || c.duration > 10*time.Minute {
		return fmt.Errorf("-duration %v: from 30s to 10m", c.duration)
	}
	if c.maxOps < 1 || c.creators < 1 || c.replacers < 1 {
		return errors.New("-max-ops, -creators and -replacers must be at least 1")
	}
	return nil
}

// loopback refuses a host:port that is not on 127.0.0.1 or ::1.
func loopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("want host:port, not %q", hostport)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address: this program sends traffic to 127.0.0.1 only", host)
	}
	return nil
}

// write is one acknowledged write: the file it left.
type write struct {
	kind    string
	began   time.Time // when the call (or the batch it was an item of) began
	at      time.Time // when it was acknowledged
	fileID  string
	path    string
	sha     string
	version int64
}

// recorder collects what the workers saw.
type recorder struct {
	mu        sync.Mutex
	writes    []write
	errors    map[string]int
	examples  []string
	versionUp int // replaces whose version was not the previous one plus one
}

func (r *recorder) ack(w write) {
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
}

func (r *recorder) fail(kind string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[kind]++
	if len(r.examples) < 10 {
		r.examples = append(r.examples, fmt.Sprintf("%s at %s: %v", kind, time.Now().UTC().Format("15:04:05.000"), err))
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func run(ctx context.Context, cfg config) (bool, error) {
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
	}}
	var retries int
	var retryMu sync.Mutex
	c, err := client.New(cfg.url, cfg.token, client.WithHTTPClient(hc),
		client.WithOnRetry(func(int, time.Duration, error) { retryMu.Lock(); retries++; retryMu.Unlock() }))
	if err != nil {
		return false, err
	}
	rec := &recorder{errors: map[string]int{}}
	start := time.Now()
	end := start.Add(cfg.duration)
	for i, f := range cfg.faults {
		f.at = start.Add(cfg.duration * time.Duration(i+1) / 5)
		f.check = cfg.checks[f.name]
	}
	loadCtx, stopLoad := context.WithDeadline(ctx, end.Add(3*time.Minute))
	defer stopLoad()

	// Followers run from the start of the feed until they have seen its end.
	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	followers := make([]*follower, 2)
	var fwg sync.WaitGroup
	for i := range followers {
		followers[i] = &follower{}
		fwg.Add(1)
		go func() { defer fwg.Done(); followers[i].run(followCtx, c, rec) }()
	}

	var wg sync.WaitGroup
	for w := range cfg.creators {
		wg.Add(1)
		go func() { defer wg.Done(); creator(loadCtx, c, rec, w, end, cfg.maxOps) }()
	}
	for w := range cfg.replacers {
		wg.Add(1)
		go func() { defer wg.Done(); replacer(loadCtx, c, rec, w, end, cfg.maxOps) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); batcher(loadCtx, c, rec, end, cfg.maxOps) }()
	go func() { defer wg.Done(); uploader(loadCtx, c, rec, end, cfg.maxOps) }()

	// CPU of each part over the steady stretch before the first fault.
	steadyFrom := start.Add(5 * time.Second)
	steadyTo := end
	if len(cfg.faults) > 0 {
		steadyTo = cfg.faults[0].at
	}
	parts := []cpuPart{
		{name: "API (3 instances)", pidFiles: split(cfg.apiPIDs)},
		{name: "Postgres primary", pidFiles: first(split(cfg.pgPIDs)), tree: true},
		{name: "Postgres standby", pidFiles: rest(split(cfg.pgPIDs)), tree: true},
		{name: "MinIO (4 nodes)", pidFiles: split(cfg.s3PIDs)},
		{name: "HAProxy", pidFiles: split(cfg.proxyPIDs), tree: true},
		{name: "load generator", self: true},
	}
	sleepUntil(ctx, steadyFrom)
	for i := range parts {
		parts[i].begin = parts[i].ticks()
	}
	writesAt := func(t0, t1 time.Time) int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, w := range rec.writes {
			if !w.at.Before(t0) && w.at.Before(t1) {
				n++
			}
		}
		return n
	}

	for i, f := range cfg.faults {
		sleepUntil(ctx, f.at)
		if i == 0 {
			for j := range parts {
				parts[j].end = parts[j].ticks()
			}
		}
		if ctx.Err() != nil {
			break
		}
		f.at = time.Now()
		out, err := exec.CommandContext(ctx, "bash", "-c", f.cmd).CombinedOutput()
		f.ran = err == nil
		logf("fault %q at %.1fs: %v %s", f.name, f.at.Sub(start).Seconds(), errOr(err, "done"), strings.TrimSpace(string(out)))
		if f.check != "" {
			go watch(ctx, f, start)
		}
	}
	if len(cfg.faults) == 0 {
		sleepUntil(ctx, steadyTo)
		for j := range parts {
			parts[j].end = parts[j].ticks()
		}
	}
	wg.Wait()
	loadEnd := time.Now()
	logf("load stopped at %.1fs (workers done)", loadEnd.Sub(start).Seconds())
	steadyWrites := writesAt(steadyFrom, steadyTo)

	// The whole feed as it stands, read once from its start.
	feed, err := readFeed(ctx, c)
	if err != nil {
		return false, fmt.Errorf("read the feed: %w", err)
	}
	// Followers catch up to its end (bounded), then stop.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		caught := true
		for _, f := range followers {
			if f.count() < len(feed) {
				caught = false
			}
		}
		if caught {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopFollow()
	fwg.Wait()

	return report(ctx, cfg, rec, followers, feed, parts, steadyTo.Sub(steadyFrom), steadyWrites, start, loadEnd, retries)
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// watch runs a fault's check each second for 30 s and notes its changes.
func watch(ctx context.Context, f *fault, start time.Time) {
	last := ""
	var notes []string
	for i := 0; i < 30 && ctx.Err() == nil; i++ {
		out, _ := exec.CommandContext(ctx, "bash", "-c", f.check).Output()
		s := strings.TrimSpace(string(out))
		if s != last {
			logf("%s: %q at +%.1fs", f.name, s, time.Since(f.at).Seconds())
			notes = append(notes, fmt.Sprintf("+%.0fs %s", time.Since(f.at).Seconds(), s))
			last = s
		}
		time.Sleep(time.Second)
	}
	f.note = strings.Join(notes, "; ")
}

// content: n random bytes whose first bytes name the write, so that no two
// writes carry the same content.
func content(rng *rand.Rand, n int, name string) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	copy(b, name+"\n")
	return b
}

func creator(ctx context.Context, c *client.Client, rec *recorder, w int, end time.Time, maxOps int) {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	for i := 0; i < maxOps && time.Now().Before(end) && ctx.Err() == nil; i++ {
		path := fmt.Sprintf("scale/create/w%d/%05d.txt", w, i)
		body := content(rng, 512+rng.IntN(16<<10), path)
		s := sha256.Sum256(body)
		began := time.Now()
		f, err := c.PutFile(ctx, path, bytes.NewReader(body), client.PutOptions{ContentDigest: client.Digest(s[:])})
		if err != nil {
			rec.fail("create", err)
			continue
		}
		rec.ack(write{kind: "create", began: began, at: time.Now(), fileID: f.ID, path: path, sha: f.SHA256, version: f.Version})
		if f.SHA256 != sum(body) {
			rec.fail("create", fmt.Errorf("%s: answered sha256 %s, sent %s", path, f.SHA256, sum(body)))
		}
	}
}

func replacer(ctx context.Context, c *client.Client, rec *recorder, w int, end time.Time, maxOps int) {
	rng := rand.New(rand.NewPCG(uint64(w), 2))
	last := map[string]int64{}
	for i := 0; i < maxOps && time.Now().Before(end) && ctx.Err() == nil; i++ {
		path := fmt.Sprintf("scale/replace/w%d/%d.txt", w, i%4)
		body := content(rng, 256+rng.IntN(8<<10), fmt.Sprintf("%s #%d", path, i))
		began := time.Now()
		f, err := c.PutFile(ctx, path, bytes.NewReader(body), client.PutOptions{Replace: true})
		if err != nil {
			rec.fail("replace", err)
			last[path] = -1 // unknown from here on
			continue
		}
		rec.ack(write{kind: "replace", began: began, at: time.Now(), fileID: f.ID, path: path, sha: f.SHA256, version: f.Version})
		if prev, ok := last[path]; ok && prev >= 0 && f.Version != prev+1 {
			rec.mu.Lock()
			rec.versionUp++
			rec.mu.Unlock()
			logf("replace %s: version %d after %d", path, f.Version, prev)
		}
		last[path] = f.Version
	}
}

func batcher(ctx context.Context, c *client.Client, rec *recorder, end time.Time, maxOps int) {
	rng := rand.New(rand.NewPCG(7, 3))
	for i := 0; i < maxOps && time.Now().Before(end) && ctx.Err() == nil; i++ {
		var ops []client.BatchOp
		want := map[string]string{}
		for j := range 5 {
			path := fmt.Sprintf("scale/batch/%05d/%d.txt", i, j)
			body := content(rng, 256+rng.IntN(4<<10), path)
			ops = append(ops, client.BatchPut(path, body))
			want[path] = sum(body)
		}
		began := time.Now()
		b, err := c.CreateBatch(ctx, ops, client.BatchOptions{Wait: 10 * time.Second})
		if err == nil && !b.Terminal() {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			b, err = c.WaitBatch(wctx, b.ID)
			cancel()
		}
		if err != nil {
			rec.fail("batch", err)
			continue
		}
		for _, it := range b.Items {
			if it.Status != client.BatchItemSucceeded || it.File == nil {
				rec.fail("batch", fmt.Errorf("batch %s item %d: %s %v", b.ID, it.Index, it.Status, it.Error))
				continue
			}
			if it.File.SHA256 != want[it.File.Path] {
				rec.fail("batch", fmt.Errorf("batch %s item %d: sha256 %s, sent %s", b.ID, it.Index, it.File.SHA256, want[it.File.Path]))
			}
			rec.ack(write{kind: "batch item", began: began, at: time.Now(), fileID: it.File.ID, path: it.File.Path, sha: it.File.SHA256, version: it.File.Version})
		}
	}
}

func uploader(ctx context.Context, c *client.Client, rec *recorder, end time.Time, maxOps int) {
	rng := rand.New(rand.NewPCG(9, 4))
	base := content(rng, 6<<20, "")
	for i := 0; i < maxOps && time.Now().Before(end) && ctx.Err() == nil; i++ {
		path := fmt.Sprintf("scale/parts/%04d.bin", i)
		body := slices.Clone(base)
		copy(body, fmt.Sprintf("%s %d\n", path, rng.Uint64()))
		began := time.Now()
		f, err := c.UploadReaderAt(ctx, bytes.NewReader(body), int64(len(body)), path, client.UploadOptions{Parallel: 2})
		if err != nil {
			rec.fail("upload in parts", err)
			continue
		}
		if f.SHA256 != sum(body) {
			rec.fail("upload in parts", fmt.Errorf("%s: sha256 %s, sent %s", path, f.SHA256, sum(body)))
		}
		rec.ack(write{kind: "upload in parts", began: began, at: time.Now(), fileID: f.ID, path: path, sha: f.SHA256, version: f.Version})
	}
}

// follower follows the feed of scale/ from its start, keeping every event
// id it is handed.
type follower struct {
	mu   sync.Mutex
	ids  []string
	seen []sighting
}

// sighting: when a follower was handed an event, and how long after the
// event's time.
type sighting struct {
	at  time.Time
	lag time.Duration
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

func (f *follower) run(ctx context.Context, c *client.Client, rec *recorder) {
	cursor := ""
	// Bounded: one restart per error, at most 1000.
	for range 1000 {
		fl := c.FollowEvents(client.EventOptions{Prefix: "scale/", After: cursor}, client.FollowOptions{Wait: 5 * time.Second})
		for e, err := range fl.All(ctx) {
			if err != nil {
				if ctx.Err() == nil {
					rec.fail("event follower", err)
				}
				break
			}
			f.mu.Lock()
			f.ids = append(f.ids, e.ID)
			f.seen = append(f.seen, sighting{at: time.Now(), lag: time.Since(e.At)})
			f.mu.Unlock()
		}
		cursor = fl.Cursor()
		if ctx.Err() != nil {
			return
		}
		time.Sleep(time.Second)
	}
}

// readFeed reads the events of scale/ from the start of the feed to its
// current end.
func readFeed(ctx context.Context, c *client.Client) ([]client.Event, error) {
	var all []client.Event
	after := ""
	for range 100000 {
		page, err := c.Events(ctx, client.EventOptions{Prefix: "scale/", After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if len(page.Data) == 0 {
			return all, nil
		}
		after = page.NextCursor
	}
	return nil, errors.New("the feed did not end within 100,000 pages")
}

// cpuPart is the CPU time of some processes (with their children when
// tree) between begin and end, in clock ticks.
type cpuPart struct {
	name       string
	pidFiles   []string
	tree, self bool
	begin, end int64
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
func first(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s[:1]
}
func rest(s []string) []string {
	if len(s) < 2 {
		return nil
	}
	return s[1:]
}

func (p *cpuPart) ticks() int64 {
	var pids []int
	if p.self {
		pids = []int{os.Getpid()}
	}
	for _, f := range p.pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			pids = append(pids, pid)
		}
	}
	if p.tree {
		pids = withChildren(pids)
	}
	var t int64
	for _, pid := range pids {
		if u, _, ok := stat(pid); ok {
			t += u
		}
	}
	return t
}

// stat answers a process's utime+stime (ticks) and its parent.
func stat(pid int) (int64, int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After the command: state(0) ppid(1) ... utime(11) stime(12).
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, ppid, true
}

func withChildren(roots []int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, pp, ok := stat(pid); ok {
			parent[pid] = pp
		}
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if in[pp] && !in[pid] {
				in[pid], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		out = append(out, pid)
	}
	return out
}

const ticksPerSecond = 100 // USER_HZ on Linux

func report(ctx context.Context, cfg config, rec *recorder, followers []*follower, feed []client.Event,
	parts []cpuPart, steady time.Duration, steadyWrites int, start, loadEnd time.Time, retries int) (bool, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	writes := rec.writes
	slices.SortFunc(writes, func(a, b write) int { return a.at.Compare(b.at) })

	// What the database holds now.
	dbctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(dbctx, cfg.databaseURL)
	if err != nil {
		return false, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	type row struct {
		path, sha string
		version   int64
	}
	live := map[string]row{}
	rows, err := conn.Query(dbctx, `SELECT id, path, sha256, version FROM files WHERE deleted_at IS NULL AND path LIKE 'scale/%'`)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.path, &r.sha, &r.version); err != nil {
			return false, err
		}
		live[id] = r
	}
	if err := rows.Err(); err != nil {
		return false, err
	}

	// Lost: an acknowledged write that the file does not hold, unless a
	// later acknowledged write to the same file replaced it.
	latest := map[string]write{}
	for _, w := range writes {
		if l, ok := latest[w.fileID]; !ok || w.version > l.version {
			latest[w.fileID] = w
		}
	}
	lost := 0
	var lostEx []string
	for id, w := range latest {
		r, ok := live[id]
		if !ok || r.sha != w.sha || r.version != w.version || r.path != w.path {
			lost++
			if len(lostEx) < 5 {
				lostEx = append(lostEx, fmt.Sprintf("%s %s v%d: database has %+v (found: %v)", w.kind, w.path, w.version, r, ok))
			}
		}
	}
	// Duplicated effects: a file or version the feed shows more than once,
	// a replace whose version skipped one, a file nobody acknowledged.
	dup := rec.versionUp
	seen := map[string]int{}
	for _, e := range feed {
		if e.Version != nil {
			seen[fmt.Sprintf("%s/%d", e.FileID, *e.Version)]++
		}
	}
	acked := map[string]bool{}
	for _, w := range writes {
		acked[fmt.Sprintf("%s/%d", w.fileID, w.version)] = true
	}
	unacked := 0
	for k, n := range seen {
		if n > 1 {
			dup += n - 1
		}
		if !acked[k] {
			unacked++
		}
	}
	for id := range live {
		if _, ok := latest[id]; !ok {
			unacked++
		}
	}
	missingEvents := 0
	for k := range acked {
		if seen[k] == 0 {
			missingEvents++
		}
	}

	// What each follower saw against the feed read once.
	gaps, repeats := 0, 0
	for _, f := range followers {
		f.mu.Lock()
		ids := slices.Clone(f.ids)
		f.mu.Unlock()
		had := map[string]bool{}
		for _, id := range ids {
			if had[id] {
				repeats++
			}
			had[id] = true
		}
		for i, e := range feed {
			if !had[e.ID] {
				gaps++
			} else if i < len(ids) && ids[i] != e.ID {
				gaps++ // out of order counts as a gap at that position
			}
		}
	}

	// DB-S3: every live version's blob, read back.
	s3c, err := minio.New(cfg.s3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(cfg.s3Access, cfg.s3Secret, "")})
	if err != nil {
		return false, err
	}
	vrows, err := conn.Query(dbctx, `SELECT v.blob_key, v.size_bytes, v.sha256 FROM file_versions v JOIN files f ON f.id = v.file_id
		WHERE f.deleted_at IS NULL AND f.path LIKE 'scale/%'`)
	if err != nil {
		return false, err
	}
	type blob struct {
		key, sha string
		size     int64
	}
	var blobs []blob
	for vrows.Next() {
		var b blob
		if err := vrows.Scan(&b.key, &b.size, &b.sha); err != nil {
			return false, err
		}
		blobs = append(blobs, b)
	}
	if err := vrows.Err(); err != nil {
		return false, err
	}
	bad := 0
	var badEx []string
	for _, b := range blobs {
		got, size, err := readBlob(dbctx, s3c, cfg.bucket, b.key)
		if err != nil || got != b.sha || size != b.size {
			bad++
			if len(badEx) < 5 {
				badEx = append(badEx, fmt.Sprintf("%s: %d bytes sha256 %s, S3 has %d bytes %s (%v)", b.key, b.size, b.sha, size, got, err))
			}
		}
	}

	errorsAfterRetries := 0
	for _, n := range rec.errors {
		errorsAfterRetries += n
	}

	// Print.
	kinds := map[string]int{}
	for _, w := range writes {
		kinds[w.kind]++
	}
	fmt.Printf("\nscale-test: 3 agentfs serve behind HAProxy; MinIO 4 nodes x 2 drives (erasure coded) behind HAProxy;\n")
	fmt.Printf("Postgres primary + synchronous standby under pg_auto_failover, multi-host URL, target_session_attrs=read-write\n\n")
	fmt.Printf("load: %.0f s, %d writes acknowledged (%d creates, %d replaces, %d batch items, %d uploads in parts of 6 MiB),\n",
		loadEnd.Sub(start).Seconds(), len(writes), kinds["create"], kinds["replace"], kinds["batch item"], kinds["upload in parts"])
	fmt.Printf("      %d client retries, %d events in the feed, %d followers\n\n", retries, len(feed), len(followers))

	lagIn := func(from, to time.Time) time.Duration {
		var lag time.Duration
		for _, f := range followers {
			f.mu.Lock()
			for _, s := range f.seen {
				if !s.at.Before(from) && s.at.Before(to) {
					lag = max(lag, s.lag)
				}
			}
			f.mu.Unlock()
		}
		return lag
	}
	fmt.Println("longest stall: the longest time without any write acknowledged, from the fault to the next one;")
	fmt.Println("slowest write: the longest call acknowledged then (its kind); follower lag: the most an event")
	fmt.Println("reached a follower after its time.")
	fmt.Printf("%-38s %7s  %13s  %-28s %s\n", "fault", "at", "longest stall", "slowest write", "follower lag")
	for i, f := range cfg.faults {
		to := loadEnd
		if i+1 < len(cfg.faults) {
			to = cfg.faults[i+1].at
		}
		stall := longestGap(writes, f.at, to)
		slow, kind := slowest(writes, f.at, to)
		status := ""
		if !f.ran {
			status = " (the command failed)"
		}
		fmt.Printf("%-38s %6.1fs  %12.1fs  %-28s %.1fs%s\n", f.name, f.at.Sub(start).Seconds(), stall.Seconds(),
			fmt.Sprintf("%.1fs (%s)", slow.Seconds(), kind), lagIn(f.at, to).Seconds(), status)
		if f.note != "" {
			fmt.Printf("    monitor: %s\n", f.note)
		}
	}
	slow, kind := slowest(writes, start.Add(5*time.Second), cfg.faultAt(0, loadEnd))
	fmt.Printf("%-38s %7s  %12.1fs  %-28s %.1fs\n", "(none: the steady stretch before)", "",
		longestGap(writes, start.Add(5*time.Second), cfg.faultAt(0, loadEnd)).Seconds(),
		fmt.Sprintf("%.1fs (%s)", slow.Seconds(), kind), lagIn(start.Add(5*time.Second), cfg.faultAt(0, loadEnd)).Seconds())
	fmt.Println()

	ok := true
	line := func(name string, got int, extra string) {
		verdict := "ok"
		if got != 0 {
			verdict, ok = "FAIL", false
		}
		fmt.Printf("%-58s %6d  (want 0)  %s %s\n", name, got, verdict, extra)
	}
	line("acknowledged writes lost", lost, "")
	line("duplicated effects", dup, "")
	line("event-feed gaps seen by a follower", gaps, "")
	line("event-feed repeats seen by a follower", repeats, "")
	line("acknowledged writes without their event", missingEvents, "")
	line("client-visible errors after the client's retries", errorsAfterRetries, fmt.Sprint(rec.errors))
	line("DB-S3: live versions whose blob is missing or differs", bad, fmt.Sprintf("(of %d read back)", len(blobs)))
	fmt.Printf("%-58s %6d  (effects of requests that ended in an error: allowed)\n", "effects no write acknowledged", unacked)
	for _, s := range append(append(lostEx, badEx...), rec.examples...) {
		fmt.Println("  ", s)
	}

	fmt.Printf("\nsteady stretch before the first fault: %.0f s, %d writes, %.1f writes/s\n", steady.Seconds(), steadyWrites, float64(steadyWrites)/steady.Seconds())
	fmt.Printf("%-22s %10s %14s\n", "CPU (/proc)", "cores used", "writes/s/core")
	for _, p := range parts {
		cores := float64(p.end-p.begin) / ticksPerSecond / steady.Seconds()
		per := "-"
		if cores > 0 {
			per = fmt.Sprintf("%.0f", float64(steadyWrites)/steady.Seconds()/cores)
		}
		fmt.Printf("%-22s %10.2f %14s\n", p.name, cores, per)
	}
	if ok {
		fmt.Println("\nscale-test: every check holds")
	} else {
		fmt.Println("\nscale-test: FAILED")
	}
	return ok, nil
}

func (c config) faultAt(i int, otherwise time.Time) time.Time {
	if i < len(c.faults) {
		return c.faults[i].at
	}
	return otherwise
}

// longestGap is the longest time in [from, to) without an acknowledged
// write (writes sorted by time).
func longestGap(writes []write, from, to time.Time) time.Duration {
	last := from
	var gap time.Duration
	for _, w := range writes {
		if w.at.Before(from) {
			continue
		}
		if !w.at.Before(to) {
			break
		}
		gap = max(gap, w.at.Sub(last))
		last = w.at
	}
	return max(gap, to.Sub(last))
}

// slowest is the longest call among the writes acknowledged in [from, to).
func slowest(writes []write, from, to time.Time) (time.Duration, string) {
	var d time.Duration
	kind := "none"
	for _, w := range writes {
		if !w.at.Before(from) && w.at.Before(to) && w.at.Sub(w.began) > d {
			d, kind = w.at.Sub(w.began), w.kind
		}
	}
	return d, kind
}

func readBlob(ctx context.Context, c *minio.Client, bucket, key string) (string, int64, error) {
	var lastErr error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			lastErr = err
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, o)
		o.Close()
		if err != nil {
			lastErr = err
			continue
		}
		return hex.EncodeToString(h.Sum(nil)), n, nil
	}
	return "", 0, lastErr
}
