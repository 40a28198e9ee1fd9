package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
)

// errClientStalled is the error of a write the client took nothing of for
// the idle limit. It wraps nothing on purpose: a timeout the store sees
// from a splice is its own S3 read's (storage/splice), and this one must not
// look like it.
var errClientStalled = errors.New("the client took nothing for the write idle limit")

// clientWriter writes a response body to the client with each write (and
// each chunk spliced to it) bounded by the write idle limit, so a client
// that stops reading fails the download (and the download closes its S3
// body) instead of holding both connections forever. It remembers whether
// a write to the client failed, to tell a client that went away from
// storage that failed. done clears the bound, for the next request on the
// connection.
type clientWriter struct {
	res      *echo.Response
	ctl      *http.ResponseController
	idle     time.Duration // 0: no bound
	deadline time.Time
	failed   bool // a write to the client (or a splice to it) returned an error
}

func newClientWriter(res *echo.Response, idle time.Duration) *clientWriter {
	return &clientWriter{res: res, ctl: http.NewResponseController(res.Writer), idle: idle}
}

func (w *clientWriter) arm() {
	if w.idle > 0 {
		w.deadline = time.Now().Add(w.idle)
		_ = w.ctl.SetWriteDeadline(w.deadline)
	}
}

// Write writes p through the Echo response (which counts it).
func (w *clientWriter) Write(p []byte) (int, error) {
	w.arm()
	n, err := w.res.Write(p)
	return n, w.check(err)
}

// check names a write's error: past the deadline it is the client
// stalling.
func (w *clientWriter) check(err error) error {
	if err == nil {
		return nil
	}
	w.failed = true
	if w.idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(w.deadline) {
		return fmt.Errorf("%w (%v)", errClientStalled, err)
	}
	return err
}

func (w *clientWriter) done() {
	if w.idle > 0 {
		_ = w.ctl.SetWriteDeadline(time.Time{})
	}
}

// target is what a blob that writes itself out (storage's direct read)
// is given: the writer with ReadFrom, when the server's response writer
// can read from a socket itself (splice), so the bytes still move socket
// to socket, each chunk under the bound; else the writer alone.
func (w *clientWriter) target() io.Writer {
	if rf, ok := w.res.Writer.(io.ReaderFrom); ok {
		return splicingWriter{w, rf}
	}
	return w
}

// splicingWriter is a clientWriter that hands each ReadFrom to the
// server's response writer, counting what it moved in the Echo response's
// size (which counts only the writes that pass through it).
type splicingWriter struct {
	*clientWriter
	rf io.ReaderFrom
}

func (w splicingWriter) ReadFrom(r io.Reader) (int64, error) {
	w.arm()
	n, err := w.rf.ReadFrom(r)
	w.res.Size += n
	return n, w.check(err)
}

// clientGone reports whether a body that failed after its status was sent
// failed on the client's side (it went away, reset the connection, or
// stalled past the idle limit) rather than on storage's: storage's
// failures come back as agentfs.ErrUnavailable, also from a splice, where
// the store tells its S3 side's failures from the client's.
func (w *clientWriter) clientGone(ctx context.Context, err error) bool {
	return ctx.Err() != nil || w.failed && !errors.Is(err, agentfs.ErrUnavailable)
}

// cutResponse is the error of a response cut short after its status and
// some of its body were sent: observe logs and counts it (as a client gone,
// 499, or with the status sent) and then aborts the connection, so the
// client sees a short body, never a silently truncated one.
type cutResponse struct {
	err        error
	clientGone bool
}

func (e *cutResponse) Error() string { return "response cut short: " + e.err.Error() }
func (e *cutResponse) Unwrap() error { return e.err }
