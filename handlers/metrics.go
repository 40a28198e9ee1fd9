package handlers

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// metrics are the HTTP request counters served at /metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	links    *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_http_requests_total",
			Help: "HTTP requests answered, by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentfs_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by method and route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"method", "route"}),
	}
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentfs_http_body_bytes_total",
		Help: "Bytes of HTTP bodies, by route and direction: received (request bodies read from clients) or sent (response bodies written to them).",
	}, []string{"route", "direction"})
	m.links = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentfs_link_downloads_total",
		Help: "Share link downloads, by outcome: served, gone (unknown, expired, revoked or deleted), blocked, refused (a bad range), failed.",
	}, []string{"outcome"})
	reg.MustRegister(m.requests, m.duration, m.bytes, m.links)
	return m
}

// linkDownload counts one share link download by how it ended: served
// (also 304), gone, blocked, refused (a problem of the request, such as an
// unsatisfiable range) or failed (storage, or a stream cut short).
func (m *metrics) linkDownload(err error) {
	outcome := "served"
	var p *problem.Problem
	switch {
	case errors.Is(err, agentfs.ErrLinkGone):
		outcome = "gone"
	case errors.Is(err, agentfs.ErrBlocked):
		outcome = "blocked"
	case errors.As(err, &p) && p.Status < 500:
		outcome = "refused"
	case err != nil:
		outcome = "failed"
	}
	m.links.WithLabelValues(outcome).Inc()
}

// observe counts one request and the bytes of its bodies. Every label value
// comes from a closed set, so no caller can grow the series without bound:
// a method outside the standard ones is "other", a path no route matched is
// "unmatched", and a status is an HTTP status code (100-599).
func (m *metrics) observe(method, route string, status int, d time.Duration, received, sent int64) {
	if !knownMethods[method] {
		method = "other"
	}
	if status < 100 || status > 599 {
		status = 0
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
	if received > 0 {
		m.bytes.WithLabelValues(route, "received").Add(float64(received))
	}
	if sent > 0 {
		m.bytes.WithLabelValues(route, "sent").Add(float64(sent))
	}
}

// countedBody counts the bytes a request's handlers read of its body.
type countedBody struct {
	rc io.ReadCloser
	n  atomic.Int64 // read by the S3 transport's own goroutine too
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *countedBody) Close() error { return b.rc.Close() }

var knownMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
	"CONNECT": true, "TRACE": true,
}

func (a *API) serveMetrics() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(a.deps.Registry, promhttp.HandlerOpts{}))
}

// traceRequests makes a server span of every request but the probes and
// scrapes (/healthz, /readyz, /metrics), which would bury the requests
// that matter. It runs outside observe, which answers errors itself, so
// the span sees the status the client got.
func traceRequests(tp trace.TracerProvider) echo.MiddlewareFunc {
	return otelecho.Middleware("agentfs",
		otelecho.WithTracerProvider(tp),
		otelecho.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		otelecho.WithSkipper(func(c echo.Context) bool {
			switch c.Path() {
			case "/healthz", "/readyz", "/metrics":
				return true
			}
			return false
		}))
}
