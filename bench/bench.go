package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// row is one line of the result table.
type row struct {
	name, agentfs, direct, ratio, budget, verdict string
}

type bench struct {
	cfg  *config
	api  *api
	s3   *minio.Client
	core minio.Core
	data *payload // the bytes both sides send
	tag  string   // makes this run's paths, keys and seeded rows unique
	rows []row
	// notes are printed under the table.
	notes []string

	// big is the file "upload" leaves for "download", on both sides.
	big struct {
		fileID, key string
	}
}

// putOpts are the options the server itself passes to minio-go for a body
// of known size (storage.putBlob): unsigned payload, one PUT. They are also
// the fastest way minio-go has to store such a body, so the direct side is
// the best a client could do without AgentFS.
var putOpts = minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true, DisableMultipart: true}

// newTransport is the HTTP transport of both sides: minio-go's own
// default, without a proxy (loopback only), with time for a 1 GiB complete
// to answer, and sending request bodies in large writes. AgentFS's client
// and the direct minio-go client each get one, so both have the same
// connection pools and buffer sizes.
func newTransport() (*http.Transport, error) {
	tr, err := minio.DefaultTransport(false)
	if err != nil {
		return nil, err
	}
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 5 * time.Minute
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return largeWrites{c}, nil
	}
	return tr, nil
}

// sendBufferSize is the size of the writes a request body goes out in, on
// both sides.
const sendBufferSize = 1 << 20

var sendBuffers = sync.Pool{New: func() any { b := make([]byte, sendBufferSize); return &b }}

// largeWrites sends what net/http copies into a connection (a request
// body) in writes of sendBufferSize. Without it the copy goes through a
// 32 KiB buffer: eight thousand writes for 256 MiB, whose cost falls on the
// client, the process with the least CPU to spare in these runs. Measured
// here, 1 MiB writes took the client about 0.05–0.1 s less CPU per GiB.
type largeWrites struct{ net.Conn }

func (c largeWrites) ReadFrom(r io.Reader) (int64, error) {
	buf := sendBuffers.Get().(*[]byte)
	defer sendBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, *buf)
}

func newBench(ctx context.Context, cfg *config) (*bench, error) {
	tr, err := newTransport()
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, api: newAPI(cfg.url, cfg.token, tr), tag: strconv.FormatInt(time.Now().UnixNano()%1e10, 36)}

	if _, err := b.api.call(ctx, http.MethodGet, "/readyz", nil, 0, nil, nil, http.StatusOK); err != nil {
		return nil, fmt.Errorf("AgentFS at %s is not ready: %w", cfg.url, err)
	}
	if _, err := b.api.list(ctx, "limit=1"); err != nil {
		return nil, fmt.Errorf("the token is not accepted: %w", err)
	}
	if err := checkComm("-server-pid", cfg.serverPID, "agentfs"); err != nil {
		return nil, err
	}
	if err := checkComm("-s3-pid", cfg.s3PID, cfg.s3Name); err != nil {
		return nil, err
	}
	if err := checkComm("-pg-pid", cfg.pgPID, "postgres"); err != nil {
		return nil, err
	}

	if tr, err = newTransport(); err != nil {
		return nil, err
	}
	s3, err := minio.New(cfg.s3Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.s3AccessKey, cfg.s3SecretKey, ""),
		Region:    cfg.s3Region,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("minio client: %w", err)
	}
	b.s3, b.core = s3, minio.Core{Client: s3}
	ok, err := s3.BucketExists(ctx, cfg.directBucket)
	if err != nil {
		return nil, fmt.Errorf("S3 at %s: %w", cfg.s3Endpoint, err)
	}
	if !ok {
		if err := s3.MakeBucket(ctx, cfg.directBucket, minio.MakeBucketOptions{Region: cfg.s3Region}); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", cfg.directBucket, err)
		}
	}
	t0 := time.Now()
	b.data = newPayload(cfg.uploadSize)
	logf("filled a %s send buffer in %s", fmtSize(int64(len(b.data.buf))), time.Since(t0).Round(time.Millisecond))
	return b, nil
}

// checkComm makes sure a pid given on the command line is the process it
// is said to be (no pid given is fine).
func checkComm(flagName string, pid int, want string) error {
	if pid <= 0 {
		return nil
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return fmt.Errorf("%s %d: %w", flagName, pid, err)
	}
	if c := strings.TrimSpace(string(comm)); c != want {
		return fmt.Errorf("%s %d is %q, not %s", flagName, pid, c, want)
	}
	return nil
}

// cpuNow reads the CPU time used so far by this program and the servers.
func (b *bench) cpuNow() cpuSnap {
	s := cpuSnap{self: selfCPU(), total: machineCPU()}
	if b.cfg.serverPID > 0 {
		s.server, _ = procCPU(b.cfg.serverPID)
	}
	if b.cfg.s3PID > 0 {
		s.s3, _ = procCPU(b.cfg.s3PID)
	}
	if b.cfg.pgPID > 0 {
		var err error
		s.pg, err = pgTreeCPU(b.cfg.pgPID)
		s.pgKnown = err == nil
	}
	return s
}

// cpuRow is a budget row of AgentFS's CPU per unit (DESIGN §11), from the
// cheapest round of acc: the server's, and with pgBudget > 0 Postgres's
// too (when its pid is known).
func (b *bench) cpuRow(name, unit string, acc cpuAcc, budget, pgBudget float64) row {
	best, n := acc.cheapest()
	r := row{name: fmt.Sprintf("%s, cheapest of %d", name, n), direct: "—", ratio: "—"}
	if b.cfg.serverPID <= 0 || n == 0 {
		r.agentfs, r.budget, r.verdict = "—", fmt.Sprintf("≤ %g s", budget), "not measured (no -server-pid)"
		return r
	}
	meets := best.server <= budget
	r.agentfs = fmt.Sprintf("agentfs %.2f s per %s", best.server, unit)
	r.budget = fmt.Sprintf("≤ %g s", budget)
	if pgBudget > 0 {
		if acc.pgKnown {
			r.agentfs += fmt.Sprintf("; postgres %.2f s", best.pg)
			meets = meets && best.pg <= pgBudget
		} else {
			r.agentfs += "; postgres not measured (no -pg-pid)"
			meets = false
		}
		r.budget = fmt.Sprintf("≤ %g s; ≤ %g s", budget, pgBudget)
	}
	r.verdict = "misses"
	if meets {
		r.verdict = "meets"
	}
	return r
}

// cpuNote records where the CPU went for one measurement, both sides.
//
// When the CPU of client, server and S3 server are all known, it adds the
// ratio their sums give: what the throughput ratio tends to when the cores
// have no time to spare (other work on the machine), since then every CPU
// second the extra hop costs is a second of wall time. With cores to
// spare the hop's work overlaps the S3 server's and the measured ratio
// lies above it.
func (b *bench) cpuNote(what, unit string, agent, direct cpuAcc) {
	s3Name := b.s3CPUName()
	note := fmt.Sprintf("%s, CPU seconds per %s: through AgentFS %s; direct %s",
		what, unit, agent.per(b.cfg.serverPID > 0, s3Name), direct.per(false, s3Name))
	if b.cfg.serverPID > 0 && s3Name != "" && agent.units > 0 && direct.units > 0 {
		a := (agent.self + agent.server + agent.s3).Seconds() / agent.units
		d := (direct.self + direct.s3).Seconds() / direct.units
		note += fmt.Sprintf("; on saturated cores the ratio would tend to %.2f× (direct's CPU ÷ AgentFS's, client + servers)", d/a)
	}
	b.notes = append(b.notes, note+".")
}

// s3CPUName is the S3 server's name when its CPU time is known, else "".
func (b *bench) s3CPUName() string {
	if b.cfg.s3PID > 0 {
		return b.cfg.s3Name
	}
	return ""
}

// gib is a byte count in GiB, the unit of the throughput CPU notes.
func gib(n int64) float64 { return float64(n) / (1 << 30) }

func (b *bench) close() { b.api.hc.CloseIdleConnections() }

func (b *bench) run(ctx context.Context, m string) ([]row, error) {
	switch m {
	case "memory":
		return b.memory(ctx)
	case "upload":
		return b.upload(ctx)
	case "download":
		return b.download(ctx)
	case "redirect":
		return b.redirect(ctx)
	case "small":
		return b.small(ctx)
	case "multipart":
		return b.multipart(ctx)
	case "replay":
		return b.replay(ctx)
	case "batch":
		return b.batches(ctx)
	case "list":
		return b.list(ctx)
	case "search":
		return b.search(ctx)
	case "forks":
		return b.forks(ctx)
	case "versions":
		return b.versions(ctx)
	case "archive":
		return b.archive(ctx)
	case "delivery":
		return b.delivery(ctx)
	case "webhooks":
		return b.webhooks(ctx)
	case "feed":
		return b.feed(ctx)
	case "recovery":
		return b.recovery(ctx)
	case "mcp":
		return b.mcp(ctx)
	case "indexcost":
		return b.indexCost(ctx)
	case "points":
		return b.points(ctx)
	case "mount":
		return b.mountRows(ctx)
	case "turso":
		return b.turso(ctx)
	}
	return nil, fmt.Errorf("unknown measurement %q", m)
}

func (b *bench) path(name string) string { return "bench/" + b.tag + "/" + name }
func (b *bench) key(name string) string  { return b.tag + "/" + name }

func ratio(agentfs, direct float64) string {
	if direct <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", agentfs/direct)
}

// rateRow is a row whose budget is a least ratio of AgentFS's rate to the
// direct one, both in unit.
func rateRow(name string, agentfs, direct float64, unit string, budget float64) row {
	verdict := "misses"
	if direct > 0 && agentfs/direct >= budget {
		verdict = "meets"
	}
	return row{name: name, agentfs: fmtRate(agentfs, unit), direct: fmtRate(direct, unit),
		ratio: ratio(agentfs, direct), budget: fmt.Sprintf("≥ %g×", budget), verdict: verdict}
}

// withDirect names the direct side's baseline in its cell.
func withDirect(r row, baseline string) row {
	r.direct += " (" + baseline + ")"
	return r
}

// bytesReader reads b; a function so that the call sites read as what
// they send.
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func fmtRate(v float64, unit string) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f%s%s", v, sep(unit), unit)
	}
	return fmt.Sprintf("%.1f%s%s", v, sep(unit), unit)
}

// concurrently runs fn from clients goroutines until dur has passed (when
// dur > 0) or limit calls were started (when limit > 0). It returns how
// many calls succeeded, the elapsed time and the calls' latencies.
func concurrently(ctx context.Context, clients int, dur time.Duration, limit int, fn func(ctx context.Context, i int) error) (int, time.Duration, []time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if limit > 0 && i >= limit || dur > 0 && time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return len(lat), elapsed, lat, err
	}
	return len(lat), elapsed, lat, nil
}

// inParallel runs fn(1..n) on workers goroutines; the first error stops it.
func inParallel(ctx context.Context, workers, n int, fn func(ctx context.Context, part int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	parts := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range parts {
				if err := fn(ctx, p); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for p := 1; p <= n; p++ {
		select {
		case parts <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(parts)
	wg.Wait()
	return context.Cause(ctx)
}

// print writes the header, the table and the notes.
func (b *bench) print(w io.Writer, total time.Duration, wholePeak int64) {
	c := b.cfg
	fmt.Fprintln(w)
	fmt.Fprintf(w, "AgentFS benchmark: %s\n", machine())
	fmt.Fprintf(w, "Client (this program), AgentFS, %s (S3) and Postgres all run on these %d cores and share them;\n", c.s3Name, runtime.NumCPU())
	fmt.Fprintf(w, "the direct column is minio-go from this program to the same S3 server in the same run.\n")
	mode := "full sizes"
	if c.quick {
		mode = "quick sizes (BENCH_QUICK=1)"
	}
	fmt.Fprintf(w, "%s; run took %s.\n\n", mode, total.Round(time.Second))

	head := row{"measurement", "AgentFS", "direct minio-go", "ratio", "budget", "verdict"}
	cells := func(r row) []string { return []string{r.name, r.agentfs, r.direct, r.ratio, r.budget, r.verdict} }
	width := make([]int, 6)
	for _, r := range append([]row{head}, b.rows...) {
		for i, s := range cells(r) {
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	line := func(cs []string) {
		var sb strings.Builder
		sb.WriteString("|")
		for i, s := range cs {
			if s == "" {
				s = "—"
			}
			sb.WriteString(" " + s + strings.Repeat(" ", width[i]-len([]rune(s))) + " |")
		}
		fmt.Fprintln(w, sb.String())
	}
	line(cells(head))
	sep := make([]string, 6)
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range b.rows {
		line(cells(r))
	}
	fmt.Fprintln(w)
	notes := b.notes
	if wholePeak > 0 {
		notes = append(notes, "server peak RSS over the whole run: "+fmtMiB(wholePeak)+".")
	}
	for _, n := range notes {
		fmt.Fprintln(w, "- "+n)
	}
}

// sep puts a space before a word unit (MiB/s) but not before "/s".
func sep(unit string) string {
	if strings.HasPrefix(unit, "/") {
		return ""
	}
	return " "
}

// withBudgetNote adds a remark to a row's budget cell.
func withBudgetNote(r row, note string) row {
	r.budget += " (" + note + ")"
	return r
}
