package storage

// This file holds the bounds on how long AgentFS waits for its dependencies:
// every Postgres statement and connection acquisition (statementBound, within
// Config.DBTimeout) and every write of a body to S3 (writeBoundConn, within
// Config.S3Timeout). Reads of blobs are bounded in blobs.go (blobReader).

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementBound gives every statement, batch and COPY sent through the
// pool, and every wait for a pooled connection, a deadline, so a Postgres
// that stops answering (or a network that holds its bytes) turns into an
// error, and so a 503, within DBTimeout instead of a request that hangs. It is a pgx tracer because pgx runs each statement
// under the context its tracer returns: that is the one place that sees
// every statement, ours and River's alike.
//
// When the deadline passes, pgx closes the connection; the pool dials a new
// one for the next statement.
type statementBound struct{ limit time.Duration }

type (
	boundCancelKey struct{}
	unboundedKey   struct{}
)

// unbounded marks ctx so its statements wait as long as ctx allows:
// migrations, which may build indexes and wait for another instance's lock.
func unbounded(ctx context.Context) context.Context {
	return context.WithValue(ctx, unboundedKey{}, true)
}

func (b statementBound) start(ctx context.Context) context.Context {
	if ctx.Value(unboundedKey{}) != nil {
		return ctx
	}
	ctx, cancel := context.WithTimeout(ctx, b.limit)
	return context.WithValue(ctx, boundCancelKey{}, cancel)
}

func (statementBound) end(ctx context.Context) {
	if cancel, ok := ctx.Value(boundCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

func (b statementBound) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return b.start(ctx)
}

func (b statementBound) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	b.end(ctx)
}

// TraceAcquireStart bounds taking a connection from the pool: the pool
// pings connections that sat idle, and dials new ones, before any statement.
func (b statementBound) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return b.start(ctx)
}

func (b statementBound) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	b.end(ctx)
}

func (b statementBound) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return b.start(ctx)
}

func (statementBound) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (b statementBound) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	b.end(ctx)
}

func (b statementBound) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return b.start(ctx)
}

func (b statementBound) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	b.end(ctx)
}

// writeBoundConn bounds each write on an S3 connection, so an S3 server that
// stops taking the bytes of a body becomes an error after limit rather than
// an upload that hangs. Reads are not bounded here: the transport reads an
// idle connection all the time, and a response may rightly take as long as
// the request body takes to send. Response headers are bounded by the
// transport's ResponseHeaderTimeout, and response bodies by blobReader.
type writeBoundConn struct {
	net.Conn
	limit time.Duration
}

// copyBuffers hold the bytes of bodies on their way to S3.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// ReadFrom sends r in large writes. Without it the transport copies a
// request body through its 4 KiB write buffer: a read of the client's body
// and a write to S3 for every 4 KiB.
func (c writeBoundConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c}, r, *buf)
}

func (c writeBoundConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.limit)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
