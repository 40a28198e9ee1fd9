package admission

import (
	"context"
	"errors"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// RunItem applies one pending item of a batch, as a worker that holds the
// batch would: PrepareItem and CommitItems of that item alone. An item no
// longer pending is not an error.
func (c *Core) RunItem(ctx context.Context, b *agentfs.Batch, it agentfs.BatchItem) error {
	p, err := c.PrepareItem(ctx, b, it, ItemHint{})
	if p != nil {
		err = c.CommitItems(ctx, []*PreparedItem{p})[0]
	}
	if errors.Is(err, storage.ErrItemDone) {
		return nil
	}
	return err
}

// Waiting is how many puts wait for their lane's commit (gather.go).
func (c *Core) Waiting() int {
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	n := 0
	for _, l := range c.lanes.byKey {
		n += len(l.waiting)
	}
	return n
}
