package admission

import (
	"bytes"
	"context"
	"io"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// A grant's max_bytes is spent by the bytes a write reads: a put's body,
// a batch put item's content, an upload's part. The bytes are reserved in
// Postgres (storage.ReserveGrantBytes: the token's budget and each
// ancestor's, under row locks) before they are read, as the byte quota
// reserves them, so concurrent writes on any instance cannot spend more
// than the budget between them. A write that fails gives its bytes back.

// metered is an effect whose bytes a token's budget pays for: its body
// and declared length (-1: unknown), and readThrough, which makes it read
// the body through the budget instead.
type metered interface {
	meteredBody() (body io.Reader, size int64)
	readThrough(r io.Reader)
}

// budgetStep is how much of a budget a body of unknown length reserves at
// a time, ahead of the bytes it reads.
const budgetStep = 1 << 20

// budget reads a write's body against its token's max_bytes.
type budget struct {
	ctx      context.Context
	store    *storage.Store
	tokenID  string
	rd       io.Reader
	declared bool
	reserved int64
	n        int64
}

// meter puts w's body, when its effect has one and its token a budget,
// behind a budget: a declared length is reserved whole now (or the write
// is refused, nothing read), anything else as it streams.
func (c *Core) meter(ctx context.Context, w *write) error {
	m, ok := w.e.(metered)
	if !ok || w.who.Grant.MaxBytes <= 0 || w.who.TokenID == "" {
		return nil
	}
	body, size := m.meteredBody()
	if body == nil {
		return nil
	}
	b := &budget{ctx: context.WithoutCancel(ctx), store: c.store, tokenID: w.who.TokenID, rd: body}
	if size >= 0 {
		if err := b.reserve(size, false); err != nil {
			return err
		}
		b.declared = true
	}
	m.readThrough(b)
	w.budget = b
	return nil
}

// reserve reserves want more bytes (with partial, what is left of them).
func (b *budget) reserve(want int64, partial bool) error {
	got, limit, spent, err := b.store.ReserveGrantBytes(b.ctx, b.tokenID, want, partial)
	if err != nil {
		return err
	}
	b.reserved += got
	if got == 0 && want > 0 {
		return &agentfs.GrantSpentError{MaxBytes: limit, Spent: spent}
	}
	return nil
}

// Read reads bytes already reserved, reserving the next step first when a
// body of unknown length needs it.
func (b *budget) Read(p []byte) (int, error) {
	if b.declared {
		n, err := b.rd.Read(p)
		b.n += int64(n)
		return n, err
	}
	if b.n == b.reserved {
		// Is there more? Only then may the budget refuse.
		var one [1]byte
		n, err := io.ReadFull(b.rd, one[:])
		if n == 0 {
			return 0, err
		}
		if err := b.reserve(budgetStep, true); err != nil {
			return 0, err
		}
		b.rd = io.MultiReader(bytes.NewReader([]byte{one[0]}), b.rd)
	}
	p = p[:min(int64(len(p)), b.reserved-b.n)]
	n, err := b.rd.Read(p)
	b.n += int64(n)
	return n, err
}

// settle keeps what a write that stored its bytes read and gives the rest
// back (all of it when the write failed).
func (b *budget) settle(kept bool) {
	release := b.reserved
	if kept {
		release -= b.n
	}
	_ = b.store.ReleaseGrantBytes(b.ctx, b.tokenID, release)
}
