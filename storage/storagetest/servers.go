package storagetest

import (
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/storage"
)

// S3Server is a versitygw process of the test's own, so the test can stop
// and restart it (outage tests). Its data survives a restart.
type S3Server struct {
	Endpoint, AccessKey, SecretKey string

	t         testing.TB
	bin, root string
	sidecar   string
	cmd       *exec.Cmd
}

// StartS3 starts a private versitygw (./bin/versitygw, installed by
// `make deps` or `make test`; or AGENTFS_TEST_VERSITYGW) on a free port.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin := os.Getenv("AGENTFS_TEST_VERSITYGW")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no versitygw at %s: run `make deps` (or `make test`, which installs it)", bin)
	}
	dir := t.TempDir()
	s := &S3Server{Endpoint: freeAddr(t), AccessKey: "outage-test", SecretKey: "outage-test-secret",
		t: t, bin: bin, root: filepath.Join(dir, "root") + "/", sidecar: filepath.Join(dir, "sidecar")}
	for _, d := range []string{s.root, s.sidecar} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the server on its address and waits until it listens.
func (s *S3Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", s.Endpoint, "--quiet", "posix", "--sidecar", s.sidecar, s.root)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.SysProcAttr = dieWithParent()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	waitListening(s.t, s.Endpoint)
}

// Pause freezes the server (SIGSTOP): it still accepts connections, as the
// kernel does that, but answers nothing, as a hung server would. t is the
// calling (sub)test.
func (s *S3Server) Pause(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (s *S3Server) Resume(t testing.TB) { s.signal(t, syscall.SIGCONT) }

func (s *S3Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal versitygw: %v", err)
	}
}

// Stop stops the server (a clean stop, as an operator would).
func (s *S3Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot stop
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// ConfigOn returns a fresh schema (on the test Postgres, reached at pgAddr
// when it is not empty) and a fresh bucket on s3.
func ConfigOn(t testing.TB, s3 *S3Server, pgAddr string) storage.Config {
	t.Helper()
	cfg := Config(t)
	cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey = s3.Endpoint, s3.AccessKey, s3.SecretKey
	if pgAddr != "" {
		cfg = WithPostgresAt(t, cfg, pgAddr)
	}
	return cfg
}

// WithPostgresAt is cfg with its Postgres reached at addr (a Proxy's, say)
// instead: the same database and schema by another way in.
func WithPostgresAt(t testing.TB, cfg storage.Config, addr string) storage.Config {
	t.Helper()
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	cfg.DatabaseURL = u.String()
	return cfg
}

// PostgresAddr is the host:port of the test Postgres.
func PostgresAddr(t testing.TB) string {
	u, err := url.Parse(os.Getenv("AGENTFS_TEST_DATABASE_URL"))
	if err != nil || u.Host == "" {
		t.Fatalf("no test Postgres: %s", howToStart)
	}
	return u.Host
}

// Proxy forwards TCP connections to a target until it is cut: then every
// connection is dropped and new ones are refused, as if the target went
// down, until Restore. It can also stall: connections stay open and new
// ones are accepted, but no byte passes either way, as if the target hung.
//
// It counts the exchanges clients begin (Exchanges), so a test can tell how
// many requests reached the target, retries included.
type Proxy struct {
	ln        net.Listener
	target    string
	mu        sync.Mutex
	moving    *sync.Cond // broadcast when cut or stalled change
	cut       bool
	stalled   bool
	conns     map[net.Conn]bool // open connections, both ends; true for those to the target
	exchanges int
}

// Open is how many connections through the proxy are open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, toTarget := range p.conns {
		if toTarget {
			n++
		}
	}
	return n
}

// TargetPorts are the local ports of the proxy's open connections to its
// target: for Postgres, the client_port of their backends in
// pg_stat_activity, so a test can pick out the connections of an instance
// that goes through the proxy.
func (p *Proxy) TargetPorts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ports []int
	for c, toTarget := range p.conns {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok && toTarget {
			ports = append(ports, a.Port)
		}
	}
	return ports
}

// Exchanges is how many exchanges clients began through the proxy: a
// connection's client sent bytes while the connection was new or after its
// target had answered. For HTTP/1.1 (no pipelining) that is one per
// request, whichever connection carries it, so a retry on another pooled
// connection counts too.
func (p *Proxy) Exchanges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchanges
}

// NewProxy starts a proxy to target on a free loopback port.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.moving = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.moving.Broadcast()
}

// Stall holds every byte in flight, both ways, until Restore.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Restore forwards connections again, and releases held bytes.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.stalled = false, false
	p.moving.Broadcast()
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *Proxy) forward(in net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.mu.Unlock()
		in.Close()
		return
	}
	p.conns[in], p.conns[out] = false, true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.conns, in)
		delete(p.conns, out)
	}()
	// awaiting: the client sent a request its target has not answered yet.
	awaiting := false
	go p.pipe(out, in, func() { // client to target
		if !awaiting {
			awaiting = true
			p.exchanges++
		}
	})
	p.pipe(in, out, func() { awaiting = false }) // target to client
}

// pipe copies src to dst, holding each chunk while the proxy is stalled;
// seen runs (under the proxy's lock) for each chunk as it arrives.
func (p *Proxy) pipe(dst, src net.Conn, seen func()) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			seen()
			for p.stalled && !p.cut {
				p.moving.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(errors.New("no go.mod above the test's directory"))
		}
		dir = parent
	}
}
