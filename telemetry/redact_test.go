package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestExportedSpansCarryNoShareSecret: a span that names a share link's
// secret anywhere (its name, a string or string-list attribute, an event,
// a link to another span, its status, an error it recorded) reaches the
// exporter with the secret redacted, and with everything else as it was.
func TestExportedSpansCarryNoShareSecret(t *testing.T) {
	t.Parallel()
	const secret = "d6jYa2fLEDMTyMDJS3uJ5x-ireA2FXTuVN59mU8Agc4"
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(redactSecrets(mem)))
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	_, span := tp.Tracer("test").Start(context.Background(), "GET /s/"+secret,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: other, Attributes: []attribute.KeyValue{attribute.String("from", "/s/"+secret)}}),
		trace.WithAttributes(
			attribute.String("http.target", "/s/"+secret),
			attribute.String("url.full", "http://agentfs.example/s/"+secret+"?x=1"),
			attribute.StringSlice("paths", []string{"/s/" + secret, "/v1/files"}),
			attribute.String("http.route", "/s/:secret"),
			attribute.Int("http.status_code", 404)))
	span.AddEvent("served /s/"+secret, trace.WithAttributes(attribute.String("path", "/s/"+secret)))
	span.RecordError(fmt.Errorf("serve /s/%s: %w", secret, errors.New("cut")))
	span.SetStatus(codes.Error, "GET /s/"+secret+" failed")
	span.End() // a syncer exports it now
	spans := mem.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported", len(spans))
	}
	got := spans[0]
	if dump := fmt.Sprintf("%+v", got); strings.Contains(dump, secret) {
		t.Fatalf("an exported span carries the secret: %s", dump)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range got.Attributes {
		attrs[kv.Key] = kv.Value
	}
	if got.Name != "GET /s/{secret}" || attrs["http.target"].AsString() != "/s/{secret}" ||
		attrs["url.full"].AsString() != "http://agentfs.example/s/{secret}?x=1" ||
		attrs["http.route"].AsString() != "/s/:secret" || attrs["http.status_code"].AsInt64() != 404 ||
		strings.Join(attrs["paths"].AsStringSlice(), ",") != "/s/{secret},/v1/files" {
		t.Fatalf("exported span %q: %v", got.Name, got.Attributes)
	}
	if len(got.Events) != 2 || got.Events[0].Name != "served /s/{secret}" || got.Status.Description != "GET /s/{secret} failed" ||
		len(got.Links) != 1 || got.Links[0].SpanContext.SpanID() != other.SpanID() || got.SpanKind != trace.SpanKindServer {
		t.Fatalf("exported span: %+v", got)
	}
}
