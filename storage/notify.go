package storage

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channels the store notifies on (Postgres NOTIFY, delivered when the
// notifying transaction commits).
const (
	// ChannelBatch carries the id of a batch that reached a terminal state.
	ChannelBatch = "agentfs_batch"
)

// notifier listens for Postgres notifications on one connection of its own
// and hands them to the waiters of this process, so a request that waits
// for something another instance commits (a batch ending) wakes when it
// happens instead of polling. It starts with its first waiter and keeps the
// connection until the store closes; a lost connection is dialled again,
// and every waiter is woken then, since it may have missed a notification.
type notifier struct {
	url string

	mu        sync.Mutex
	started   bool
	waiters   map[string]map[chan string]struct{}
	listening map[string]chan struct{} // closed once the connection LISTENs on the channel
	listen    chan string              // channels to LISTEN on, for the loop
	stop      context.CancelFunc
	done      chan struct{}
}

func newNotifier(url string) *notifier {
	return &notifier{url: url, waiters: map[string]map[chan string]struct{}{},
		listening: map[string]chan struct{}{}, listen: make(chan string, 16)}
}

// subscribe returns a channel that receives the payload of each
// notification on channel (dropping some when the reader is slow: a wake-up
// only says "look again"), and a function that ends the subscription.
func (n *notifier) subscribe(channel string) (<-chan string, func()) {
	ch := make(chan string, 1)
	n.mu.Lock()
	if !n.started {
		n.started = true
		ctx, cancel := context.WithCancel(context.Background())
		n.stop, n.done = cancel, make(chan struct{})
		go n.run(ctx)
	}
	if n.waiters[channel] == nil {
		n.waiters[channel] = map[chan string]struct{}{}
		n.listening[channel] = make(chan struct{})
		n.listen <- channel
	}
	n.waiters[channel][ch] = struct{}{}
	ready := n.listening[channel]
	n.mu.Unlock()
	// A notification sent before the first LISTEN on a channel would be
	// missed; wait for it, but not for a database that does not answer
	// (waiters look again now and then anyway).
	select {
	case <-ready:
	case <-time.After(2 * time.Second):
	}
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.waiters[channel], ch)
	}
}

// close stops listening.
func (n *notifier) close() {
	n.mu.Lock()
	started := n.started
	n.mu.Unlock()
	if started {
		n.stop()
		<-n.done
	}
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for wait := time.Duration(0); ctx.Err() == nil; wait = min(2*wait+100*time.Millisecond, 5*time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if n.session(ctx) {
			wait = 0
		}
		n.wakeAll() // a notification may have gone by while the connection was down
	}
}

// session listens on one connection until it fails; ok says it got as far
// as listening.
func (n *notifier) session(ctx context.Context) (ok bool) {
	conn, err := pgx.Connect(ctx, n.url)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n.mu.Lock()
	channels := make([]string, 0, len(n.waiters))
	for c := range n.waiters {
		channels = append(channels, c)
	}
	n.mu.Unlock()
	for _, c := range channels {
		if !n.listenOn(ctx, conn, c) {
			return false
		}
	}
	for {
		select {
		case c := <-n.listen:
			if !n.listenOn(ctx, conn, c) {
				return true
			}
			continue
		default:
		}
		waitCtx, cancel := context.WithTimeout(ctx, time.Second) // to take new LISTENs
		msg, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			n.deliver(msg.Channel, msg.Payload)
		case ctx.Err() != nil:
			return true
		case waitCtx.Err() == nil: // the connection failed, not the wait
			return true
		}
	}
}

func (n *notifier) listenOn(ctx context.Context, conn *pgx.Conn, channel string) bool {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.listening[channel]:
	default:
		close(n.listening[channel])
	}
	return true
}

func (n *notifier) deliver(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[channel] {
		select {
		case ch <- payload:
		default:
		}
	}
}

func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ws := range n.waiters {
		for ch := range ws {
			select {
			case ch <- "":
			default:
			}
		}
	}
}
