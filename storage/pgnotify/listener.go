// Package pgnotify keeps one Postgres LISTEN connection per process and
// fans its notifications out to the process's waiters, so a request that
// waits for something another instance commits (a batch ending, a token
// revoked, an event) wakes when it happens instead of polling.
//
// A lost connection is dialled again, and everyone is told, since a
// notification may have gone by unheard meanwhile: a subscriber is woken
// to look again, and a follower is told the connection no longer listens
// until it listens again. The connection is asked a trivial query after a
// few seconds of silence, so one that died without a word is found soon.
//
// The package knows no channel of its own: the store names them and
// defines what their payloads say.
package pgnotify

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenerHeartbeat is how long the listening connection may sit silent
// before it is asked a trivial query: a connection that died without a word
// (a network that drops packets) is found within about this long, and its
// followers told they may have missed notifications.
const listenerHeartbeat = 5 * time.Second

// Listener listens for Postgres notifications on one connection of its own
// and hands them to the followers and subscribers of this process. It
// starts with its first one and keeps the connection until Close; it is
// safe for concurrent use.
type Listener struct {
	url string

	mu        sync.Mutex
	started   bool
	waiters   map[string]map[chan string]struct{}
	followers map[string]map[*follower]struct{}
	listening map[string]chan struct{} // closed once the connection LISTENs on the channel
	live      map[string]bool          // the connection listens on the channel now
	listen    chan string              // channels to LISTEN on, for the loop
	interrupt context.CancelFunc       // ends the loop's wait for a notification, to take a new LISTEN now
	poll      time.Duration            // longest wait for a notification before the loop looks around (heartbeat)
	readyWait time.Duration            // longest wait of a first subscriber for its channel's LISTEN
	onWait    func()                   // when set (tests), called each time the loop starts a wait for a notification
	stop      context.CancelFunc
	done      chan struct{}
}

// New is a listener that connects to the database at url once it has its
// first follower or subscriber.
func New(url string) *Listener {
	return &Listener{url: url, waiters: map[string]map[chan string]struct{}{},
		followers: map[string]map[*follower]struct{}{},
		listening: map[string]chan struct{}{}, live: map[string]bool{}, listen: make(chan string, 16),
		poll: time.Second, readyWait: 2 * time.Second}
}

// Follower is told every notification on its channel, in order, from the
// listener's own goroutine (so it must not block), and whether the
// connection listens: from Listening(false) until the next
// Listening(true) notifications may be missed, so a follower that keeps
// state others may change (a cache) must not trust it meanwhile.
type Follower interface {
	Notified(payload string)
	Listening(live bool)
}

// follower is one Follow: the same Follower may follow twice.
type follower struct{ Follower }

// Follow starts telling f about channel, without waiting for the
// connection (f.Listening(true) says when it listens); stop ends it.
func (n *Listener) Follow(channel string, f Follower) (stop func()) {
	x := &follower{f}
	n.mu.Lock()
	n.startLocked()
	n.channelLocked(channel)
	if n.followers[channel] == nil {
		n.followers[channel] = map[*follower]struct{}{}
	}
	n.followers[channel][x] = struct{}{}
	if n.live[channel] {
		f.Listening(true) // under n.mu, so no lost() can come in between
	}
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.followers[channel], x)
	}
}

// startLocked starts the listening loop once; n.mu is held.
func (n *Listener) startLocked() {
	if n.started {
		return
	}
	n.started = true
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	go n.run(ctx)
}

// channelLocked has the loop LISTEN on channel, once; n.mu is held.
func (n *Listener) channelLocked(channel string) {
	if _, ok := n.listening[channel]; ok {
		return
	}
	n.listening[channel] = make(chan struct{})
	if n.waiters[channel] == nil {
		n.waiters[channel] = map[chan string]struct{}{}
	}
	n.listen <- channel
	if n.interrupt != nil {
		n.interrupt() // its first waiter waits for this LISTEN: take it now, not after the wait
	}
}

// Subscribe returns a channel that receives the payload of each
// notification on channel (dropping some when the reader is slow: a wake-up
// only says "look again"; an empty payload also comes when notifications
// may have been missed), and a function that ends the subscription.
func (n *Listener) Subscribe(channel string) (<-chan string, func()) {
	ch := make(chan string, 1)
	n.mu.Lock()
	n.startLocked()
	n.channelLocked(channel)
	n.waiters[channel][ch] = struct{}{}
	ready := n.listening[channel]
	n.mu.Unlock()
	// A notification sent before the first LISTEN on a channel would be
	// missed; wait for it, but not for a database that does not answer
	// (waiters look again now and then anyway).
	select {
	case <-ready:
	case <-time.After(n.readyWait):
	}
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.waiters[channel], ch)
	}
}

// Close stops listening.
func (n *Listener) Close() {
	n.mu.Lock()
	started := n.started
	n.mu.Unlock()
	if started {
		n.stop()
		<-n.done
	}
}

func (n *Listener) run(ctx context.Context) {
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
		n.lost() // a notification may go by while the connection is down
	}
}

// session listens on one connection until it fails; ok says it got as far
// as listening.
func (n *Listener) session(ctx context.Context) (ok bool) {
	conn, err := pgx.Connect(ctx, n.url)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, c := range n.channels() {
		if !n.listenOn(ctx, conn, c) {
			return false
		}
	}
	n.serve(ctx, conn)
	return true
}

// channels are the channels followed or subscribed to.
func (n *Listener) channels() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	channels := make([]string, 0, len(n.waiters))
	for c := range n.waiters {
		channels = append(channels, c)
	}
	return channels
}

// serve hands on the connection's notifications, takes new channels' LISTENs
// and keeps the heartbeat, until the connection fails or ctx ends.
func (n *Listener) serve(ctx context.Context, conn *pgx.Conn) {
	heard := time.Now()
	for {
		select {
		case c := <-n.listen:
			if !n.listenOn(ctx, conn, c) {
				return
			}
			continue
		default:
		}
		if time.Since(heard) >= listenerHeartbeat {
			if !n.heartbeat(ctx, conn) {
				return
			}
			heard = time.Now()
		}
		msg, ok := n.await(ctx, conn)
		if !ok {
			return
		}
		if msg != nil {
			heard = time.Now()
			n.deliver(msg.Channel, msg.Payload)
		}
	}
}

// await waits for one notification. The wait ends after poll (for the
// heartbeat), or at once when a new channel asks for its LISTEN
// (channelLocked): then msg is nil. ok is false when the connection
// failed, not the wait, or ctx ended.
func (n *Listener) await(ctx context.Context, conn *pgx.Conn) (msg *pgconn.Notification, ok bool) {
	waitCtx, cancel := context.WithTimeout(ctx, n.poll)
	n.mu.Lock()
	n.interrupt = cancel
	pending := len(n.listen) > 0 // sent before the interrupt was set
	n.mu.Unlock()
	if n.onWait != nil && !pending {
		n.onWait()
	}
	var err error
	if !pending {
		msg, err = conn.WaitForNotification(waitCtx)
	}
	timedOut := waitCtx.Err() != nil // read before cancel, which sets it
	n.mu.Lock()
	n.interrupt = nil
	n.mu.Unlock()
	cancel()
	switch {
	case pending: // LISTEN first
		return nil, true
	case err == nil:
		return msg, true
	case ctx.Err() != nil:
		return nil, false
	case !timedOut || conn.IsClosed(): // the connection failed, not the wait
		return nil, false
	}
	return nil, true
}

// heartbeat asks the listening connection a trivial query, bounded, and
// reports whether it answered.
func (n *Listener) heartbeat(ctx context.Context, conn *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(ctx, listenerHeartbeat)
	defer cancel()
	_, err := conn.Exec(ctx, "SELECT 1")
	return err == nil
}

func (n *Listener) listenOn(ctx context.Context, conn *pgx.Conn, channel string) bool {
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
	n.live[channel] = true
	for f := range n.followers[channel] {
		f.Listening(true)
	}
	return true
}

func (n *Listener) deliver(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for f := range n.followers[channel] {
		f.Notified(payload)
	}
	for ch := range n.waiters[channel] {
		select {
		case ch <- payload:
		default:
		}
	}
}

// lost tells everyone that notifications may have gone by unheard: the
// followers that the connection no longer listens, the waiters to look
// again.
func (n *Listener) lost() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.live)
	for _, fs := range n.followers {
		for f := range fs {
			f.Listening(false)
		}
	}
	for _, ws := range n.waiters {
		for ch := range ws {
			select {
			case ch <- "":
			default:
			}
		}
	}
}
