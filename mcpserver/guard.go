package mcpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentfs/agentfs/problem"
)

// GuardConfig names the hosts and browser origins /mcp answers, beside
// the public URL's and (for Host) the loopback names. Each is a comma-
// separated list; a host may carry a port (then only that port matches).
// The env tags name the variables agentfs serve reads them from.
type GuardConfig struct {
	// AllowedHosts are further Host values /mcp accepts (e.g. the name a
	// load balancer is reached by): agentfs.example.com, 10.0.0.5:8080.
	AllowedHosts string `env:"AGENTFS_MCP_ALLOWED_HOSTS"`
	// AllowedOrigins are further browser origins /mcp accepts
	// (scheme://host[:port], e.g. https://console.example.com).
	AllowedOrigins string `env:"AGENTFS_MCP_ALLOWED_ORIGINS"`
}

// Guard validates Host and Origin on /mcp before anything else reads the
// request (the MCP transport's defence against DNS rebinding and against
// pages in a browser calling a local server): a Host that is not the
// public URL's, a loopback name, or an allowed host, and an Origin that is
// not the public URL's or an allowed origin, are 403 FORBIDDEN. A request
// without Origin (every client that is not a browser page) passes. A
// server whose public URL is on loopback (a local server) also takes every
// loopback origin, whatever its port: a page that runs on this machine
// already reaches it, and local clients (the Inspector's own page, a
// proxy in front) use other ports.
type Guard struct {
	hosts    []string // lower case, each "host" or "host:port"
	origins  []string // lower case scheme://host[:port]
	loopback bool     // every loopback origin passes
}

// NewGuard makes the guard of a server reached at publicURL.
func NewGuard(publicURL string, cfg GuardConfig) (*Guard, error) {
	g := &Guard{}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("mcp guard: the public URL %q has no host", publicURL)
		}
		g.hosts = append(g.hosts, strings.ToLower(u.Host))
		g.origins = append(g.origins, origin(u))
		g.loopback = isLoopback(u.Host)
	}
	for _, h := range list(cfg.AllowedHosts) {
		g.hosts = append(g.hosts, strings.ToLower(h))
	}
	for _, o := range list(cfg.AllowedOrigins) {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("mcp guard: AGENTFS_MCP_ALLOWED_ORIGINS: %q is not an origin (scheme://host[:port])", o)
		}
		g.origins = append(g.origins, origin(u))
	}
	return g, nil
}

func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// origin is u's origin as browsers send it, with the scheme's default
// port dropped.
func origin(u *url.URL) string {
	host := strings.ToLower(u.Host)
	scheme := strings.ToLower(u.Scheme)
	if h, p, err := net.SplitHostPort(host); err == nil && (scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host
}

// Check says why r may not reach /mcp, or "" when it may.
func (g *Guard) Check(r *http.Request) string {
	if !g.hostAllowed(r.Host) {
		return fmt.Sprintf("the Host %q is not one this server answers /mcp for: set AGENTFS_MCP_ALLOWED_HOSTS to add it", r.Host)
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || !slices.Contains(g.origins, origin(u)) && !(g.loopback && isLoopback(u.Host)) {
		return fmt.Sprintf("the Origin %q may not call /mcp: set AGENTFS_MCP_ALLOWED_ORIGINS to allow a browser origin", o)
	}
	return ""
}

func (g *Guard) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	return isLoopback(host) || slices.Contains(g.hosts, host) || slices.Contains(g.hosts, hostName(host))
}

// hostName is host without its port and brackets.
func hostName(host string) string {
	name := strings.ToLower(host)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	return strings.Trim(name, "[]")
}

// isLoopback reports whether host (with or without a port) names this
// machine: localhost, a .localhost name, or a loopback address.
func isLoopback(host string) bool {
	name := hostName(host)
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// Handler refuses what Check refuses (403 FORBIDDEN), and passes the rest
// to next.
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := g.Check(r); why != "" {
			writeProblem(w, problem.New(problem.Forbidden, why))
			return
		}
		next.ServeHTTP(w, r)
	})
}
