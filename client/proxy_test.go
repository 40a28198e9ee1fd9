package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/storage/storagetest"
)

// faultProxy stands between a client and the real server. It forwards
// every request unless a fault claims it, and records what it saw.
type faultProxy struct {
	URL       string
	target    string
	transport *http.Transport

	mu     sync.Mutex
	faults []*fault
	seen   []*seenRequest
}

// fault answers the next times requests that match, instead of the server.
type fault struct {
	match func(*http.Request) bool
	times int
	act   func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest)
}

// seenRequest is one request as the proxy saw it.
type seenRequest struct {
	Method, Path, Key string
	Query             string // the raw query
	Digest            string // Content-Digest
	At                time.Time
	// Status is what the client got (0: the connection was dropped);
	// ServerStatus what the server answered, if the request reached it.
	Status, ServerStatus int
	RetryAfter           string
	Replayed             bool
	BodyBytes            int64 // bytes of request body the proxy read
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	p := &faultProxy{target: strings.TrimRight(target, "/"), transport: &http.Transport{}}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.transport.CloseIdleConnections()
	})
	p.URL = srv.URL
	return p
}

// inject adds a fault for the next times requests with this method and
// path (a path ending in * matches its prefix).
func (p *faultProxy) inject(method, path string, times int,
	act func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest)) {
	p.injectWhere(func(r *http.Request) bool {
		if r.Method != method {
			return false
		}
		if prefix, ok := strings.CutSuffix(path, "*"); ok {
			return strings.HasPrefix(r.URL.Path, prefix)
		}
		return r.URL.Path == path
	}, times, act)
}

// injectWhere adds a fault for the next times requests that match.
func (p *faultProxy) injectWhere(match func(*http.Request) bool, times int,
	act func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, &fault{times: times, act: act, match: match})
}

// clearFaults drops the faults not used up yet.
func (p *faultProxy) clearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Key: r.Header.Get("Idempotency-Key"),
		Digest: r.Header.Get("Content-Digest"), At: time.Now()}
	p.mu.Lock()
	p.seen = append(p.seen, rec)
	var f *fault
	for _, c := range p.faults {
		if c.times > 0 && c.match(r) {
			c.times--
			f = c
			break
		}
	}
	p.mu.Unlock()
	if f != nil {
		f.act(p, w, r, rec)
		return
	}
	forwardAndAnswer(p, w, r, rec)
}

// forward sends r to the server and returns its whole response.
func (p *faultProxy) forward(r *http.Request, rec *seenRequest) (*http.Response, []byte, error) {
	counted := &countingReader{r: r.Body}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), counted)
	if err != nil {
		return nil, nil, err
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = http.NoBody
	}
	res, err := p.transport.RoundTrip(out)
	p.setBodyBytes(rec, counted)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	p.mu.Lock()
	rec.ServerStatus = res.StatusCode
	rec.RetryAfter = res.Header.Get("Retry-After")
	rec.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
	p.mu.Unlock()
	return res, body, err
}

func (p *faultProxy) setBodyBytes(rec *seenRequest, c *countingReader) {
	p.mu.Lock()
	rec.BodyBytes = c.n.Load()
	p.mu.Unlock()
}

// forwardAndAnswer relays the server's answer: no fault.
func forwardAndAnswer(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
	res, body, err := p.forward(r, rec)
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(body)
	p.mu.Lock()
	rec.Status = res.StatusCode
	p.mu.Unlock()
}

// dropAfterCommit forwards the request, lets the server answer, and then
// closes the client's connection without a response: the write happened,
// the client cannot know.
func dropAfterCommit(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
	if _, _, err := p.forward(r, rec); err != nil {
		panic(err)
	}
	hangUp(w)
}

// dropBeforeForward closes the connection after reading the request: the
// server never sees it.
func dropBeforeForward(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
	c := &countingReader{r: r.Body}
	_, _ = io.Copy(io.Discard, c)
	p.setBodyBytes(rec, c)
	hangUp(w)
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// answerProblem answers with a problem of this status and code after
// reading the whole body, as a server that failed late would.
func answerProblem(status int, code, retryAfter string) func(*faultProxy, http.ResponseWriter, *http.Request, *seenRequest) {
	return func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
		c := &countingReader{r: r.Body}
		_, _ = io.Copy(io.Discard, c)
		p.setBodyBytes(rec, c)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Request-ID", "req_proxy")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"/problems/%s","title":"Injected","status":%d,"detail":"injected by the test proxy","code":%q,"retryable":%v,"request_id":"req_proxy"}`,
			code, status, code, status == 408 || status == 429 || status >= 500)
		p.mu.Lock()
		rec.Status = status
		p.mu.Unlock()
	}
}

// where returns the requests seen that match.
func (p *faultProxy) where(match func(seenRequest) bool) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, s := range p.seen {
		if match(*s) {
			out = append(out, *s)
		}
	}
	return out
}

// requests returns the requests seen with this method and path.
func (p *faultProxy) requests(method, path string) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, s := range p.seen {
		if s.Method == method && s.Path == path {
			out = append(out, *s)
		}
	}
	return out
}

// waitFor polls until cond holds on what the proxy saw, failing the test
// after a generous bound so that a broken client cannot hang it.
func (p *faultProxy) waitFor(t *testing.T, what string, cond func(seen []seenRequest) bool) {
	t.Helper()
	storagetest.Eventually(t, 20*time.Second, "the proxy to see "+what, func() bool {
		p.mu.Lock()
		seen := make([]seenRequest, len(p.seen))
		for i, s := range p.seen {
			seen[i] = *s
		}
		p.mu.Unlock()
		return cond(seen)
	})
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}
