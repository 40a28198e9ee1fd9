package batch

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/storage"
)

// How a batch's pending items run: several at once, yet each only after
// every earlier item it may depend on has ended, so a batch ends as if its
// items had run one after another.
//
//   - An item depends on the earlier items that share one of its order keys
//     (orderKeys): the path it writes, the file it names by id and that
//     file's path, the path an undo moves a file back to, its item key. An
//     operation the runner does not know waits for every earlier item, and
//     every later item waits for it.
//   - Items whose earlier items have all ended are prepared at once, up to
//     Config.ItemConcurrency for the whole instance: each claims its key
//     and writes its bytes into a new blob (the S3 PUTs are most of an
//     item's time).
//   - One committer per batch commits what is prepared, many items in one
//     transaction (admission.Core.CommitItems: each item's effect with its
//     status, only while it is pending). An item's dependents start only
//     once it has committed.
//   - Contents are loaded from Postgres a chunk at a time, ahead of need
//     and within a byte budget, not one query per item.
//
// Nothing new starts once the job's slice is nearly over, once an item met
// a failure that may pass on retry (the item stays pending, so its
// dependents must not run), or once an item turned out to be no longer
// pending (the batch was canceled): what is under way ends, and the run
// returns.
const (
	// maxGroup bounds how many items commit in one transaction.
	maxGroup = 32
	// chunkItems and chunkBytes bound one load of contents; loadBudget
	// bounds the bytes loaded and not yet prepared.
	chunkItems = 64
	chunkBytes = 4 << 20
	loadBudget = 16 << 20
)

var (
	// errSliceOver stops a run whose job slice is nearly over; the job is
	// continued at once.
	errSliceOver = errors.New("batch: this slice of the job is over")
	// errNotPending stops a run that found an item no longer pending
	// (the batch was canceled, or another worker ran it); the job is
	// continued at once and sees what is left.
	errNotPending = errors.New("batch: an item is no longer pending")
)

// orderKeys are what an item touches that an earlier item of its batch may
// have changed: the path it writes (put, copy), the file it names by id
// (copy's source, delete, restore, undo) and that file's path as paths
// holds it, the path an undo may move its file back to, and its item key.
// barrier is true for an operation the runner does not know: it is ordered
// after and before everything.
func orderKeys(it agentfs.BatchItem, paths map[string]string) (keys []string, barrier bool) {
	switch it.Op {
	case agentfs.OpPut, agentfs.OpCopy, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpUndo:
	default:
		return nil, true
	}
	add := func(kind, v string) {
		if k := kind + "\x00" + v; v != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	add("key", it.Key)
	add("path", it.Path)
	if it.FileID != "" {
		add("file", it.FileID)
		add("path", paths[it.FileID])
	}
	if it.Undo != nil {
		add("path", it.Undo.Path)
	}
	return keys, false
}

// node is a pending item in the run of its batch.
type node struct {
	it    agentfs.BatchItem
	waits int     // earlier items it depends on that have not ended
	next  []*node // later items that depend on it
	size  int64   // bytes of content it holds while loaded and not prepared
	state nodeState
}

type nodeState int

const (
	unloaded nodeState = iota
	loaded             // content (if any) in memory, waiting for its turn
	preparing
	committing
	ended
)

// event is what a node's goroutines report: its prepare ended with the
// item waiting to commit (prepared), or the item ended (err as
// admission.Core.CommitItems returns it).
type event struct {
	n        *node
	prepared bool
	err      error
}

type queued struct {
	n *node
	p *admission.PreparedItem
}

// scheduler runs one batch's pending items. Its fields belong to the
// goroutine of runItems; the goroutines it starts report through events.
type scheduler struct {
	r       *Runner
	b       *agentfs.Batch
	nodes   []*node // index order
	loadPos int     // nodes before it are loaded (or further along)
	held    int64
	ready   readyHeap
	// preparing counts nodes being prepared, active those started and not
	// ended.
	preparing, active, ended int
	events                   chan event
	commits                  chan queued
	stop                     error // why nothing more starts
}

// runItems applies b's pending items: nil once every one has ended, else
// why the run stopped (errSliceOver, errNotPending, or a failure that may
// pass when the batch is retried).
func (r *Runner) runItems(ctx context.Context, b *agentfs.Batch) error {
	s, err := r.plan(ctx, b)
	if err != nil || len(s.nodes) == 0 {
		return err
	}
	s.events = make(chan event, 2*len(s.nodes))
	s.commits = make(chan queued, r.cfg.ItemConcurrency+maxGroup)
	go s.committer(ctx)
	defer close(s.commits)
	for {
		if s.stop == nil && r.sliceOver(ctx) {
			s.stop = errSliceOver
		}
		if s.stop == nil {
			s.load(ctx)
		}
		if s.stop == nil {
			s.dispatch(ctx)
		}
		if s.active == 0 {
			break
		}
		s.handle(ctx, <-s.events)
	}
	if s.stop == nil && s.ended < len(s.nodes) {
		return fmt.Errorf("batch %s: %d of %d items could not start", b.ID, len(s.nodes)-s.ended, len(s.nodes))
	}
	return s.stop
}

// plan orders b's pending items: each waits for the earlier items it may
// depend on.
func (r *Runner) plan(ctx context.Context, b *agentfs.Batch) (*scheduler, error) {
	var ids []string
	for _, it := range b.Items {
		if it.Status == agentfs.ItemPending && it.FileID != "" {
			ids = append(ids, it.FileID)
		}
	}
	paths, err := r.store.FilePaths(ctx, b.Subject, ids)
	if err != nil {
		return nil, err
	}
	s := &scheduler{r: r, b: b}
	last := map[string]*node{}
	var barrier *node
	var since []*node // nodes planned since the last barrier
	for _, it := range b.Items {
		if it.Status != agentfs.ItemPending {
			continue
		}
		n := &node{it: it}
		after := func(m *node) {
			if m != nil && m != n && (len(m.next) == 0 || m.next[len(m.next)-1] != n) {
				m.next = append(m.next, n)
				n.waits++
			}
		}
		keys, isBarrier := orderKeys(it, paths)
		after(barrier)
		if isBarrier {
			for _, m := range since {
				after(m)
			}
			barrier, since = n, nil
		} else {
			for _, k := range keys {
				after(last[k])
				last[k] = n
			}
			since = append(since, n)
		}
		s.nodes = append(s.nodes, n)
	}
	return s, nil
}

// sliceOver reports whether the job's slice is nearly over: what is under
// way must end before the queue's timeout.
func (r *Runner) sliceOver(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < r.cfg.RescueAfter/6
}

// load loads the contents of the next nodes in index order, a chunk per
// query, while few are ready and the bytes held stay within the budget.
// The earliest node that has not ended is always loaded, so the budget
// never stops a run.
func (s *scheduler) load(ctx context.Context) {
	for s.loadPos < len(s.nodes) && s.ready.Len() < 2*s.r.cfg.ItemConcurrency && s.held < loadBudget {
		end := min(len(s.nodes), s.loadPos+chunkItems)
		var idxs []int
		for _, n := range s.nodes[s.loadPos:end] {
			if n.it.Op == agentfs.OpPut {
				idxs = append(idxs, n.it.Index)
			}
		}
		contents, err := s.r.store.ItemContents(ctx, s.b.ID, idxs, chunkBytes)
		if err != nil {
			s.fail(ctx, nil, err)
			return
		}
		start := s.loadPos
		for ; s.loadPos < end; s.loadPos++ {
			n := s.nodes[s.loadPos]
			if n.it.Op == agentfs.OpPut {
				content, ok := contents[n.it.Index]
				if !ok {
					break // past this load's bytes: the next one
				}
				n.it.Content, n.size = content, int64(len(content))
				s.held += n.size
			}
			n.state = loaded
			if n.waits == 0 {
				heap.Push(&s.ready, n)
			}
		}
		if s.loadPos == start {
			s.fail(ctx, nil, fmt.Errorf("batch %s: item %d has no row", s.b.ID, s.nodes[start].it.Index))
			return
		}
	}
}

// dispatch starts preparing ready nodes, earliest first, within the
// concurrency bound and a bound on items waiting to commit.
func (s *scheduler) dispatch(ctx context.Context) {
	limit := s.r.cfg.ItemConcurrency
	for s.ready.Len() > 0 && s.preparing < limit && s.active < limit+maxGroup {
		n := heap.Pop(&s.ready).(*node)
		n.state = preparing
		s.preparing++
		s.active++
		go s.prepare(ctx, n, n.it)
	}
}

// prepare prepares one item in a slot of the instance and hands it to the
// committer.
func (s *scheduler) prepare(ctx context.Context, n *node, it agentfs.BatchItem) {
	select {
	case s.r.slots <- struct{}{}:
	case <-ctx.Done():
		s.events <- event{n: n, err: ctx.Err()}
		return
	}
	p, err := s.r.core.PrepareItem(ctx, s.b, it)
	<-s.r.slots
	if p == nil {
		s.events <- event{n: n, err: err}
		return
	}
	s.events <- event{n: n, prepared: true}
	s.commits <- queued{n: n, p: p}
}

// committer commits what is prepared, as many items per transaction as
// have come (up to maxGroup), until commits is closed.
func (s *scheduler) committer(ctx context.Context) {
	for q := range s.commits {
		group := []queued{q}
	more:
		for len(group) < maxGroup {
			select {
			case q, ok := <-s.commits:
				if !ok {
					break more
				}
				group = append(group, q)
			default:
				break more
			}
		}
		items := make([]*admission.PreparedItem, len(group))
		for i, q := range group {
			items[i] = q.p
		}
		errs := s.r.core.CommitItems(ctx, items)
		for i, q := range group {
			s.events <- event{n: q.n, err: errs[i]}
		}
	}
}

// handle takes in one event: a node prepared, or ended, which frees the
// later items that waited for it, or stops the run.
func (s *scheduler) handle(ctx context.Context, ev event) {
	n := ev.n
	if n.state == preparing {
		s.preparing--
		s.held -= n.size
		n.it.Content, n.size = nil, 0
	}
	if ev.prepared {
		n.state = committing
		return
	}
	n.state = ended
	s.active--
	s.ended++
	switch {
	case ev.err == nil:
		for _, m := range n.next {
			if m.waits--; m.waits == 0 && m.state == loaded {
				heap.Push(&s.ready, m)
			}
		}
	case errors.Is(ev.err, storage.ErrItemDone):
		if s.stop == nil {
			s.stop = errNotPending
		}
	default:
		s.fail(ctx, n, ev.err)
	}
}

// fail stops the run for a failure that may pass when the batch is
// retried; it outranks the other reasons to stop, so the retry backs off.
func (s *scheduler) fail(ctx context.Context, n *node, err error) {
	args := []any{"batch_id", s.b.ID, "err", err}
	if n != nil {
		args = append(args, "index", n.it.Index)
	}
	s.r.cfg.Log.WarnContext(ctx, "batch item will be retried", args...)
	if s.stop == nil || s.stop == errSliceOver || s.stop == errNotPending {
		s.stop = err
	}
}

// readyHeap holds the nodes free to start, earliest index first.
type readyHeap []*node

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].it.Index < h[j].it.Index }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(*node)) }
func (h *readyHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	*h = old[:len(old)-1]
	return n
}
