// Package apitest runs the real API against the real test Postgres and S3
// servers and holds every response it sees to openapi.yaml. Handler and
// end-to-end tests talk to AgentFS only through it.
package apitest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/server"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/sweeper"
	"github.com/agentfs/agentfs/telemetry/logtest"
	"github.com/agentfs/agentfs/webhook"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// Spec returns the parsed, validated openapi.yaml and a router over it.
func Spec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(agentfs.OpenAPI)
		if specErr == nil {
			specErr = specDoc.Validate(context.Background())
		}
		if specErr == nil {
			specRouter, specErr = gorillamux.NewRouter(specDoc)
		}
	})
	if specErr != nil {
		t.Fatalf("openapi.yaml: %v", specErr)
	}
	return specDoc, specRouter
}

// Server is a running API on fresh storage: what agentfs serve runs
// (server.New), served by an httptest server.
type Server struct {
	URL    string
	Store  *storage.Store
	Core   *admission.Core
	Config storage.Config
	API    *handlers.API
	Logs   fmt.Stringer // everything the server logged so far
	// Server is the server.New the test server runs (NewDoor makes
	// another /mcp door on it).
	Server *server.Server
}

// Options adjust a test server.
type Options struct {
	Limits handlers.Limits
	// Wrap, when set, wraps the store the read gate reads (e.g. to inject
	// a panic).
	Wrap func(*storage.Store) reads.Store
	// Lease is the idempotency claim lease (default 30s).
	Lease time.Duration
	// Config, when set, is the storage to use instead of a fresh schema and
	// bucket on the shared test servers (outage tests bring their own).
	Config *storage.Config
	// MCP, when set, is served at /mcp instead of the tool door serve
	// makes: for tests that make a door per session (Server.NewDoor).
	MCP http.Handler
	// RecordKeys seal the secrets of recorded answers (AGENTFS_RECORD_KEY);
	// nil: a new random key for this server.
	RecordKeys *idempotency.RecordKeys
	// OAuth, with an Issuer, makes the server take that authorization
	// server's JWT access tokens (AGENTFS_OAUTH_ISSUER); OAuthOptions are
	// its verifier's clock and refetch interval.
	OAuth        oauth.Config
	OAuthOptions oauth.Options
	// Webhook is the webhook delivery's configuration (its retry
	// schedule, AllowPrivate for receivers on loopback).
	Webhook webhook.Config
}

// NewServer starts the API on a fresh schema and bucket.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	cfg := config(t, opts)
	hs := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + hs.Listener.Addr().String()
	logs := &logtest.Buffer{}
	cfg.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		hs.Close()
		t.Fatalf("server.New: %v (start the test servers with `make test`, or `scripts/test.sh ./...`)", err)
	}
	t.Cleanup(srv.Close)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(hs.Close)
	logs.ShowOnFailure(t, "server: ")
	return &Server{URL: hs.URL, Store: srv.Store(), Core: srv.Core(), Config: cfg.Storage, API: srv.API(), Logs: logs,
		Server: srv}
}

// config is a test server's configuration: fresh storage (or
// opts.Config), the limits of withDefaults, two batch workers and no
// periodic sweeps (Sweep runs them).
func config(t testing.TB, opts Options) server.Config {
	t.Helper()
	var store storage.Config
	if opts.Config != nil {
		store = *opts.Config
	} else {
		store = storagetest.Config(t)
	}
	store.IdempotencyLease = cmp.Or(opts.Lease, 30*time.Second)
	limits := withDefaults(opts.Limits)
	store.IdempotencyRetention = limits.IdempotencyRetention
	keys := opts.RecordKeys
	if keys == nil {
		var err error
		if keys, err = idempotency.ParseRecordKeys(NewRecordKey(t)); err != nil {
			t.Fatal(err)
		}
	}
	return server.Config{Storage: store, Limits: limits, RecordKeys: keys,
		Batch:     batch.Config{Workers: 2, RescueAfter: 30 * time.Second},
		Sweeper:   sweeper.Config{BlobGrace: 6 * time.Hour},
		ReadStore: opts.Wrap, MCPDoor: opts.MCP, OAuth: opts.OAuth, OAuthOptions: opts.OAuthOptions, Webhook: opts.Webhook}
}

// NewRecordKey returns a new random record key, as AGENTFS_RECORD_KEY
// spells one.
func NewRecordKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, idempotency.RecordKeyBytes)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// Sweep runs every sweeper task once, counted in /metrics as serve's
// periodic sweeps are.
func (s *Server) Sweep() { s.Server.Sweep(context.Background()) }

// withDefaults fills in the limits a test left zero.
func withDefaults(l handlers.Limits) handlers.Limits {
	if l.MaxUploadBytes == 0 {
		l.MaxUploadBytes = 64 << 20
	}
	if l.MaxUploadSessionBytes == 0 {
		l.MaxUploadSessionBytes = 1 << 40
	}
	if l.UploadPartSize == 0 {
		l.UploadPartSize = 5 << 20
	}
	if l.UploadTTL == 0 {
		l.UploadTTL = time.Hour
	}
	if l.BodyIdleTimeout == 0 {
		l.BodyIdleTimeout = 30 * time.Second
	}
	if l.WriteIdleTimeout == 0 {
		l.WriteIdleTimeout = time.Minute
	}
	if l.BatchMaxItems == 0 {
		l.BatchMaxItems = 1000
	}
	if l.BatchMaxBytes == 0 {
		l.BatchMaxBytes = 8 << 20
	}
	if l.BatchMaxItemBytes == 0 {
		l.BatchMaxItemBytes = 64 << 10
	}
	if l.IdempotencyRetention == 0 {
		l.IdempotencyRetention = 7 * 24 * time.Hour
	}
	if l.QuotaWindow == 0 {
		l.QuotaWindow = time.Hour
	}
	if l.VersionRetention == 0 {
		l.VersionRetention = 30 * 24 * time.Hour
	}
	if l.MaxVersions == 0 {
		l.MaxVersions = 100
	}
	return l
}

// Token creates a token for subject with the scopes (read,write if none).
func (s *Server) Token(t testing.TB, subject string, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{agentfs.ScopeRead, agentfs.ScopeWrite}
	}
	tok, _, err := s.Store.CreateToken(context.Background(), subject, scopes)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return tok
}

// Client sends requests to an AgentFS server and checks every response
// against the spec.
type Client struct {
	t      testing.TB
	base   string
	token  string
	Header http.Header // sent with every request
}

// NewClient returns a client of base that authenticates with token (none if
// empty).
func NewClient(t testing.TB, base, token string) *Client {
	return &Client{t: t, base: strings.TrimRight(base, "/"), token: token, Header: http.Header{}}
}

// Client returns a client of this server with a new token for subject.
func (s *Server) Client(t testing.TB, subject string, scopes ...string) *Client {
	return NewClient(t, s.URL, s.Token(t, subject, scopes...))
}

// Response is a response read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Problem is the problem+json body of an error response.
type Problem = problem.Problem

// Do sends method path with body (nil, []byte, string or io.Reader) and the
// extra headers given as name, value pairs.
func (c *Client) Do(method, path string, body any, headers ...string) *Response {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	case io.Reader:
		r = b
	default:
		c.t.Fatalf("apitest: unsupported body %T", body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatalf("new request: %v", err)
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Content-Length" {
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	return c.Send(req)
}

// Send sends req, reads the response and validates it against the spec.
func (c *Client) Send(req *http.Request) *Response {
	c.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	body, err := readBody(res)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: body}
	Check(c.t, req, out)
	return out
}

// readBody reads a response whole, except an event stream (which never
// ends by itself): of that, its first message, which the server sends at
// once (its first events, or a heartbeat).
func readBody(res *http.Response) ([]byte, error) {
	if res.Header.Get("Content-Type") != "text/event-stream" {
		return io.ReadAll(res.Body)
	}
	r := bufio.NewReader(res.Body)
	var msg []byte
	for {
		line, err := r.ReadBytes('\n')
		msg = append(msg, line...)
		if err == io.EOF || bytes.HasSuffix(msg, []byte("\n\n")) {
			return msg, nil
		}
		if err != nil {
			return msg, err
		}
	}
}

// Check validates one response against the spec: the route and status must
// be declared and the headers and body must match. Every response must carry
// X-Request-ID, and every error must be a problem.
func Check(t testing.TB, req *http.Request, res *Response) {
	t.Helper()
	if res.Header.Get("X-Request-ID") == "" {
		t.Errorf("%s %s: response has no X-Request-ID", req.Method, req.URL.Path)
	}
	if res.Status >= 400 {
		checkProblem(t, req, res)
	}
	_, router := Spec(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		// Only an unknown route or method may be missing from the spec, and
		// it must be answered 404 or 405.
		if res.Status != http.StatusNotFound && res.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: not in openapi.yaml (%v) but answered %d", req.Method, req.URL.Path, err, res.Status)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  res.Status,
		Header:  res.Header,
		Body:    io.NopCloser(bytes.NewReader(res.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: response %d does not match openapi.yaml: %v\nbody: %s",
			req.Method, req.URL.Path, res.Status, err, truncate(res.Body))
	}
}

func checkProblem(t testing.TB, req *http.Request, res *Response) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s %s: %d has Content-Type %q, want application/problem+json", req.Method, req.URL.Path, res.Status, ct)
	}
	if req.Method == http.MethodHead {
		return
	}
	var p Problem
	if err := json.Unmarshal(res.Body, &p); err != nil {
		t.Errorf("%s %s: %d body is not a problem: %v\nbody: %s", req.Method, req.URL.Path, res.Status, err, truncate(res.Body))
		return
	}
	if p.Status != res.Status || p.Code == "" || p.RequestID != res.Header.Get("X-Request-ID") {
		t.Errorf("%s %s: problem does not match its response: %s", req.Method, req.URL.Path, truncate(res.Body))
	}
	wantRetryable := res.Status == 408 || res.Status == 429 || res.Status >= 500 || p.Code == "OPERATION_IN_PROGRESS"
	if p.Retryable != wantRetryable {
		t.Errorf("%s %s: problem %s has retryable=%v", req.Method, req.URL.Path, p.Code, p.Retryable)
	}
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// JSON decodes the body into v.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %d body: %v\nbody: %s", r.Status, err, truncate(r.Body))
	}
}

// GetJSON is GET target by c, answered 200, its body decoded as a T: what
// a test reads of a listing or a resource.
func GetJSON[T any](t testing.TB, c *Client, target string) T {
	t.Helper()
	var v T
	c.Do("GET", target, nil).Expect(t, http.StatusOK).JSON(t, &v)
	return v
}

// Problem decodes the body as a problem.
func (r *Response) Problem(t testing.TB) Problem {
	t.Helper()
	var p Problem
	r.JSON(t, &p)
	return p
}

// Expect fails the test unless the response has this status.
func (r *Response) Expect(t testing.TB, status int) *Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d\nbody: %s", r.Status, status, truncate(r.Body))
	}
	return r
}

// ExpectProblem fails the test unless the response is a problem with this
// status and code.
func (r *Response) ExpectProblem(t testing.TB, status int, code string) Problem {
	t.Helper()
	r.Expect(t, status)
	p := r.Problem(t)
	if p.Code != code {
		t.Fatalf("problem code %s, want %s\nbody: %s", p.Code, code, truncate(r.Body))
	}
	return p
}

// File is the File object as tests read it.
type File = api.File

// File decodes the body as a File.
func (r *Response) File(t testing.TB) File {
	t.Helper()
	var f File
	r.JSON(t, &f)
	return f
}

// FileList is a page of files.
type FileList = api.FileList
