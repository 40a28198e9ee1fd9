package batch

import (
	"context"
	"errors"
)

// RunUnlocked runs the batch's pending items as a worker runs them over its
// slices, to the end, but without the batch's lock: tests run two at once
// to show that the items' own checks keep each item to one effect.
func (r *Runner) RunUnlocked(ctx context.Context, id string) error {
	for {
		b, err := r.store.StartBatch(ctx, id)
		if err != nil || b.Terminal() {
			return err
		}
		switch err := r.runItems(ctx, b); {
		case errors.Is(err, errSliceOver), errors.Is(err, errNotPending):
		case err != nil:
			return err
		default:
			return r.store.FinishBatch(ctx, id)
		}
	}
}
