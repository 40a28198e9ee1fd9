package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/internal/procstat"
)

const mib = 1 << 20

// percentile returns the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mibps(bytes int64, d time.Duration) float64 {
	return float64(bytes) / mib / d.Seconds()
}

func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/mib) }

func fmtSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= mib && b%mib == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// parseSize reads 256MiB, 1GiB, 4KiB, 1M or a plain byte count.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q (use e.g. 256MiB, 1GiB or a byte count)", s)
	}
	return n * mult, nil
}

// sizeFlag is a flag.Value holding a byte count.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil {
		return ""
	}
	return fmtSize(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// sampler records a process's RSS every interval until stopped.
type sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	max  int64
	n    int
	err  error
}

func startSampler(pid int, every time.Duration) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	v, err := procstat.RSS(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.n++
	s.max = max(s.max, v)
}

// peak returns the largest sample so far and how many were taken.
func (s *sampler) peak() (int64, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.n, s.err
}

// finish stops sampling and returns the peak.
func (s *sampler) finish() (int64, int, error) {
	close(s.stop)
	<-s.done
	return s.peak()
}

// idleRSS samples n times, every interval, and returns the median.
func idleRSS(pid, n int, every time.Duration) (int64, error) {
	var vs []int64
	for i := range n {
		if i > 0 {
			time.Sleep(every)
		}
		v, err := procstat.RSS(pid)
		if err != nil {
			return 0, err
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs[len(vs)/2], nil
}

// clockTick is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU returns the user+system CPU time a process has used so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/PID/stat format")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+st) * clockTick, nil
}

// selfCPU returns the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the CPU time all processes have used so far (busy
// time from /proc/stat, all cores).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick
}

// cpuSnap is the CPU used so far by this program, the AgentFS server, the
// S3 server, Postgres (zero for a process whose pid is unknown; pgKnown
// says whether Postgres's is) and the whole machine.
type cpuSnap struct {
	self, server, s3, pg, total time.Duration
	pgKnown                     bool
}

// cpuAcc adds up CPU used per unit of work (a GiB moved, a thousand
// uploads), for one side of a measurement; rounds keeps each add's own,
// for the cheapest round.
type cpuAcc struct {
	self, server, s3, pg, total time.Duration
	units                       float64
	pgKnown                     bool
	rounds                      []cpuRound
}

// cpuRound is the server's and Postgres's CPU per unit in one round.
type cpuRound struct{ server, pg float64 }

func (a *cpuAcc) add(from, to cpuSnap, units float64) {
	a.self += to.self - from.self
	a.server += to.server - from.server
	a.s3 += to.s3 - from.s3
	a.pg += to.pg - from.pg
	a.total += to.total - from.total
	a.units += units
	a.pgKnown = from.pgKnown && to.pgKnown
	if units > 0 {
		a.rounds = append(a.rounds, cpuRound{server: (to.server - from.server).Seconds() / units,
			pg: (to.pg - from.pg).Seconds() / units})
	}
}

// cheapest is the round with the least server CPU per unit (DESIGN §11:
// CPU figures are the cheapest of the rounds), and how many rounds there
// were.
func (a cpuAcc) cheapest() (cpuRound, int) {
	if len(a.rounds) == 0 {
		return cpuRound{}, 0
	}
	best := a.rounds[0]
	for _, r := range a.rounds[1:] {
		if r.server < best.server {
			best = r
		}
	}
	return best, len(a.rounds)
}

// pgTreeCPU is the CPU Postgres has used so far: the postmaster's own and
// its reaped children's (cutime, cstime: backends that ended), and that
// of each child still running (backends, its background processes).
func pgTreeCPU(postmaster int) (time.Duration, error) {
	total, _, err := procCPUTree(postmaster)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		cpu, ppid, err := procCPUTree(pid)
		if err == nil && ppid == postmaster {
			total += cpu
		}
	}
	return total, nil
}

// procCPUTree is a process's user+system CPU with that of its reaped
// children, and its parent's pid.
func procCPUTree(pid int) (time.Duration, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("unexpected /proc/PID/stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, errors.New("unexpected /proc/PID/stat format")
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, err
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, ppid, nil
}

// per formats CPU seconds per unit, per process (the S3 server's when
// s3Name is set); "rest" is every other
// process on the machine (Postgres, mostly, and anything else running).
func (a cpuAcc) per(withServer bool, s3Name string) string {
	if a.units == 0 {
		return ""
	}
	f := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()/a.units) }
	s := "client " + f(a.self)
	rest := a.total - a.self
	if withServer {
		s += ", agentfs " + f(a.server)
		rest -= a.server
	}
	if a.pgKnown {
		s += ", postgres " + f(a.pg)
		rest -= a.pg
	}
	if s3Name != "" {
		s += ", " + s3Name + " " + f(a.s3)
		rest -= a.s3
		if a.total > 0 {
			s += ", rest " + f(max(0, rest))
		}
	}
	return s
}

// sizeListFlag is a flag.Value holding comma-separated byte counts.
type sizeListFlag struct{ ns *[]int64 }

func (f sizeListFlag) String() string {
	if f.ns == nil {
		return ""
	}
	var out []string
	for _, n := range *f.ns {
		out = append(out, strings.ReplaceAll(fmtSize(n), " ", ""))
	}
	return strings.Join(out, ",")
}

func (f sizeListFlag) Set(s string) error {
	var ns []int64
	for _, part := range strings.Split(s, ",") {
		n, err := parseSize(part)
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	*f.ns = ns
	return nil
}

// median is the 50th percentile of rates (the lower middle one of an even
// count, as percentile's nearest rank gives).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
