// Package splice reads a ranged object from S3 over a connection of its
// own, so the bytes can go from the S3 socket to the client's socket
// inside the kernel (splice) instead of being copied through the process
// twice. On the two cores a relay shares with its client and S3, those
// copies are most of the cost of a download.
//
// It takes a presigned plain-HTTP URL and speaks just enough HTTP/1.1 to
// send one GET and read the head of its answer; anything but the expected
// 206 is ErrNotPossible, and the caller reads through its ordinary S3
// client instead (smaller reads, TLS to S3 and proxied S3 always do).
package splice

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs"
)

// MinLength is the smallest read worth a connection of its own.
const MinLength = 4 << 20

// spliceChunk is how much one splice call may move; the idle bound is set
// again before each, so a stalled S3 is noticed within Relay.Idle of its
// last chunk.
const spliceChunk = 4 << 20

// spliceLowWater is how many bytes the S3 socket holds before the relay is
// woken to move them (SO_RCVLOWAT). Woken for every few dozen KiB, as it
// is by default, the relay made a splice call and a context switch for
// each: about 12,000 a GiB, the larger part of its cost besides the
// kernel's own TCP work. It matches the most one splice call moves (Go's
// 1 MiB pipe).
const spliceLowWater = 1 << 20

// ErrNotPossible says a read cannot go over a connection of its own; the
// caller reads through its ordinary client.
var ErrNotPossible = errors.New("direct read not possible")

// Relay opens ranged reads over connections of their own, and counts the
// chunks that were slow. It is safe for concurrent use.
type Relay struct {
	// Idle bounds how long S3 may send nothing: to answer, or in the
	// middle of a body. Past it a read fails as agentfs.ErrUnavailable.
	Idle time.Duration
	slow atomic.Int64
}

// SlowChunks is how many times a chunk relayed socket to socket took
// longer than Idle yet moved bytes: a client slower than that, or a relay
// that waited for bytes S3 had already sent.
func (r *Relay) SlowChunks() int64 { return r.slow.Load() }

// Open sends a ranged GET of the presigned URL get on a new connection and
// returns the body, positioned at its first byte. Any answer but the
// expected 206 is ErrNotPossible: the ordinary client asks again and
// reports the error in its own terms.
func (r *Relay) Open(ctx context.Context, get *url.URL, offset, length int64) (*Body, error) {
	if get.Scheme != "http" || length < MinLength {
		return nil, ErrNotPossible
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, get.String(), nil)
	if err != nil {
		return nil, ErrNotPossible
	}
	if proxy, err := http.ProxyFromEnvironment(req); err != nil || proxy != nil {
		return nil, ErrNotPossible
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-"+strconv.FormatInt(offset+length-1, 10))
	req.Close = true
	// A failed dial falls back too: the ordinary client retries it and
	// reports the outage in its own terms.
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", dialAddr(get))
	if err != nil {
		return nil, ErrNotPossible
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		conn.Close()
		return nil, ErrNotPossible
	}
	b := &Body{ctx: ctx, conn: tcp, left: length, limit: r.Idle, slow: &r.slow}
	b.stopWatch = context.AfterFunc(ctx, func() { tcp.Close() }) // the client left
	if err := b.start(req); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// dialAddr is the host:port of a plain-HTTP URL; presigned URLs leave out
// the default port 80.
func dialAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Body is a ranged object's body read straight off its own connection.
// Its WriteTo moves the bytes socket to socket when the writer can read
// from a socket itself.
type Body struct {
	ctx       context.Context // the read's: when it ends, conn is closed
	conn      *net.TCPConn
	head      []byte // body bytes that arrived with the headers
	left      int64  // body bytes still on conn
	limit     time.Duration
	mark      int // the socket's low-water mark (0: never set, the default)
	slow      *atomic.Int64
	stopWatch func() bool
}

// start sends req and reads the head of the answer, bounded by b.limit.
func (b *Body) start(req *http.Request) error {
	if err := b.conn.SetDeadline(time.Now().Add(b.limit)); err != nil {
		return ErrNotPossible
	}
	if err := req.Write(b.conn); err != nil {
		return outage(fmt.Errorf("open blob: %w", err))
	}
	br := bufio.NewReaderSize(b.conn, 64<<10)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return outage(fmt.Errorf("open blob: %w", err))
	}
	if res.StatusCode != http.StatusPartialContent || res.ContentLength != b.left || len(res.TransferEncoding) > 0 {
		return ErrNotPossible
	}
	head, _ := br.Peek(br.Buffered())
	if int64(len(head)) > b.left {
		return ErrNotPossible
	}
	b.head = head
	b.left -= int64(len(head))
	return b.conn.SetDeadline(time.Time{})
}

// Read reads the body, waiting at most b.limit for S3 to send a byte.
func (b *Body) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	if err := b.conn.SetReadDeadline(time.Now().Add(b.limit)); err != nil {
		return 0, b.fail(err)
	}
	n, err := b.conn.Read(p)
	b.left -= int64(n)
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

// WriteTo sends the rest of the body to w. When w can read from a socket
// itself (an HTTP server's response writer on a TCP connection can), the
// bytes move socket to socket in the kernel.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if len(b.head) > 0 {
		n, err := w.Write(b.head)
		total += int64(n)
		b.head = b.head[n:]
		if err != nil {
			return total, err
		}
	}
	rf, ok := w.(io.ReaderFrom)
	if !ok {
		n, err := io.Copy(struct{ io.Writer }{w}, struct{ io.Reader }{b})
		return total + n, err
	}
	for b.left > 0 {
		if err := b.conn.SetReadDeadline(time.Now().Add(b.limit)); err != nil {
			return total, b.fail(err)
		}
		b.wakeAfter()
		n, err := rf.ReadFrom(&io.LimitedReader{R: b.conn, N: min(b.left, spliceChunk)})
		total += n
		b.left -= n
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && n > 0:
			// The time went to a slow client, not to S3: a chunk that moved
			// bytes is progress, and the bound starts again. (A deadline
			// the writer puts on its own side must fail with another
			// error: bytes taken from S3 and not yet written are lost
			// with it.)
			b.slow.Add(1)
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !connFailed(b.conn):
			// A splice fails on either socket; the S3 one is fine, so the
			// client's failed (it went away, or stalled): its error, as a
			// writer's error is, not an outage.
			return total, err
		case err != nil:
			return total, b.fail(err)
		case n == 0:
			return total, b.fail(io.ErrUnexpectedEOF)
		}
	}
	return total, nil
}

// wakeAfter sets the low-water mark of the S3 socket for the next chunk:
// spliceLowWater while at least that much of the body will still arrive
// after the chunk, so a wait inside the chunk always ends with the mark
// reached; the default (a byte) for the tail, so the last bytes never wait
// for a mark they cannot reach. Failing to set it costs only speed.
func (b *Body) wakeAfter() {
	mark := 1
	if b.left >= spliceChunk+spliceLowWater {
		mark = spliceLowWater
	}
	if mark != b.mark {
		setLowWater(b.conn, mark)
		b.mark = mark
	}
}

// fail names what went wrong on the S3 connection: S3 stalling, closing
// early or failing is an outage, unless the read's context ended, which
// closed the connection (the client left).
func (b *Body) fail(err error) error {
	switch {
	case b.ctx.Err() != nil:
		return fmt.Errorf("reading a blob: %w (%v)", context.Cause(b.ctx), err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: S3 sent nothing for %s in the middle of a blob", agentfs.ErrUnavailable, b.limit)
	case err == io.EOF && b.left > 0:
		err = io.ErrUnexpectedEOF
	}
	if err = outage(err); !errors.Is(err, agentfs.ErrUnavailable) {
		err = fmt.Errorf("%w: reading a blob: %w", agentfs.ErrUnavailable, err)
	}
	return err
}

// Close ends the read and its connection.
func (b *Body) Close() error {
	b.stopWatch()
	return b.conn.Close()
}

// outage marks a failure of the connection to S3 as agentfs.ErrUnavailable,
// as the store's translation of its S3 client's errors does: a network
// error or a body cut short.
func outage(err error) error {
	var (
		netErr net.Error
		urlErr *url.Error
	)
	if errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", agentfs.ErrUnavailable, err)
	}
	return err
}
