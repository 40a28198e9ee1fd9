package handlers_test

import (
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// haproxyBin is Debian's haproxy: HAPROXY_BIN (scripts/test.sh exports
// it), else the one on PATH or in /usr/sbin.
func haproxyBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HAPROXY_BIN"); p != "" {
		return p
	}
	if p, err := osexec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	t.Fatal("haproxy not found: install it with `source scripts/lib.sh; ensure_deps haproxy` (scripts/test.sh does) or set HAPROXY_BIN")
	return ""
}

// startHAProxy runs haproxy in front of backends (round robin, HTTP mode)
// with idle timeouts of idle, and answers its URL.
func startHAProxy(t *testing.T, idle time.Duration, backends ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server s%d %s\n", i, strings.TrimPrefix(b, "http://"))
	}
	cfg := fmt.Sprintf(`defaults
  mode http
  timeout connect 2s
  timeout client %[1]dms
  timeout server %[1]dms
frontend fe
  bind %[2]s
  default_backend be
backend be
  balance roundrobin
%[3]s`, idle.Milliseconds(), addr, servers.String())
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(haproxyBin(t), "-db", "-f", file)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not listen on %s: %s", addr, out.String())
		}
	}
}

// TestEventStreamBehindHAProxy: through a real load balancer that closes
// connections idle for two seconds (ten heartbeats, so that a loaded
// machine's stalls do not pass for missing heartbeats) and sends each new one to the next of two
// instances, a stream stays open on its heartbeats through quiet spells
// longer than that, and a client that reconnects (landing on the other
// instance) with Last-Event-ID sees every event once, in feed order.
func TestEventStreamBehindHAProxy(t *testing.T) {
	a, tok := streamServer(t)
	b := apitest.NewServer(t, apitest.Options{Config: &a.Config, Limits: handlers.Limits{StreamHeartbeat: 200 * time.Millisecond}})
	idle := 2 * time.Second
	lb := startHAProxy(t, idle, a.URL, b.URL)
	writer := apitest.NewClient(t, a.URL, tok)
	var want, got []string
	last := ""
	for round := range 4 {
		s := openStream(t, lb, tok, "prefix=lb/", last)
		for i := range 3 {
			want = append(want, upload(t, writer, fmt.Sprintf("lb/%d-%d.txt", round, i), "x").Expect(t, 201).File(t).Path)
		}
		for len(got) < len(want) {
			e, id, ok := s.nextEvent(t)
			if !ok {
				t.Fatalf("round %d: the stream ended after %v", round, got)
			}
			got, last = append(got, e.Path), id
		}
		// Quiet for longer than the balancer's idle timeout: only the
		// heartbeats keep the connection.
		time.Sleep(idle + idle/2)
		if m, ok := s.next(); !ok || m.data != "" {
			t.Fatalf("round %d: after a quiet spell the stream gave %+v (open: %v), want a heartbeat", round, m, ok)
		}
		s.close()
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("through the balancer:\n%v\nwant, once each in feed order:\n%v", got, want)
	}
}
