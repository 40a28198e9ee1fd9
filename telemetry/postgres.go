package telemetry

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// pgTimer is a pgx tracer that times every call of the pool by operation:
// a statement by its kind, a batch, a COPY, a new connection, a wait for a
// pooled connection. storage composes it after its statement bound.
type pgTimer struct{ h *prometheus.HistogramVec }

type pgStartKey struct{}

// pgStart is what a call's start leaves in its context for its end.
type pgStart struct {
	at        time.Time
	operation string
}

func (pgTimer) start(ctx context.Context, operation string) context.Context {
	return context.WithValue(ctx, pgStartKey{}, pgStart{at: time.Now(), operation: operation})
}

func (t pgTimer) end(ctx context.Context) {
	if s, ok := ctx.Value(pgStartKey{}).(pgStart); ok {
		t.h.WithLabelValues(s.operation).Observe(time.Since(s.at).Seconds())
	}
}

func (t pgTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.start(ctx, statementKind(data.SQL))
}

func (t pgTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) { t.end(ctx) }

func (t pgTimer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return t.start(ctx, "batch")
}

func (pgTimer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t pgTimer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) { t.end(ctx) }

func (t pgTimer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return t.start(ctx, "copy_from")
}

func (t pgTimer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	t.end(ctx)
}

func (t pgTimer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return t.start(ctx, "connect")
}

func (t pgTimer) TraceConnectEnd(ctx context.Context, _ pgx.TraceConnectEndData) { t.end(ctx) }

func (t pgTimer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return t.start(ctx, "acquire")
}

func (t pgTimer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	t.end(ctx)
}

// statementKinds are the statement kinds with a label of their own; any
// other statement is "other".
var statementKinds = map[string]string{
	"select": "select", "insert": "insert", "update": "update", "delete": "delete", "with": "with",
	"begin": "begin", "commit": "commit", "rollback": "rollback",
}

// statementKind is the kind of a SQL statement: its first keyword, lower
// case, after blanks, parentheses and comments, when it is one of
// statementKinds, else "other". The SQL text itself is never a label.
func statementKind(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n(")
		var ok bool
		switch {
		case strings.HasPrefix(sql, "--"):
			_, sql, ok = strings.Cut(sql, "\n")
		case strings.HasPrefix(sql, "/*"):
			_, sql, ok = strings.Cut(sql[2:], "*/")
		default:
			end := strings.IndexFunc(sql, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
			if end < 0 {
				end = len(sql)
			}
			if end > len("rollback") { // longer than every kind
				return "other"
			}
			if kind, known := statementKinds[strings.ToLower(sql[:end])]; known {
				return kind
			}
			return "other"
		}
		if !ok {
			return "other" // a comment that never ends
		}
	}
}
