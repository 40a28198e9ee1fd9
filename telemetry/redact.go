package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentfs/agentfs"
)

// A share link's secret is its whole authority, and a request for one
// names it in its path: the server span of GET /s/{secret} would carry it
// in http.target (and, with newer semantic conventions, url.path or
// url.full), an error recorded on a span could repeat it, and so could any
// instrumentation added later. So every span passes through
// redactSecrets on its way to the exporter, which takes the secret out of
// its name, its attributes, its events, its links and its status
// (agentfs.RedactSharePaths), whatever instrumentation made it.

// redactSecrets wraps the exporter spans are sent to.
func redactSecrets(exp sdktrace.SpanExporter) sdktrace.SpanExporter {
	return redactingExporter{SpanExporter: exp}
}

type redactingExporter struct {
	sdktrace.SpanExporter
}

// ExportSpans exports the spans with every share link secret redacted.
func (e redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = redactSpan(s)
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// redactedSpan is a span as exported: what carries text is redacted, the
// rest is the span's own.
type redactedSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link
	status sdktrace.Status
}

func (s *redactedSpan) Name() string                     { return s.name }
func (s *redactedSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s *redactedSpan) Events() []sdktrace.Event         { return s.events }
func (s *redactedSpan) Links() []sdktrace.Link           { return s.links }
func (s *redactedSpan) Status() sdktrace.Status          { return s.status }

func redactSpan(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	out := &redactedSpan{ReadOnlySpan: s, name: agentfs.RedactSharePaths(s.Name()),
		attrs: redactAttrs(s.Attributes()), status: s.Status()}
	out.status.Description = agentfs.RedactSharePaths(out.status.Description)
	for _, e := range s.Events() {
		e.Name, e.Attributes = agentfs.RedactSharePaths(e.Name), redactAttrs(e.Attributes)
		out.events = append(out.events, e)
	}
	for _, l := range s.Links() {
		l.Attributes = redactAttrs(l.Attributes)
		out.links = append(out.links, l)
	}
	return out
}

// redactAttrs returns attrs with their text redacted (a new slice: the
// span's own is not touched).
func redactAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if len(attrs) == 0 {
		return attrs
	}
	out := make([]attribute.KeyValue, len(attrs))
	for i, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.STRING:
			kv.Value = attribute.StringValue(agentfs.RedactSharePaths(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j := range vs {
				vs[j] = agentfs.RedactSharePaths(vs[j])
			}
			kv.Value = attribute.StringSliceValue(vs)
		}
		out[i] = kv
	}
	return out
}
