package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/storage"
)

func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestTracingOffWithoutAnEndpoint: with no OTLP endpoint (or with the SDK
// or the traces exporter turned off) StartTracing starts nothing, and a nil
// Tracing changes nothing in the storage or the API.
func TestTracingOffWithoutAnEndpoint(t *testing.T) {
	for name, getenv := range map[string]func(string) string{
		"NoEndpoint":       env(),
		"SDKDisabled":      env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "true"),
		"ExporterNone":     env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"),
		"OtherSignalsOnly": env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:4318/v1/metrics"),
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := StartTracing(context.Background(), getenv, "v0")
			if err != nil || tr != nil {
				t.Fatalf("StartTracing: %v, %v; want nothing started", tr, err)
			}
			var cfg storage.Config
			tr.Instrument(&cfg)
			if cfg.Tracers != nil || cfg.S3Transport != nil || tr.Provider() != nil || tr.Shutdown(context.Background()) != nil {
				t.Fatalf("a Tracing that is off changed something: %+v, provider %v", cfg, tr.Provider())
			}
		})
	}
}

// TestTracingSpeaksHTTPOnly refuses an OTLP protocol it does not speak,
// rather than sending protobuf over HTTP to a gRPC port.
func TestTracingSpeaksHTTPOnly(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		_, err := StartTracing(context.Background(),
			env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", name, "grpc"), "v0")
		if err == nil || !strings.Contains(err.Error(), "http/protobuf") {
			t.Fatalf("%s=grpc: %v, want a clear refusal", name, err)
		}
	}
	tr, err := StartTracing(context.Background(),
		env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"), "v0")
	if err != nil || tr == nil || tr.Provider() == nil {
		t.Fatalf("http/protobuf with a traces endpoint: %v, %v", tr, err)
	}
	var cfg storage.Config
	tr.Instrument(&cfg)
	if len(cfg.Tracers) != 1 || cfg.S3Transport == nil {
		t.Fatalf("tracing on: %d Postgres tracers, S3 transport %v", len(cfg.Tracers), cfg.S3Transport != nil)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTracesEndpoint(t *testing.T) {
	for _, tc := range []struct {
		getenv func(string) string
		want   string // "" for an error
	}{
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces"},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"), "http://collector:4318/v1/traces"},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example/base"), "https://otel.example/base/v1/traces"},
		{env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/custom"), "http://127.0.0.1:4318/custom"},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/t"), "http://b:2/t"},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"), ""},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://127.0.0.1:4317"), ""},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"), ""},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1"), ""},
	} {
		got, err := tracesEndpoint(tc.getenv)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP")):
			t.Errorf("want a clear error, got %q, %v", got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("got %q, %v; want %q", got, err, tc.want)
		}
	}
	if _, err := StartTracing(context.Background(), env("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost"), "v0"); err == nil {
		t.Fatal("StartTracing took an endpoint that is no URL")
	}
}

// FuzzTracesEndpoint holds that no endpoint a person may write crashes the
// start, and that what it accepts is an http(s) URL.
func FuzzTracesEndpoint(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:4318", "https://x/y/", "localhost:4318", "http://[::1]:4318", "%zz"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, tracesOnly bool) {
		name := "OTEL_EXPORTER_OTLP_ENDPOINT"
		if tracesOnly {
			name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		}
		got, err := tracesEndpoint(env(name, raw))
		if err == nil && !strings.HasPrefix(got, "http://") && !strings.HasPrefix(got, "https://") {
			t.Fatalf("%s=%q accepted as %q", name, raw, got)
		}
	})
}
