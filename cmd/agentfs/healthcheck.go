package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheckCommand is agentfs healthcheck: a container's readiness probe
// that needs no shell.
func healthcheckCommand() *command {
	return &command{
		name:    "healthcheck",
		summary: "exit 0 when the server answers /readyz, 1 otherwise (for containers)",
		usage:   "agentfs healthcheck [--url URL] [--live] [--timeout DURATION]",
		help: `Asks a running server whether it is ready (GET /readyz: Postgres and S3
reachable) and exits 0 if it answers 200, 1 otherwise, saying why on
stderr. With --live it asks /healthz instead (the process answers at all).
It needs no shell and no curl, so a distroless container can run it as its
healthcheck.

The server is --url, else AGENTFS_URL, else the address AGENTFS_LISTEN_ADDR
listens on (default 127.0.0.1:8080; a wildcard host such as 0.0.0.0 is
reached at 127.0.0.1).

Examples:
  agentfs healthcheck
  agentfs healthcheck --url http://agentfs.internal:8080 --timeout 2s
  healthcheck: {test: ["CMD", "/agentfs", "healthcheck"]}   # docker-compose.yml
`,
		flags: healthcheckFlags,
	}
}

func healthcheckFlags(fs *flag.FlagSet) action {
	base := fs.String("url", "", "the server's base `URL` (default: AGENTFS_URL, else the listen address)")
	live := fs.Bool("live", false, "ask /healthz (alive) instead of /readyz (ready to serve)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this `DURATION`")
	return func(ctx context.Context, p *proc, args []string) error {
		if len(args) != 0 {
			return usagef("healthcheck takes flags only")
		}
		if *timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		target := *base
		if target == "" {
			target = healthBase(p.getenv)
		}
		route := "/readyz"
		if *live {
			route = "/healthz"
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return probe(ctx, p.stdout, strings.TrimRight(target, "/")+route)
	}
}

// healthBase is the server a healthcheck asks: AGENTFS_URL, else the
// listen address, where a wildcard host is reached on loopback.
func healthBase(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv("AGENTFS_URL")); u != "" {
		return u
	}
	addr := strings.TrimSpace(getenv("AGENTFS_LISTEN_ADDR"))
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr // probe reports what is wrong with it
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// probe GETs url once and succeeds on 200.
func probe(ctx context.Context, stdout io.Writer, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("healthcheck: %s did not answer in time", url)
		}
		return fmt.Errorf("healthcheck: %s: %s", url, transportReason(err))
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, res.Status)
	return nil
}
