package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// receivedSpan is a span as an OTLP receiver got it, with where it came
// from.
type receivedSpan struct {
	*tracepb.Span
	scope   string
	service string
}

// otlpReceiver accepts what an OTLP/HTTP trace exporter posts to
// /v1/traces (protobuf) and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	bad   []string // requests it could not read
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, "gzip: "+err.Error())
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, "read: "+err.Error())
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.fail(w, "decode: "+err.Error())
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		service := stringAttr(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{Span: s, scope: ss.GetScope().GetName(), service: service})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) fail(w http.ResponseWriter, why string) {
	r.mu.Lock()
	r.bad = append(r.bad, why)
	r.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

func (r *otlpReceiver) snapshot() ([]receivedSpan, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...), append([]string(nil), r.bad...)
}

func stringAttr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// descendants are the spans of root's trace below it.
func descendants(spans []receivedSpan, root receivedSpan) []receivedSpan {
	below := map[string]bool{hex.EncodeToString(root.GetSpanId()): true}
	var out []receivedSpan
	for grew := true; grew; {
		grew = false
		for _, s := range spans {
			id := hex.EncodeToString(s.GetSpanId())
			if below[id] || !bytes.Equal(s.GetTraceId(), root.GetTraceId()) || !below[hex.EncodeToString(s.GetParentSpanId())] {
				continue
			}
			below[id], grew = true, true
			out = append(out, s)
		}
	}
	return out
}

// serveTraced starts the real binary exporting its traces to an in-process
// OTLP receiver within 50 ms (rather than 5 s), with extra environment, and
// returns the receiver, the process and a client of a token for subject.
func serveTraced(t *testing.T, subject string, extra ...string) (*otlpReceiver, *process, *apitest.Client) {
	t.Helper()
	rec := &otlpReceiver{}
	collector := httptest.NewServer(rec)
	t.Cleanup(collector.Close)
	bin, cfg := buildBinary(t), storagetest.Config(t)
	p := startServe(t, bin, cfg, append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}, extra...)...)
	p.waitReady(t)
	return rec, p, apitest.NewClient(t, p.url, createToken(t, bin, cfg, "--subject", subject))
}

// TestServeExportsTraces starts `agentfs serve` with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at an in-process OTLP receiver and
// uploads one file: a trace arrives with a server span for POST /v1/files,
// and below it client spans for Postgres and for the S3 put. The readiness
// checks before it made no spans, and serve's /metrics shows the upload.
func TestServeExportsTraces(t *testing.T) {
	t.Parallel()
	rec, p, c := serveTraced(t, "tracer", "OTEL_SERVICE_NAME=agentfs-traced")
	c.Do("POST", "/v1/files?path=traced/hello.txt", "hello, traces", "Content-Type", "text/plain").Expect(t, 201)

	var (
		server        receivedSpan
		below         []receivedSpan
		postgres, put *receivedSpan
	)
	storagetest.Eventually(t, 30*time.Second, "a trace of POST /v1/files with Postgres and S3 spans", func() bool {
		spans, _ := rec.snapshot()
		for _, s := range spans {
			if s.GetName() == "POST /v1/files" && s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
				server = s
			}
		}
		if server.Span == nil {
			return false
		}
		below = descendants(spans, server)
		postgres, put = nil, nil
		for i, s := range below {
			switch {
			case stringAttr(s.GetAttributes(), "db.system.name") == "postgresql" && s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
				postgres = &below[i]
			case s.GetName() == "s3 put" && s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
				put = &below[i]
			}
		}
		return postgres != nil && put != nil
	})
	spans, bad := rec.snapshot()
	if len(bad) > 0 {
		t.Fatalf("the receiver could not read what was exported: %v", bad)
	}
	if server.service != "agentfs-traced" || len(server.GetParentSpanId()) != 0 {
		t.Fatalf("server span of service %q, parent %x: want agentfs-traced, a root", server.service, server.GetParentSpanId())
	}
	if stringAttr(server.GetAttributes(), "http.route") != "/v1/files" {
		t.Fatalf("server span attributes: %v", server.GetAttributes())
	}
	if stringAttr(postgres.GetAttributes(), "db.query.text") == "" || !strings.Contains(postgres.scope, "otelpgx") {
		t.Fatalf("Postgres span %q from %q: %v", postgres.GetName(), postgres.scope, postgres.GetAttributes())
	}
	if !strings.Contains(put.scope, "otelhttp") {
		t.Fatalf("S3 span %q from %q", put.GetName(), put.scope)
	}
	for _, s := range spans {
		if strings.Contains(s.GetName(), "/readyz") || strings.Contains(s.GetName(), "/metrics") {
			t.Fatalf("a probe or scrape was traced: %q", s.GetName())
		}
		if len(s.GetParentSpanId()) == 0 && s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Fatalf("a span outside any request: %q from %q", s.GetName(), s.scope)
		}
	}
	checkServeMetrics(t, p.url)
	p.stop(t)
}

// checkServeMetrics reads serve's /metrics after one upload: the domain
// and dependency series are registered there, not only in the test
// harness.
func checkServeMetrics(t *testing.T, base string) {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`agentfs_idempotency_requests_total{outcome="executed"} 0`, // the upload had no key
		`agentfs_batch_items_total{op="put",outcome="applied"} 0`,
		`agentfs_upload_sessions{status="pending"} 0`,
		`agentfs_batch_queue_jobs{state="available"} 0`,
		`agentfs_state_up 1`,
		`agentfs_sweeper_runs_total{result="ok",task="unreferenced_blobs"} 0`,
		`agentfs_s3_request_duration_seconds_count{operation="put"} 1`,
		`agentfs_s3_body_bytes_total{direction="sent",operation="put"} 13`,
		`agentfs_http_body_bytes_total{direction="received",route="/v1/files"} 13`,
		`agentfs_postgres_call_duration_seconds_count{operation="select"} `,
		`go_goroutines `,
	} {
		if !strings.Contains(string(body), "\n"+want) {
			t.Errorf("serve's /metrics has no line starting %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// TestShareLinkSecretStaysOutOfTelemetry serves share links, in every way a
// request can name one (each method, a bad range, a query, a trailing
// slash, a doubled slash, a wrong method, a revoked link), from `agentfs
// serve` exporting traces to an in-process OTLP receiver and logging at
// debug level. No exported span (its name, attributes, events or status,
// read from the protobuf the receiver got), no log line and no metric
// carries the link's secret.
func TestShareLinkSecretStaysOutOfTelemetry(t *testing.T) {
	t.Parallel()
	rec, p, c := serveTraced(t, "sharer", "AGENTFS_LOG_LEVEL=debug")
	f := c.Do("POST", "/v1/files?path=shared/report.txt", "shared bytes", "Content-Type", "text/plain").Expect(t, 201).File(t)
	var link struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	c.Do("POST", "/v1/files/"+f.ID+"/links", `{}`, "Content-Type", "application/json",
		"Idempotency-Key", "share-1").Expect(t, 201).JSON(t, &link)
	secret := link.URL[strings.LastIndex(link.URL, "/s/")+len("/s/"):]
	if len(secret) < 22 {
		t.Fatalf("link url %q", link.URL)
	}
	requests := []struct {
		method, path string
		header       []string
		status       int
	}{
		{"GET", "/s/" + secret, nil, 200},
		{"HEAD", "/s/" + secret, nil, 200},
		{"GET", "/s/" + secret, []string{"Range", "bytes=100-"}, 416},
		{"GET", "/s/" + secret + "?download=1", nil, 200},
		{"GET", "/s/" + secret + "/", nil, 404},
		{"GET", "//s/" + secret, nil, 404},
		{"GET", "/%73/" + secret, nil, 404},
		{"POST", "/s/" + secret, nil, 405},
	}
	send := func(method, path string, header ...string) int {
		req, err := http.NewRequest(method, p.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if bytes.Contains(body, []byte(secret)) && res.StatusCode >= 400 {
			t.Errorf("%s %s: the problem repeats the secret: %s", method, path, body)
		}
		return res.StatusCode
	}
	for _, r := range requests {
		if got := send(r.method, r.path, r.header...); got != r.status {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, got, r.status)
		}
	}
	c.Do("DELETE", "/v1/links/"+link.ID, nil).Expect(t, 200)
	if got := send("GET", "/s/"+secret); got != 404 {
		t.Fatalf("a revoked link answered %d", got)
	}
	want := len(requests) + 4 // and the upload, the link, the revoke, the revoked link
	storagetest.Eventually(t, 30*time.Second, "a server span of every request", func() bool {
		spans, _ := rec.snapshot()
		n := 0
		for _, s := range spans {
			if s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
				n++
			}
		}
		return n >= want
	})
	spans, bad := rec.snapshot()
	if len(bad) > 0 {
		t.Fatalf("the receiver could not read what was exported: %v", bad)
	}
	routed := 0
	for _, s := range spans {
		raw, err := proto.Marshal(s.Span)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("span %q (%s) carries the secret: %v", s.GetName(), s.scope, s.GetAttributes())
		}
		if stringAttr(s.GetAttributes(), "http.route") == "/s/:secret" {
			routed++
		}
	}
	if routed < 5 {
		t.Errorf("%d spans of the share route, want a span of each request: %d spans in all", routed, len(spans))
	}
	res, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if bytes.Contains(metrics, []byte(secret)) {
		t.Error("/metrics carries the secret")
	}
	p.stop(t)
	logs := p.logs.String()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("a log line carries the secret: %s", line)
		}
	}
	if !strings.Contains(logs, "route=/s/:secret") {
		t.Errorf("the share link requests were not logged, so the check proves little:\n%s", logs)
	}
}
