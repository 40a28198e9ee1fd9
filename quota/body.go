// Package quota reads a write's bytes against its subject's byte quota:
// the bytes each subject may write per window, kept in Postgres so the
// quota holds across instances. Every door that stores bytes (a REST
// request's body, the content an MCP tool writes) reads them through a
// Body, so only bytes stored are counted, once.
package quota

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/agentfs/agentfs"
)

// Store keeps the bytes each subject may still write per window: bytes
// are reserved atomically before they are accepted, and what a write did
// not use is released.
type Store interface {
	ReserveQuota(ctx context.Context, subject string, start time.Time, want, limit int64, partial bool) (got, used int64, err error)
	ReleaseQuota(ctx context.Context, subject string, start time.Time, n int64) error
}

// Limit is a subject's quota: Bytes per fixed Window (Bytes 0: none).
type Limit struct {
	Bytes  int64
	Window time.Duration
}

// step is how much of the quota a body of unknown length reserves at a
// time, ahead of the bytes it reads.
const step = 1 << 20

// Body is a write's bytes read against its subject's byte quota: it reads
// only bytes reserved beforehand (all of them for a declared length,
// ReserveDeclared; a step at a time otherwise) and fails with an
// *agentfs.QuotaExceededError when a body outgrows what the quota has
// left. Settle keeps what a write stored and gives the rest back.
type Body struct {
	rc      io.ReadCloser
	ctx     context.Context
	store   Store
	subject string
	start   time.Time // of the window the reservation is in
	limit   Limit
	// replay reports whether the write will replay a recorded outcome
	// (asked only when the quota would refuse it).
	replay func() bool

	declared bool  // the whole declared length is reserved
	free     bool  // a replay: read without reserving
	reserved int64 // bytes reserved so far
	n        int64 // bytes read
	cut      bool  // the body outgrew the quota
	err      error // sticky: the read that failed on the quota
}

// NewBody returns rc read against subject's quota l in the window that
// holds now; replay says whether the write is a replay, which writes
// nothing and so is never refused.
func NewBody(ctx context.Context, rc io.ReadCloser, s Store, subject string, l Limit, replay func() bool) *Body {
	return &Body{rc: rc, ctx: ctx, store: s, subject: subject, limit: l, start: time.Now().Truncate(l.Window), replay: replay}
}

// ReserveDeclared reserves a declared length whole before anything is
// read, or refuses the write.
func (b *Body) ReserveDeclared(length int64) error {
	got, used, err := b.store.ReserveQuota(b.ctx, b.subject, b.start, length, b.limit.Bytes, false)
	switch {
	case err != nil:
		return err
	case got > 0:
		b.declared, b.reserved = true, got
		return nil
	case b.replay():
		b.free = true
		return nil
	}
	return b.exceeded(used)
}

func (b *Body) exceeded(used int64) error {
	return &agentfs.QuotaExceededError{Used: used, Limit: b.limit.Bytes, Window: b.limit.Window,
		RetryAfter: time.Until(b.start.Add(b.limit.Window))}
}

// Read reads bytes already reserved, reserving the next step first when a
// body of unknown length needs it.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.declared || b.free { // the declared length bounds the body
		n, err := b.rc.Read(p)
		b.n += int64(n)
		return n, err
	}
	if b.n == b.reserved {
		if err := b.reserveMore(); err != nil {
			b.err = err
			return 0, err
		}
		if b.free {
			return b.Read(p)
		}
	}
	p = p[:min(int64(len(p)), b.reserved-b.n)]
	n, err := b.rc.Read(p)
	b.n += int64(n)
	return n, err
}

// reserveMore reserves the next step of a body of unknown length, or what
// is left of the quota; when nothing is left it fails unless the body has
// ended (or the write replays).
func (b *Body) reserveMore() error {
	got, used, err := b.store.ReserveQuota(b.ctx, b.subject, b.start, step, b.limit.Bytes, true)
	if err != nil {
		return err
	}
	b.reserved += got
	if got > 0 {
		return nil
	}
	var one [1]byte
	n, err := io.ReadFull(b.rc, one[:])
	switch {
	case n == 0:
		return err // the body ended exactly at the quota (io.EOF), or failed
	case b.replay():
		b.free = true
		b.rc = io.NopCloser(io.MultiReader(bytes.NewReader(one[:n]), b.rc))
		return nil
	}
	b.cut = true
	return b.exceeded(used)
}

// Cut reports whether the body outgrew the quota, so the rest of it was
// not read.
func (b *Body) Cut() bool { return b.cut }

// Settle keeps the bytes a write that stored them read and gives back
// every other reserved byte: all of them when the write failed or
// replayed. Its error is the release's, for the log: the write's outcome
// stands.
func (b *Body) Settle(kept bool) error {
	release := b.reserved
	if kept {
		release -= b.n
	}
	return b.store.ReleaseQuota(context.WithoutCancel(b.ctx), b.subject, b.start, release)
}

// Close closes the body read.
func (b *Body) Close() error { return b.rc.Close() }
