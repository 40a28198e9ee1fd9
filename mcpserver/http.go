package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/quota"
	"github.com/agentfs/agentfs/reads"
)

// HTTPDeps are what the /mcp door needs of the API server.
type HTTPDeps struct {
	Core  *admission.Core
	Reads *reads.Gate
	// MaxUploadBytes bounds a write's content, as POST /v1/files does.
	MaxUploadBytes int64
	// Quota and QuotaLimit charge the bytes a tool stores against its
	// subject's byte quota (QuotaLimit.Bytes 0: none).
	Quota      quota.Store
	QuotaLimit quota.Limit
	// Rate, when set, takes n requests from a subject's request rate
	// (handlers.RateLimits.Take): the HTTP door takes one per request, the
	// /mcp door one more for each further call a batch holds.
	Rate func(subject string, n int) (wait time.Duration, ok bool)
}

// envelopeBytes is what a tool call needs around its arguments' largest
// value, escaped: the JSON-RPC envelope, a path, a key, the other
// arguments.
const envelopeBytes = 64 << 10

// MaxBodyBytes is the largest /mcp request body: a write_file of
// maxWrite bytes whose every byte JSON escapes as \u00XX (six bytes), and
// its envelope, so every write the write limit allows fits however its
// client escapes it. A larger body is answered PAYLOAD_TOO_LARGE.
func MaxBodyBytes(maxWrite int64) int64 {
	if maxWrite <= 0 {
		maxWrite = DefaultMaxWriteBytes
	}
	return min(6*maxWrite, math.MaxInt64/2) + envelopeBytes
}

// HTTPHandler is the /mcp door: the tools over MCP's Streamable HTTP
// transport, stateless (any instance answers any request, so no sticky
// sessions), every request served by one server on one CoreBackend, each
// call acting as the caller the HTTP door authenticated
// (agentfs.CallerFromContext). opts.AgentID and opts.RunID are not used:
// each request carries its own. Before the SDK reads a request the door
// bounds it: its body (MaxBodyBytes), JSON-RPC batches (only where the
// protocol has them, at most opts.MaxBatchCalls calls, each taken from the
// rate limit), and what one request answers (opts.MaxAnswerBytes, its
// calls run one at a time).
func HTTPHandler(d HTTPDeps, opts Options) (http.Handler, error) {
	if d.Core == nil || d.Reads == nil || d.QuotaLimit.Bytes > 0 && (d.Quota == nil || d.QuotaLimit.Window <= 0) {
		return nil, errors.New("mcpserver: HTTPHandler needs Core, Reads, and Quota with a window when QuotaLimit is set")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	backend := &CoreBackend{Core: d.Core, Reads: d.Reads, MaxUploadBytes: d.MaxUploadBytes,
		Quota: d.Quota, Limit: d.QuotaLimit, Log: opts.Logger}
	srv, err := newServer(backend, opts, watches{d.Reads})
	if err != nil {
		return nil, err
	}
	maxBody := MaxBodyBytes(opts.MaxWriteBytes)
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if _, ok := agentfs.CallerFromContext(r.Context()); !ok {
			return nil // not authenticated: the SDK answers 400
		}
		return srv
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: maxBody})
	return &door{sdk: sdk, rate: d.Rate, maxBody: maxBody, maxWrite: opts.MaxWriteBytes,
		maxCalls: opts.MaxBatchCalls, maxAnswer: opts.MaxAnswerBytes,
		gate: d.Reads, backend: backend, opts: opts, log: opts.Logger}, nil
}

// door bounds each /mcp request, then hands it to the SDK.
type door struct {
	sdk       http.Handler
	rate      func(subject string, n int) (time.Duration, bool)
	maxBody   int64
	maxWrite  int64
	maxCalls  int
	maxAnswer int64
	// What subscriptions need: the feed, and a server per listen request.
	gate    *reads.Gate
	backend Backend
	opts    Options
	log     *slog.Logger
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, _ := agentfs.CallerFromContext(r.Context())
	if why := badVersion(r); why != "" {
		writeRPCError(w, http.StatusBadRequest, nil, CodeUnsupportedProtocolVersion, why)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		d.stream(w, r, who)
		return
	case http.MethodDelete:
		d.endSession(w, r, who)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, d.maxBody+1))
	switch {
	case err != nil:
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "the request body could not be read")
		return
	case int64(len(body)) > d.maxBody:
		d.tooLarge(w, io.MultiReader(bytes.NewReader(body), r.Body))
		return
	}
	env, err := inspect(body)
	if err == nil && !d.admit(w, r, who, env) {
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	ctx := r.Context()
	if err != nil || env.batch {
		// Only a batch holds more than one call whose answers add up; a
		// single call's answer is not counted (that took an extra JSON
		// encoding of every answer).
		ctx = withAnswers(ctx, d.maxAnswer)
	}
	if id := r.Header.Get(SessionHeader); ValidSessionID(id) {
		ctx = withSession(ctx, id)
	}
	pw := &plainErrors{ResponseWriter: w, id: env.first.ID}
	defer pw.finish()
	switch {
	case env.first.Method == "subscriptions/listen":
		d.listen(pw, r.WithContext(ctx), who)
		return
	case env.first.Method == "initialize" && r.Header.Get(SessionHeader) == "":
		// The session resources/subscribe and GET /mcp name.
		w.Header().Set(SessionHeader, newSessionID())
	}
	d.sdk.ServeHTTP(pw, r.WithContext(ctx))
}

// CodeUnsupportedProtocolVersion is the JSON-RPC error of a request whose
// MCP-Protocol-Version this server does not speak.
const CodeUnsupportedProtocolVersion = mcp.CodeUnsupportedProtocolVersion

// ProtocolVersions are the MCP versions the doors negotiate, oldest first.
var ProtocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// badVersion says why the request's MCP-Protocol-Version is not one this
// server speaks, or "" when it is (or is absent: an initialize, or a
// client of 2025-03-26).
func badVersion(r *http.Request) string {
	vs := r.Header.Values("MCP-Protocol-Version")
	if len(vs) == 0 || len(vs) == 1 && slices.Contains(ProtocolVersions, vs[0]) {
		return ""
	}
	return fmt.Sprintf("MCP-Protocol-Version %q is not a version this server speaks (%s)",
		strings.Join(vs, ", "), strings.Join(ProtocolVersions, ", "))
}

// plainErrors turns the SDK's plain-text error answers into JSON-RPC
// errors with the same status, so every /mcp answer is JSON.
type plainErrors struct {
	http.ResponseWriter
	id     json.RawMessage
	status int
	text   bytes.Buffer
}

func (p *plainErrors) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status = status
		return
	}
	p.ResponseWriter.WriteHeader(status)
}

func (p *plainErrors) Write(b []byte) (int, error) {
	if p.status != 0 {
		return p.text.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

// Flush passes a stream's events on at once.
func (p *plainErrors) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok && p.status == 0 {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (p *plainErrors) Unwrap() http.ResponseWriter { return p.ResponseWriter }

func (p *plainErrors) finish() {
	if p.status == 0 {
		return
	}
	p.Header().Del("X-Content-Type-Options")
	code := int64(jsonrpc.CodeInvalidRequest)
	if p.status >= 500 {
		code = jsonrpc.CodeInternalError
	}
	id := p.id
	if len(id) == 0 {
		id = nil
	}
	writeRPCError(p.ResponseWriter, p.status, id, code, strings.TrimSpace(p.text.String()))
}

// admit refuses a batch the protocol does not have, one of more calls
// than a request may hold, and one whose calls the rate limit does not
// allow now (429 RATE_LIMITED, as for any request over the rate).
func (d *door) admit(w http.ResponseWriter, r *http.Request, who agentfs.Caller, env envelope) bool {
	if !env.batch {
		return true
	}
	versions := r.Header.Values("MCP-Protocol-Version")
	if !batchesAllowed(versions) {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"MCP-Protocol-Version %q has no JSON-RPC batches (only %s had them): send one message per request", versions, batchProtocol))
		return false
	}
	if env.calls > d.maxCalls {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"a batch holds at most %d calls; this one holds %d: send fewer per request", d.maxCalls, env.calls))
		return false
	}
	if d.rate == nil || env.calls < 2 {
		return true
	}
	wait, ok := d.rate(who.Subject, env.calls-1) // the HTTP door took the first
	switch {
	case !ok:
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"a batch of %d calls is more than this server's rate limit lets one subject send at once: send fewer per request", env.calls))
		return false
	case wait > 0:
		p := problem.New(problem.RateLimited, fmt.Sprintf("a batch of %d calls is more requests than this subject may send now", env.calls))
		p.RetryAfter = int(math.Ceil(wait.Seconds()))
		writeProblem(w, p)
		return false
	}
	return true
}

// scanLimit bounds how much of a body too large to take the door reads to
// find the call it holds (a client may send the id after the arguments).
func (d *door) scanLimit() int64 { return min(4*d.maxBody, math.MaxInt64/2) }

// tooLarge answers a body larger than MaxBodyBytes: a tools/call is a tool
// error PAYLOAD_TOO_LARGE (the model learns its write was too large, and
// the session lives on); anything else is a JSON-RPC error with 413. The
// connection is closed: the rest of the body is not read.
func (d *door) tooLarge(w http.ResponseWriter, body io.Reader) {
	w.Header().Set("Connection", "close")
	h, _ := scanCall(body, d.scanLimit())
	detail := fmt.Sprintf("the request is more than %d bytes, the most /mcp takes", d.maxBody)
	if h.Batch || h.Method != "tools/call" || h.ID == nil {
		writeRPCError(w, http.StatusRequestEntityTooLarge, h.ID, jsonrpc.CodeInvalidRequest, detail)
		return
	}
	cc := callContext{tool: h.Tool, limit: d.maxWrite}
	writeRPC(w, http.StatusOK, rpcMessage{ID: h.ID, Result: failure(cc, tooLarge(detail))})
}

// rpcMessage is a JSON-RPC answer.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	writeRPC(w, status, rpcMessage{ID: id, Error: &jsonrpc.Error{Code: code, Message: message}})
}

func writeRPC(w http.ResponseWriter, status int, m rpcMessage) {
	m.JSONRPC = "2.0"
	if m.ID == nil {
		m.ID = json.RawMessage("null")
	}
	body, _ := json.Marshal(m)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeProblem answers a problem, as the API's routes do.
func writeProblem(w http.ResponseWriter, p *problem.Problem) {
	p.RequestID = w.Header().Get(problem.RequestIDHeader)
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.Header().Set("Content-Type", problem.ContentType)
	w.WriteHeader(p.Status)
	_, _ = w.Write(problem.Encode(p))
}

// answers bounds what the calls of one request answer: they run one at a
// time, and once their answers hold limit bytes, the calls left answer
// PAYLOAD_TOO_LARGE without running, so a request holds at most limit
// bytes of answers and one call's more.
type answers struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

type answersKey struct{}

func withAnswers(ctx context.Context, limit int64) context.Context {
	return context.WithValue(ctx, answersKey{}, &answers{limit: limit})
}

func answersOf(ctx context.Context) *answers {
	a, _ := ctx.Value(answersKey{}).(*answers)
	return a
}

// run runs call unless the request's answers are spent, and counts what it
// answered.
func (a *answers) run(cc callContext, call func() *mcp.CallToolResult) *mcp.CallToolResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used >= a.limit {
		cc.answerLimit = a.limit
		return failure(cc, tooLarge(fmt.Sprintf("this request's earlier calls answered %d bytes, the most one request answers; this call did not run", a.used)))
	}
	res := call()
	var n counter
	_ = json.NewEncoder(&n).Encode(res)
	a.used += int64(n)
	return res
}

// counter counts the bytes written to it.
type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}
