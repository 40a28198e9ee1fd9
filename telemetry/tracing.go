package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/exaring/otelpgx"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfs/agentfs/storage"
)

// Tracing exports OpenTelemetry traces over OTLP/HTTP: a server span for
// each API request (package handlers) with a child span for each Postgres
// call and S3 request it makes. Work outside a request (the sweeper, the
// batch runner, lease renewals, readiness checks) makes no spans. No
// exported span carries a share link's secret (redact.go).
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// TracingEnabled reports whether getenv asks for traces: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// turns them off.
func TracingEnabled(getenv func(string) string) bool {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false
	}
	return !strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") &&
		!strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none")
}

// StartTracing starts exporting traces when TracingEnabled(getenv), and
// returns nil otherwise: then nothing is traced and no OpenTelemetry code
// runs on any request. The endpoint comes from getenv; the exporter takes
// the other standard OTEL_EXPORTER_OTLP_* variables (headers, timeout,
// compression, TLS) and the SDK its OTEL_BSP_* and OTEL_TRACES_SAMPLER*
// ones from the process environment;
// the service is named "agentfs" unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES says otherwise. Only OTLP over HTTP (protobuf)
// is spoken.
func StartTracing(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	if !TracingEnabled(getenv) {
		return nil, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s: AgentFS exports traces over http/protobuf only", name, p)
		}
	}
	endpoint, err := tracesEndpoint(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("traces: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentfs"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("traces: resource: %w", err)
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(redactSecrets(exp)), sdktrace.WithResource(res))}, nil
}

// tracesEndpoint is the URL spans are posted to, as the OTLP exporter
// specification says: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended.
func tracesEndpoint(getenv func(string) string) (string, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if raw == "" {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q: want an http:// or https:// URL, e.g. http://127.0.0.1:4318", name, raw)
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// Provider is the tracer provider the API's requests start their spans
// with; nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Instrument makes cfg's storage trace each Postgres call (otelpgx) and S3
// request (otelhttp, named "s3 " and the operation) made within a traced
// request. It does nothing when tracing is off.
func (t *Tracing) Instrument(cfg *storage.Config) {
	if t == nil {
		return
	}
	cfg.Tracers = append(cfg.Tracers, otelpgx.NewTracer(otelpgx.WithTracerProvider(t.provider)))
	wrap := cfg.S3Transport
	bucket := cfg.S3Bucket
	cfg.S3Transport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return otelhttp.NewTransport(rt,
			otelhttp.WithTracerProvider(t.provider),
			// Nothing is injected into S3's requests: S3 takes no part in
			// the trace, and its requests are signed.
			otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
			otelhttp.WithFilter(func(r *http.Request) bool {
				return trace.SpanContextFromContext(r.Context()).IsValid()
			}),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
				return "s3 " + s3Operation(r, bucket)
			}))
	}
}

// Shutdown sends the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
