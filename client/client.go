package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client talks to one AgentFS server as one token's subject. It is safe
// for concurrent use.
type Client struct {
	base     string // scheme://host[/prefix], no trailing slash
	token    string
	http     *http.Client
	agentID  string
	runID    string
	policy   RetryPolicy
	rand     *lockedRand
	autoKeys bool
	onRetry  func(attempt int, wait time.Duration, err error)
}

// Option configures a Client.
type Option func(*Client) error

// WithHTTPClient sends requests with hc instead of the package's shared
// client (sharedHTTP).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("WithHTTPClient: nil *http.Client")
		}
		c.http = hc
		return nil
	}
}

// WithAgentID sends id as X-Agent-ID on every request: files the client
// creates carry it as agent_id and can be listed by it.
func WithAgentID(id string) Option {
	return withTag("agent id", id, func(c *Client) *string { return &c.agentID })
}

// WithRunID sends id as X-Run-ID on every request: files the client
// creates carry it as run_id, so ListOptions{RunID: id} finds exactly what
// this run made.
func WithRunID(id string) Option {
	return withTag("run id", id, func(c *Client) *string { return &c.runID })
}

// withTag is the option that sets the tag field names to id once id
// passes checkTagValue.
func withTag(what, id string, field func(*Client) *string) Option {
	return func(c *Client) error {
		if err := checkTagValue(what, id); err != nil {
			return err
		}
		*field(c) = id
		return nil
	}
}

// WithRetryPolicy replaces the default retry policy; zero fields keep their
// defaults. RetryPolicy{MaxAttempts: 1} turns retries off.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		p, err := p.withDefaults()
		c.policy = p
		return err
	}
}

// WithRandom draws the retry jitter from src instead of the global
// source, so that tests can make the waits reproducible.
func WithRandom(src rand.Source) Option {
	return func(c *Client) error {
		if src == nil {
			return errors.New("WithRandom: nil source")
		}
		c.rand = &lockedRand{r: rand.New(src)}
		return nil
	}
}

// WithOnRetry calls fn before every wait between two attempts of one call,
// so that a program can say why it is waiting instead of falling silent
// for as long as the retries last. attempt is the number of the attempt
// that just failed (1 for the first; a poll of /v1/operations/{key}
// counts as an attempt), wait is the pause about to start, and err is
// what that attempt ended with: a *Problem, or the failed connection's
// error. fn is not called after the last attempt. Calls that run at once
// (the parts of UploadFile) call fn concurrently; it should return
// quickly, and cannot change the policy.
func WithOnRetry(fn func(attempt int, wait time.Duration, err error)) Option {
	return func(c *Client) error {
		c.onRetry = fn
		return nil
	}
}

// WithoutIdempotencyKeys stops the client from generating an
// Idempotency-Key for writes that were not given one. Such a write is then
// repeated after a lost connection only when it is safe without a key
// (replace uploads, deletes, restores, upload sessions); a plain create is
// not. CreateBatch still generates one: the server requires it.
func WithoutIdempotencyKeys() Option {
	return func(c *Client) error {
		c.autoKeys = false
		return nil
	}
}

// sharedHTTP is the HTTP client of every Client made without
// WithHTTPClient: net/http's default transport, but keeping up to
// idlePerHost idle connections to a server instead of 2, so that many
// requests at once (a mount's write-back workers, an agent's parallel
// uploads) reuse their connections instead of opening one each time.
var sharedHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idlePerHost
	return &http.Client{Transport: t}
}()

// idlePerHost is how many idle connections to one server sharedHTTP keeps.
const idlePerHost = 64

// New returns a client of the server at baseURL (for example
// "http://127.0.0.1:8080") that authenticates with token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q: want http(s)://host[:port][/prefix]", baseURL)
	}
	policy, _ := RetryPolicy{}.withDefaults()
	c := &Client{
		base:     strings.TrimRight(u.String(), "/"),
		token:    token,
		http:     sharedHTTP,
		policy:   policy,
		rand:     &lockedRand{},
		autoKeys: true,
	}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// tagValue is the X-Agent-ID and X-Run-ID syntax.
var tagValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/=+@-]{0,127}$`)

func checkTagValue(what, v string) error {
	if !tagValue.MatchString(v) {
		return fmt.Errorf("%s %q: want 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit", what, v)
	}
	return nil
}

// keyFor returns the Idempotency-Key of one logical write: the caller's,
// else a new random one (unless generation is off).
func (c *Client) keyFor(given string) string {
	if given != "" || !c.autoKeys {
		return given
	}
	return NewIdempotencyKey()
}

// requiredKey is given, or a new key when it is empty: for the writes the
// server runs only with a key, also by a client WithoutIdempotencyKeys.
func requiredKey(given string) string {
	if given == "" {
		return NewIdempotencyKey()
	}
	return given
}

// NewIdempotencyKey returns a new random key, for a caller that wants to
// keep the key of a write (to retry it across process restarts, say).
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return "afs-" + hex.EncodeToString(b[:])
}

// request is one logical call: the same request is sent on every attempt.
type request struct {
	call
	method string
	path   string // escaped, under the base URL
	query  url.Values
	header http.Header
	key    string // Idempotency-Key, "" for none
	body   *body  // nil for none
	// noFollow answers a redirect instead of following it.
	noFollow bool
}

func newRequest(route, path string) *request {
	method, _, _ := strings.Cut(route, " ")
	return &request{call: call{Route: route}, method: method, path: path, header: http.Header{}}
}

// withKey sets the request's Idempotency-Key.
func (r *request) withKey(key string) *request {
	r.key, r.Keyed = key, key != ""
	return r
}

// newHTTP builds one attempt of the request.
func (c *Client) newHTTP(ctx context.Context, r *request) (*http.Request, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.agentID != "" {
		req.Header.Set("X-Agent-ID", c.agentID)
	}
	if c.runID != "" {
		req.Header.Set("X-Run-ID", c.runID)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	if r.body != nil {
		if req.Body, err = r.body.next(); err != nil {
			return nil, err
		}
		req.ContentLength = r.body.size
		if req.ContentLength == 0 {
			req.Body = http.NoBody
		}
	}
	return req, nil
}

// body is a request body that may be sent more than once.
type body struct {
	first   io.Reader                     // the caller's reader
	getBody func() (io.ReadCloser, error) // a fresh copy, when given
	seeker  io.ReadSeeker                 // rewound to start, when seekable
	start   int64
	size    int64 // -1: unknown, sent chunked

	mu      sync.Mutex
	current *attemptBody // the body of the latest attempt
	used    bool         // some attempt read from it
}

// newBody wraps r for sending. A seekable r is sent with its length and
// rewound for every attempt; getBody, when given, supplies the copies for
// attempts after the first.
func newBody(r io.Reader, getBody func() (io.ReadCloser, error)) *body {
	b := &body{first: r, getBody: getBody, size: -1}
	if r == nil && getBody == nil {
		b.size = 0
		return b
	}
	if rs, ok := r.(io.ReadSeeker); ok && getBody == nil {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err != nil { // a pipe or a terminal: not seekable after all
			return b
		}
		end, err := rs.Seek(0, io.SeekEnd)
		if err == nil {
			_, err = rs.Seek(start, io.SeekStart)
		}
		if err == nil && end >= start {
			b.seeker, b.start, b.size = rs, start, end-start
		}
	}
	return b
}

// rewindable reports whether the body can be sent again.
func (b *body) rewindable() bool { return b.seeker != nil || b.getBody != nil || b.size == 0 }

// lost reports whether an attempt read from a body that cannot be re-read.
func (b *body) lost() bool {
	if b == nil {
		return false
	}
	b.retire()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used && !b.rewindable()
}

// next returns the body of the next attempt. The previous attempt's body
// is cut off first, so a transport still reading it cannot interleave with
// this one.
func (b *body) next() (io.ReadCloser, error) {
	b.retire()
	b.mu.Lock()
	defer b.mu.Unlock()
	var rc io.ReadCloser
	switch {
	case b.size == 0:
		return http.NoBody, nil
	case b.seeker != nil:
		if _, err := b.seeker.Seek(b.start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("rewind request body: %w", err)
		}
		rc = io.NopCloser(b.seeker)
	case b.current == nil && b.first != nil:
		rc = io.NopCloser(b.first)
	case b.getBody != nil:
		var err error
		if rc, err = b.getBody(); err != nil {
			return nil, fmt.Errorf("get request body: %w", err)
		}
	case b.used:
		return nil, errBodyNotRewindable
	default: // never read by the previous attempt
		rc = io.NopCloser(b.first)
	}
	b.current = &attemptBody{rc: rc, owner: b}
	return b.current, nil
}

// retire cuts off the latest attempt's body.
func (b *body) retire() {
	b.mu.Lock()
	cur := b.current
	b.mu.Unlock()
	if cur != nil {
		cur.retire()
	}
}

// attemptBody is the body one attempt reads. It records that it was read
// and refuses reads once retired. It never closes the caller's reader.
type attemptBody struct {
	readMu  sync.Mutex // held while reading, so a rewind waits for a read
	rc      io.ReadCloser
	owner   *body
	retired atomic.Bool
	closed  sync.Once
}

func (a *attemptBody) Read(p []byte) (int, error) {
	if a.retired.Load() {
		return 0, errAbandonedBody
	}
	a.readMu.Lock()
	defer a.readMu.Unlock()
	if a.retired.Load() {
		return 0, errAbandonedBody
	}
	a.owner.mu.Lock()
	a.owner.used = true
	a.owner.mu.Unlock()
	return a.rc.Read(p)
}

var errAbandonedBody = errors.New("request body of an abandoned attempt")

func (a *attemptBody) Close() error {
	a.retire()
	return nil
}

// retire ends the attempt's reads. For a shared seekable body it waits
// for a read in flight, which is short, so that a rewind comes after it;
// a stream is never waited for, since its read may block.
func (a *attemptBody) retire() {
	a.retired.Store(true)
	if a.owner.seeker != nil {
		a.readMu.Lock()
		// An empty critical section: it waits for the read in flight.
		a.readMu.Unlock()
	}
	a.closed.Do(func() {
		if a.owner.getBody != nil {
			_ = a.rc.Close() // a copy made by getBody is ours to close
		}
	})
}
