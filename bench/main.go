// Command bench measures AgentFS against direct minio-go calls to the same
// S3 server, side by side in one run, and prints one table with the
// budgets (met or missed: printed, never asserted).
//
// scripts/bench.sh (`make bench`) starts throwaway Postgres, versitygw and
// AgentFS on 127.0.0.1 and runs it; run it by hand with
//
//	go run ./bench -url http://127.0.0.1:8080 -token afs_... -server-pid PID \
//	    -database-url postgres://... -s3-endpoint 127.0.0.1:7070 \
//	    -s3-access-key KEY -s3-secret-key SECRET
//
// Every flag defaults to an environment variable (see -h). It refuses to
// send traffic anywhere but the loopback interface. It exits 0 when every
// measurement ran, whatever the verdicts, and 1 when one failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

type config struct {
	url, token   string
	noIndexURL   string
	noCacheURL   string
	nodeBin      string
	tursoWrites  int
	tursoReads   int
	tursoList    int
	tursoRounds  int
	serverPID    int
	s3PID        int
	pgPID        int
	s3Name       string
	databaseURL  string
	s3Endpoint   string
	s3AccessKey  string
	s3SecretKey  string
	s3Bucket     string
	s3Region     string
	directBucket string

	quick         bool
	uploadSize    int64
	uploadRuns    int
	downloadRuns  int
	smallSize     int64
	smallClients  int
	smallDuration time.Duration
	smallMax      int
	multipartSize int64
	multipartRuns int
	partWorkers   int
	replayN       int
	listSmall     int
	listLarge     int
	listCalls     int
	searchSmall   int
	searchLarge   int
	searchPending int
	searchSeeders int
	forkFiles     int
	mergeChanges  int
	streamSize    int64
	archiveSize   int64
	archiveFiles  int
	batchItems    int
	batchSizes    []int64
	events        int
	feedSmall     int
	feedLarge     int
	recoverySmall int
	recoveryLarge int
	mcpCalls      int
	indexCalls    int
	pointsSmall   int
	pointsLarge   int
	mountTree     string
	mountFeed     int
	timeout       time.Duration
	only          map[string]bool
}

// measurement is one part of the run, selectable with -only.
type measurement struct{ name, what string }

// measurements, in the order they run. Memory goes first so that "idle"
// means a server that has not yet grown its heap for big transfers, and
// the two that seed a million rows last so that those do not weigh on the
// others.
var measurements = []measurement{
	{"memory", "server RSS growth while a large file streams up through AgentFS and back down"},
	{"archive", "server RSS growth and throughput while a run's files stream as one zip archive"},
	{"upload", "one large upload, against one direct unsigned PUT and minio-go's default PutObject"},
	{"download", "one large download, against a direct GetObject"},
	{"redirect", "one large download through a redirect to a presigned S3 URL, against a direct GetObject and the same download streamed through AgentFS"},
	{"small", "4 KiB uploads per second from 16 clients, against direct PutObject"},
	{"multipart", "an upload session with parallel parts, against a direct multipart upload"},
	{"replay", "keyed replays: no S3 write, and their p50 against a first upload's"},
	{"batch", "batches of 1 KiB and 64 KiB puts, against the same items as standalone uploads"},
	{"delivery", "event delivery: commit of an upload to the answer of a waiting GET /v1/events?wait="},
	{"webhooks", "webhook delivery: commit of an upload to its arrival at a webhook's receiver"},
	{"mcp", "MCP write_file of 4 KiB against POST /v1/files of 4 KiB; write_file, read_text_file, list_directory and edit_file against the reference filesystem server; p50"},
	{"indexcost", "a 4 KiB text upload with the search index against the same to a server that indexes nothing, p50"},
	{"list", "run listing (GET /v1/files?run_id=) at 10 k and 1 M files"},
	{"search", "content search (GET /v1/search) for a pattern in 20 files, at 10 k and 100 k text files and with the last 1 k written pending, against rg"},
	{"forks", "a fork of 10 k files (POST /v1/forks) and a merge back of 1 k changes, p50"},
	{"versions", "one file's versions (GET /v1/files/{id}/versions) at 200 and 10 k versions"},
	{"feed", "the event feed (GET /v1/events?after=, with and without run_id) at 10 k and 1 M events"},
	{"recovery", "one page of a run's recovery (GET /v1/runs/{id}/recovery) for a run of 10 and 100 k operations"},
	{"mount", "untar, grep -r and git status in the AgentFS mount against rclone mount of the same S3 server and local disk; the feed's latency into the mount"},
	{"points", "checkpoint create, an as-of listing page and a diff of 10 changes at 10 k and 1 M files"},
	{"turso", "4 KiB writes and reads (one at a time, 16 at once) and a listing of 2,000 files with their stats, against Turso's agentfs-sdk on a local SQLite file; reads also through a server without the blob cache"},
}

func measurementNames() []string {
	var out []string
	for _, m := range measurements {
		out = append(out, m.name)
	}
	return out
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func parseFlags() (*config, error) {
	c := &config{
		uploadSize:    256 << 20,
		multipartSize: 1 << 30,
		streamSize:    2 << 30,
		archiveSize:   1 << 30,
		smallSize:     4 << 10,
		batchSizes:    []int64{1 << 10, 64 << 10},
	}
	pid, _ := strconv.Atoi(os.Getenv("BENCH_SERVER_PID"))
	s3pid, _ := strconv.Atoi(os.Getenv("BENCH_S3_PID"))
	pgpid, _ := strconv.Atoi(os.Getenv("BENCH_PG_PID"))
	quickEnv := os.Getenv("BENCH_QUICK") == "1"
	flag.StringVar(&c.url, "url", env("AGENTFS_URL", ""), "AgentFS base URL (env AGENTFS_URL)")
	flag.StringVar(&c.token, "token", env("AGENTFS_TOKEN", ""), "bearer token (env AGENTFS_TOKEN)")
	flag.StringVar(&c.noIndexURL, "noindex-url", env("BENCH_NOINDEX_URL", ""), "a second AgentFS on the same Postgres and S3 that indexes nothing for search (AGENTFS_SEARCH_MAX_FILE_BYTES=0), for indexcost (env BENCH_NOINDEX_URL)")
	flag.StringVar(&c.noCacheURL, "nocache-url", env("BENCH_NOCACHE_URL", ""), "a second AgentFS on the same Postgres and S3 without the blob cache (AGENTFS_BLOB_CACHE_BYTES=0), for turso's before/after reads (env BENCH_NOCACHE_URL)")
	flag.StringVar(&c.nodeBin, "node", env("NODE24", "node"), "Node.js 24, which runs Turso's agentfs-sdk from tools/node for turso (env NODE24)")
	flag.IntVar(&c.tursoWrites, "turso-writes", 500, "4 KiB files each side writes one at a time per round, for turso (quick 200)")
	flag.IntVar(&c.tursoReads, "turso-reads", 1000, "4 KiB reads each side makes one at a time, and again 16 at once, per round, for turso (quick 300)")
	flag.IntVar(&c.tursoList, "turso-list", 2000, "files in the folder each side lists with their stats, for turso")
	flag.IntVar(&c.tursoRounds, "turso-rounds", 3, "rounds of each turso measurement; the medians count")
	flag.IntVar(&c.serverPID, "server-pid", pid, "pid of the agentfs serve process, for RSS (env BENCH_SERVER_PID)")
	flag.IntVar(&c.s3PID, "s3-pid", s3pid, "pid of the S3 server, for its CPU time (env BENCH_S3_PID; optional)")
	flag.IntVar(&c.pgPID, "pg-pid", pgpid, "pid of the postmaster of the server's Postgres (its own, no other database's), for its CPU time with its backends' (env BENCH_PG_PID; optional)")
	flag.StringVar(&c.s3Name, "s3-name", env("BENCH_S3_NAME", "versitygw"), "the S3 server's program name: versitygw or minio (env BENCH_S3_NAME)")
	flag.StringVar(&c.databaseURL, "database-url", env("AGENTFS_DATABASE_URL", ""), "the server's Postgres, to seed listing rows (env AGENTFS_DATABASE_URL)")
	flag.StringVar(&c.s3Endpoint, "s3-endpoint", env("AGENTFS_S3_ENDPOINT", ""), "S3 host:port the server uses (env AGENTFS_S3_ENDPOINT)")
	flag.StringVar(&c.s3AccessKey, "s3-access-key", env("AGENTFS_S3_ACCESS_KEY", ""), "S3 access key (env AGENTFS_S3_ACCESS_KEY)")
	flag.StringVar(&c.s3SecretKey, "s3-secret-key", env("AGENTFS_S3_SECRET_KEY", ""), "S3 secret key (env AGENTFS_S3_SECRET_KEY)")
	flag.StringVar(&c.s3Bucket, "s3-bucket", env("AGENTFS_S3_BUCKET", "agentfs"), "the server's bucket, whose objects the replay check counts (env AGENTFS_S3_BUCKET)")
	flag.StringVar(&c.s3Region, "s3-region", env("AGENTFS_S3_REGION", "us-east-1"), "S3 region (env AGENTFS_S3_REGION)")
	flag.StringVar(&c.directBucket, "direct-bucket", "agentfs-bench-direct", "bucket for the direct minio-go side (created if missing)")
	flag.BoolVar(&c.quick, "quick", quickEnv, "small sizes for a fast check (env BENCH_QUICK=1); explicit size flags still win")
	flag.Var(sizeFlag{&c.uploadSize}, "upload-size", "single upload/download file size (quick 32MiB)")
	flag.IntVar(&c.uploadRuns, "upload-runs", 3, "runs of each side for upload; the medians count")
	flag.IntVar(&c.downloadRuns, "download-runs", 5, "runs of each side for download; the budget counts the runs that meet it")
	flag.Var(sizeFlag{&c.smallSize}, "small-size", "size of the small uploads")
	flag.IntVar(&c.smallClients, "small-clients", 16, "concurrent clients for small uploads")
	flag.DurationVar(&c.smallDuration, "small-duration", 10*time.Second, "how long each side uploads small files (quick 2s)")
	flag.IntVar(&c.smallMax, "small-max", 0, "stop each side after this many small uploads (0: only the duration)")
	flag.Var(sizeFlag{&c.multipartSize}, "multipart-size", "multipart upload size (quick 64MiB)")
	flag.IntVar(&c.multipartRuns, "multipart-runs", 3, "runs of each side for multipart; the medians count (quick 1)")
	flag.IntVar(&c.partWorkers, "part-workers", 4, "parts uploaded in parallel")
	flag.IntVar(&c.replayN, "replay-samples", 200, "keyed uploads, then replays, for the replay p50 (quick 50)")
	flag.IntVar(&c.listSmall, "list-small", 10_000, "seeded rows for the first listing point")
	flag.IntVar(&c.forkFiles, "fork-files", 10_000, "files of 1 KiB a fork copies (quick 2000)")
	flag.IntVar(&c.mergeChanges, "merge-changes", 1_000, "files changed in the fork that a merge applies (quick 200)")
	flag.IntVar(&c.listLarge, "list-large", 1_000_000, "seeded rows for the second listing point (quick 100000)")
	flag.IntVar(&c.listCalls, "list-calls", 50, "timed listing calls at each point")
	flag.IntVar(&c.searchSmall, "search-small", 10_000, "seeded text files of ~4 KiB for the first search point")
	flag.IntVar(&c.searchLarge, "search-large", 100_000, "seeded text files for the second search point (quick 30000)")
	flag.IntVar(&c.searchPending, "search-pending", 1000, "text files written after the second search point and left pending (not yet in the trigram index) for the search-while-pending row")
	flag.IntVar(&c.searchSeeders, "search-seeders", 4, "connections that seed the search texts at once (the trigram extraction is CPU-bound)")
	flag.Var(sizeFlag{&c.streamSize}, "stream-size", "file streamed through the server while its RSS is sampled (quick 256MiB)")
	flag.Var(sizeFlag{&c.archiveSize}, "archive-size", "total size of the run whose archive streams (quick 256MiB)")
	flag.IntVar(&c.archiveFiles, "archive-files", 16, "files in the archived run (quick 8)")
	flag.IntVar(&c.batchItems, "batch-items", 1000, "items in each batch (quick 200)")
	flag.Var(sizeListFlag{&c.batchSizes}, "batch-item-sizes", "content size of each batch's items, comma-separated: one batch per size")
	flag.IntVar(&c.events, "events", 100, "events timed for delivery latency (quick 30)")
	flag.IntVar(&c.feedSmall, "feed-small", 10_000, "seeded events for the first feed point")
	flag.IntVar(&c.feedLarge, "feed-large", 1_000_000, "seeded events for the second feed point (quick 100000)")
	flag.IntVar(&c.recoverySmall, "recovery-small", 10, "operations of the run for the first recovery point")
	flag.IntVar(&c.recoveryLarge, "recovery-large", 100_000, "operations of the run for the second recovery point")
	flag.IntVar(&c.mcpCalls, "mcp-calls", 200, "calls of each kind for the MCP comparison (quick 50)")
	flag.IntVar(&c.indexCalls, "indexcost-calls", 200, "uploads to each server for the search index's cost (quick 50)")
	flag.IntVar(&c.pointsSmall, "points-small", 10_000, "seeded files for the first points-in-time point")
	flag.IntVar(&c.pointsLarge, "points-large", 1_000_000, "seeded files for the second points-in-time point (quick 100000)")
	flag.StringVar(&c.mountTree, "mount-tree", "/usr/local/go/src", "the folder the mount measurement tars, untars and greps (quick /usr/local/go/src/net)")
	flag.IntVar(&c.mountFeed, "mount-feed", 50, "REST writes timed into the mount for the feed latency (quick 20)")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "give up on the whole run after this long")
	only := flag.String("only", "", "comma-separated subset of the measurements below")
	flag.Usage = usage
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", flag.Args())
	}

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		quick := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		quick("upload-size", func() { c.uploadSize = 32 << 20 })
		quick("small-duration", func() { c.smallDuration = 2 * time.Second })
		quick("multipart-size", func() { c.multipartSize = 64 << 20 })
		quick("multipart-runs", func() { c.multipartRuns = 1 })
		quick("download-runs", func() { c.downloadRuns = 3 })
		quick("archive-size", func() { c.archiveSize = 256 << 20 })
		quick("archive-files", func() { c.archiveFiles = 8 })
		quick("events", func() { c.events = 30 })
		quick("feed-large", func() { c.feedLarge = 100_000 })
		quick("mcp-calls", func() { c.mcpCalls = 50 })
		quick("indexcost-calls", func() { c.indexCalls = 50 })
		quick("points-large", func() { c.pointsLarge = 100_000 })
		quick("replay-samples", func() { c.replayN = 50 })
		quick("list-large", func() { c.listLarge = 100_000 })
		quick("list-calls", func() { c.listCalls = 20 })
		quick("search-large", func() { c.searchLarge = 30_000 })
		quick("fork-files", func() { c.forkFiles = 2000 })
		quick("merge-changes", func() { c.mergeChanges = 200 })
		quick("stream-size", func() { c.streamSize = 256 << 20 })
		quick("batch-items", func() { c.batchItems = 200 })
		quick("mount-tree", func() { c.mountTree = "/usr/local/go/src/net" })
		quick("mount-feed", func() { c.mountFeed = 20 })
		quick("turso-writes", func() { c.tursoWrites = 200 })
		quick("turso-reads", func() { c.tursoReads = 300 })
	}

	c.only = map[string]bool{}
	if *only != "" {
		for _, m := range strings.Split(*only, ",") {
			m = strings.TrimSpace(m)
			if !slices.Contains(measurementNames(), m) {
				return nil, fmt.Errorf("-only: unknown measurement %q (known: %s)", m, strings.Join(measurementNames(), ","))
			}
			c.only[m] = true
		}
	}

	switch {
	case c.url == "" || c.token == "":
		return nil, errors.New("-url and -token (or AGENTFS_URL and AGENTFS_TOKEN) are required")
	case c.s3Endpoint == "" || c.s3AccessKey == "" || c.s3SecretKey == "":
		return nil, errors.New("-s3-endpoint, -s3-access-key and -s3-secret-key are required")
	case c.uploadRuns < 1 || c.downloadRuns < 1 || c.multipartRuns < 1 || c.smallClients < 1 || c.partWorkers < 1:
		return nil, errors.New("runs, clients and workers must be at least 1")
	case c.mergeChanges < 1 || c.forkFiles < c.mergeChanges:
		return nil, errors.New("-merge-changes must be between 1 and -fork-files")
	case c.replayN < 1 || c.listCalls < 1 || c.listSmall < 100 || c.listLarge < c.listSmall || c.searchSmall < searchSelective || c.searchLarge < c.searchSmall || c.searchPending < 0 || c.searchSeeders < 1:
		return nil, errors.New("-replay-samples, -list-calls and -search-seeders must be ≥ 1; -list-large ≥ -list-small ≥ 100; -search-large ≥ -search-small ≥ 20; -search-pending ≥ 0")
	case c.feedSmall < 1000 || c.feedLarge < c.feedSmall:
		return nil, errors.New("-feed-large ≥ -feed-small ≥ 1000")
	case c.recoverySmall < 1 || c.recoveryLarge < c.recoverySmall:
		return nil, errors.New("-recovery-large ≥ -recovery-small ≥ 1")
	case c.batchItems < 1 || len(c.batchSizes) == 0:
		return nil, errors.New("-batch-items must be ≥ 1 and -batch-item-sizes name at least one size")
	case c.mountFeed < 1:
		return nil, errors.New("-mount-feed must be ≥ 1")
	case c.events < 1 || c.mcpCalls < 1 || c.indexCalls < 1:
		return nil, errors.New("-events, -mcp-calls and -indexcost-calls must be ≥ 1")
	case c.pointsSmall < 1000 || c.pointsLarge < c.pointsSmall:
		return nil, errors.New("-points-large ≥ -points-small ≥ 1000")
	case c.tursoWrites < 1 || c.tursoReads < 1 || c.tursoList < 1 || c.tursoRounds < 1:
		return nil, errors.New("-turso-writes, -turso-reads, -turso-list and -turso-rounds must be ≥ 1")
	case c.archiveFiles < 1 || c.archiveSize < int64(c.archiveFiles):
		return nil, errors.New("-archive-files must be ≥ 1 and -archive-size at least one byte per file")
	}
	if err := loopbackURL("-url", c.url); err != nil {
		return nil, err
	}
	c.url = strings.TrimRight(c.url, "/")
	if c.noIndexURL != "" {
		if err := loopbackURL("-noindex-url", c.noIndexURL); err != nil {
			return nil, err
		}
		c.noIndexURL = strings.TrimRight(c.noIndexURL, "/")
	}
	if c.noCacheURL != "" {
		if err := loopbackURL("-nocache-url", c.noCacheURL); err != nil {
			return nil, err
		}
		c.noCacheURL = strings.TrimRight(c.noCacheURL, "/")
	}
	if err := loopbackHost("-s3-endpoint", c.s3Endpoint); err != nil {
		return nil, err
	}
	if c.databaseURL != "" {
		pc, err := pgx.ParseConfig(c.databaseURL)
		if err != nil {
			return nil, fmt.Errorf("-database-url: %w", err)
		}
		if !isLoopback(pc.Host) {
			return nil, fmt.Errorf("-database-url: host %q is not loopback; the benchmark only talks to 127.0.0.1", pc.Host)
		}
	}
	return c, nil
}

func (c *config) wants(m string) bool { return len(c.only) == 0 || c.only[m] }

// usage lists the flags and then the measurements -only selects from.
func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprintf(w, "Usage: go run ./bench [flags]   (or make bench ARGS='flags')\n\n")
	fmt.Fprintf(w, "Measures AgentFS against direct minio-go calls to the same S3 server and prints the\n")
	fmt.Fprintf(w, "budgets with their verdicts.\n\nFlags:\n")
	flag.PrintDefaults()
	fmt.Fprintf(w, "\nMeasurements (all by default, in this order; -only picks some):\n")
	for _, m := range measurements {
		fmt.Fprintf(w, "  %-10s %s\n", m.name, m.what)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s: not a URL: %q", name, raw)
	}
	if !isLoopback(u.Hostname()) {
		return fmt.Errorf("%s: host %q is not loopback; the benchmark only talks to 127.0.0.1", name, u.Hostname())
	}
	return nil
}

func loopbackHost(name, hostport string) error {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%s: want host:port, got %q", name, hostport)
	}
	if !isLoopback(h) {
		return fmt.Errorf("%s: host %q is not loopback; the benchmark only talks to 127.0.0.1", name, h)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer b.close()

	var whole *sampler
	if cfg.serverPID > 0 {
		whole = startSampler(cfg.serverPID, 100*time.Millisecond)
	}
	start, loadStart := time.Now(), loadavg()
	failed := false
	for _, mm := range measurements {
		m := mm.name
		if !cfg.wants(m) {
			continue
		}
		if ctx.Err() != nil {
			b.rows = append(b.rows, row{name: m, agentfs: "not run: " + context.Cause(ctx).Error()})
			failed = true
			continue
		}
		logf("%s ...", m)
		t0 := time.Now()
		rows, err := b.run(ctx, m)
		if err != nil {
			failed = true
			logf("%s failed: %v", m, err)
			rows = append(rows, row{name: m, agentfs: "error: " + oneLine(err.Error(), 100), verdict: "error"})
		}
		b.rows = append(b.rows, rows...)
		logf("%s done in %s", m, time.Since(t0).Round(100*time.Millisecond))
		// The texts a measurement wrote are indexed for search after
		// it, once writes pause: that work is the measurement's, so the
		// next one starts when it is done, not while Postgres still
		// indexes 64 MiB of a batch's items (the indexcost line
		// measures what indexing costs a write).
		if err := b.searchIndexed(ctx, m); err != nil {
			logf("%s: %v", m, err)
		}
	}
	var wholePeak int64
	if whole != nil {
		wholePeak, _, _ = whole.finish()
	}

	b.notes = append(b.notes, fmt.Sprintf("1-minute load average: %s at the start, %s at the end (%d cores; anything else running here shows up in the numbers).",
		loadStart, loadavg(), runtime.NumCPU()))
	b.print(os.Stdout, time.Since(start), wholePeak)
	if failed {
		os.Exit(1)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// loadavg is the 1-minute load average.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	s := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	if model != "" {
		s += " (" + model + ")"
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			s += fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return s + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
