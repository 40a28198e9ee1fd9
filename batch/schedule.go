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

// How a batch's pending items run: several at once, yet as if one after
// another, in order.
//
//   - An item depends on the earlier items that share one of its order keys
//     (orderKeys): the path it writes, the file it names by id and that
//     file's path, the path an undo moves a file back to, its item key. It
//     starts only once they have all ended. An operation the runner does
//     not know waits for every earlier item, and every later item waits for
//     it.
//   - Items free to start are prepared at once, up to
//     Config.ItemConcurrency for the whole instance, earliest first: each
//     claims its key and writes its bytes into a new blob (the S3 PUTs are
//     most of an item's time), or finds its outcome without an effect.
//   - Prepared items commit in index order, as many as are prepared in a
//     row (up to maxGroup) per transaction (admission.Core.CommitItems: each
//     item's effect with its status, only while it is pending). So items
//     end in their order, the pending items of a batch are always its last
//     ones, and an item that must wait (a key in progress elsewhere, storage
//     down) holds back every item after it, as it would one by one.
//   - Contents, and the live files at the paths of the puts free to start,
//     are loaded a chunk at a time, ahead of need and within a byte budget,
//     not one query per item.
//
// Nothing new starts once the job's slice is nearly over, once an item met
// a failure that may pass on retry (it stays pending), or once an item
// turned out to be no longer pending (the batch was canceled): what is
// prepared in a row commits, the rest is dropped (its blobs removed, its
// keys released; it stays pending), and the run returns.
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
	case agentfs.OpPut, agentfs.OpCopy, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpUndo, agentfs.OpRestoreTo:
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
		for _, m := range it.Undo.Chain { // the ring's other files, moved by this item
			add("file", m.FileID)
			add("path", paths[m.FileID])
			add("path", m.Path)
		}
	}
	return keys, false
}

// node is a pending item in the run of its batch.
type node struct {
	it    agentfs.BatchItem
	waits int     // earlier items it depends on that have not ended
	next  []*node // later items that depend on it
	size  int64   // bytes of content it holds while loaded and not prepared
	hint  admission.ItemHint
	p     *admission.PreparedItem // once prepared, until it commits
	state nodeState
}

type nodeState int

const (
	unloaded   nodeState = iota
	loaded               // content (if any) in memory, waiting for its turn
	preparing            // in a goroutine of prepare
	prepared             // waiting for the items before it to commit
	committing           // in the group being committed
	ended                // committed, or failed with its outcome recorded
	left                 // left pending: a failure that may pass on retry
)

// event is what the goroutines of a run report: a node's prepare ended (p,
// or the failure err), or a group committed (errs, one per node).
type event struct {
	n     *node
	p     *admission.PreparedItem
	err   error
	group []*node
	errs  []error
}

// scheduler runs one batch's pending items. Its fields belong to the
// goroutine of runItems; the goroutines it starts report through events.
type scheduler struct {
	r       *Runner
	b       *agentfs.Batch
	nodes   []*node // index order
	loadPos int     // nodes before it are loaded (or further along)
	held    int64   // bytes of content loaded and not yet prepared
	ready   readyHeap
	// head is the first node not yet handed to the committer: the nodes
	// before it are committing or over.
	head int
	// preparing counts the nodes being prepared, inflight those started
	// and not over; committing is true while a group commits.
	preparing, inflight, over int
	committing                bool
	// behind is true once a node stays pending after head moved past it
	// (its group did not commit): nothing after it may commit in this run.
	behind  bool
	events  chan event
	commits chan []*node
	stop    error // why nothing more starts
}

// runItems applies b's pending items: nil once every one has ended, else
// why the run stopped (errSliceOver, errNotPending, or a failure that may
// pass when the batch is retried).
func (r *Runner) runItems(ctx context.Context, b *agentfs.Batch) error {
	s, err := r.plan(ctx, b)
	if err != nil || len(s.nodes) == 0 {
		return err
	}
	s.events = make(chan event, len(s.nodes)+1)
	s.commits = make(chan []*node, 1)
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
		s.commitNext()
		if s.preparing == 0 && !s.committing {
			break
		}
		s.handle(ctx, <-s.events)
	}
	for _, n := range s.nodes[s.head:] {
		if n.state == prepared {
			r.core.AbandonItem(ctx, n.p)
			n.p = nil
		}
	}
	if s.stop == nil && s.over < len(s.nodes) {
		return fmt.Errorf("batch %s: %d of %d items could not start", b.ID, len(s.nodes)-s.over, len(s.nodes))
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
		if it.Status == agentfs.ItemPending && it.Undo != nil {
			for _, m := range it.Undo.Chain {
				ids = append(ids, m.FileID)
			}
		}
	}
	paths, err := r.store.FilePaths(ctx, b.Subject, ids)
	if err != nil {
		return nil, err
	}
	return &scheduler{r: r, b: b, nodes: order(b.Items, paths)}, nil
}

// order makes a node of each pending item, in index order, each waiting
// for the earlier ones it may depend on. paths are the paths of the files
// the items name by id.
func order(items []agentfs.BatchItem, paths map[string]string) []*node {
	var nodes []*node
	last := map[string]*node{}
	var barrier *node
	var since []*node // nodes since the last barrier
	for _, it := range items {
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
		nodes = append(nodes, n)
	}
	return nodes
}

// sliceOver reports whether the job's slice is nearly over: what is under
// way must end before the queue's timeout.
func (r *Runner) sliceOver(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < r.cfg.RescueAfter/6
}

// load loads the next nodes in index order, a chunk at a time, while few
// are ready and the bytes held stay within the budget: the contents of the
// puts, and the live files at the paths of the puts free to start (their
// hints). The earliest node that has not ended is always loaded, so the
// budget never stops a run.
func (s *scheduler) load(ctx context.Context) {
	for s.loadPos < len(s.nodes) && s.ready.Len() < 2*s.r.cfg.ItemConcurrency && s.held < loadBudget {
		end := min(len(s.nodes), s.loadPos+chunkItems)
		var idxs []int
		var paths []string
		for _, n := range s.nodes[s.loadPos:end] {
			if n.it.Op == agentfs.OpPut {
				idxs = append(idxs, n.it.Index)
				if n.waits == 0 {
					paths = append(paths, n.it.Path)
				}
			}
		}
		contents, err := s.r.store.ItemContents(ctx, s.b.ID, idxs, chunkBytes)
		if err != nil {
			s.fail(ctx, nil, err)
			return
		}
		live, err := s.r.store.LivePaths(ctx, s.b.Subject, paths)
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
				if n.waits == 0 {
					n.hint = admission.ItemHint{Known: true, Live: live[n.it.Path]}
				}
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
// concurrency bound and a bound on the nodes started and not over; the
// first node not yet committing always may start, so the nodes prepared
// after it never keep it waiting.
func (s *scheduler) dispatch(ctx context.Context) {
	limit := s.r.cfg.ItemConcurrency
	for s.ready.Len() > 0 && s.preparing < limit {
		if s.inflight >= limit+maxGroup && s.ready[0] != s.nodes[s.head] {
			return
		}
		n := heap.Pop(&s.ready).(*node)
		n.state = preparing
		s.preparing++
		s.inflight++
		go s.prepare(ctx, n, n.it, n.hint)
	}
}

// prepare prepares one item in a slot of the instance.
func (s *scheduler) prepare(ctx context.Context, n *node, it agentfs.BatchItem, hint admission.ItemHint) {
	select {
	case s.r.slots <- struct{}{}:
	case <-ctx.Done():
		s.events <- event{n: n, err: ctx.Err()}
		return
	}
	p, err := s.r.core.PrepareItem(ctx, s.b, it, hint)
	<-s.r.slots
	s.events <- event{n: n, p: p, err: err}
}

// commitNext hands the committer the prepared nodes in a row from head,
// unless it is busy.
func (s *scheduler) commitNext() {
	if s.committing || s.behind {
		return
	}
	end := s.head
	for end < len(s.nodes) && end-s.head < maxGroup && s.nodes[end].state == prepared {
		s.nodes[end].state = committing
		end++
	}
	if end == s.head {
		return
	}
	s.committing = true
	s.commits <- s.nodes[s.head:end]
	s.head = end
}

// committer commits the groups it is handed, one at a time, until commits
// is closed.
func (s *scheduler) committer(ctx context.Context) {
	for group := range s.commits {
		items := make([]*admission.PreparedItem, len(group))
		for i, n := range group {
			items[i] = n.p
		}
		s.events <- event{group: group, errs: s.r.core.CommitItems(ctx, items)}
	}
}

// handle takes in one event: a node prepared, or failed, or a group
// committed, which frees the later items that waited for its nodes.
func (s *scheduler) handle(ctx context.Context, ev event) {
	if ev.group != nil {
		s.committing = false
		for i, n := range ev.group {
			n.p = nil
			s.end(ctx, n, ev.errs[i])
			if n.state == left {
				s.behind = true // head is past it: the items after it wait for the retry
			}
		}
		return
	}
	n := ev.n
	s.preparing--
	s.held -= n.size
	n.it.Content, n.size = nil, 0
	if ev.p == nil {
		s.end(ctx, n, ev.err)
		return
	}
	n.state, n.p = prepared, ev.p
}

// end ends a node that committed or failed with err.
func (s *scheduler) end(ctx context.Context, n *node, err error) {
	s.inflight--
	s.over++
	switch {
	case err == nil:
		n.state = ended
		for _, m := range n.next {
			if m.waits--; m.waits == 0 && m.state == loaded {
				heap.Push(&s.ready, m)
			}
		}
		return
	case errors.Is(err, storage.ErrItemDone):
		n.state = ended
		if s.stop == nil {
			s.stop = errNotPending
		}
		return
	}
	n.state = left
	if !errors.Is(err, admission.ErrNotCommitted) {
		s.fail(ctx, n, err)
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
