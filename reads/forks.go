package reads

import (
	"context"

	"github.com/agentfs/agentfs"
)

// ForkStore is what the gate reads of forks (DESIGN §19).
type ForkStore interface {
	Fork(ctx context.Context, subject, id string) (*agentfs.Fork, error)
	ListForks(ctx context.Context, subject string, filter agentfs.ForkFilter) ([]*agentfs.Fork, error)
}

// Fork is one of the caller's forks; one whose prefixes are not both in
// the caller's reach is agentfs.ErrNotFound.
func (g *Gate) Fork(ctx context.Context, who agentfs.Caller, id string) (*agentfs.Fork, error) {
	return gated(ctx, who, agentfs.OpGetFork, g.store.Fork, id)
}

// ListForks is one page of the caller's forks, newest first: those whose
// prefixes both lie in the caller's reach.
func (g *Gate) ListForks(ctx context.Context, who agentfs.Caller, filter agentfs.ForkFilter) ([]*agentfs.Fork, error) {
	return gated(ctx, who, agentfs.OpListForks, g.store.ListForks, filter)
}
