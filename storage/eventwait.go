package storage

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/pgnotify"
)

// DefaultMaxWaitersPerSubject bounds the requests of one subject that wait
// for events on one instance at once, when Config.MaxWaitersPerSubject is 0.
const DefaultMaxWaitersPerSubject = 100

// eventWaiters are this process's requests waiting for a subject's next
// events (AwaitEvents). They follow ChannelEvents, whose notification lists
// what the filters look at of each event a statement inserted (migration
// 011), and each notification wakes only the waiters of its subject whose
// filter one of those events matches, or all of them when it lists none
// (too many to fit). Nobody polls: a notification can be missed only while
// the listening connection is down, and when it listens again every waiter
// looks once more. So the database sees a query per waiter per event it
// can match, and per reconnect, not per waiter per event or per second.
//
// They follow the fan-out (package pgnotify) but stay here, beside the two
// things they must agree with: the trigger whose payload they read and
// ListEvents, whose WHERE their match repeats.
type eventWaiters struct {
	notify *pgnotify.Listener
	max    int // per subject; 0 or less: no bound

	follow    sync.Once
	mu        sync.Mutex
	bySubject map[string]map[*eventWaiter]struct{} // by subjectTag
	// broadWakes counts the wakes no filter decided (Counters.BroadWakes).
	broadWakes atomic.Int64
}

// eventWaiter is one waiting request: woke receives a token whenever it
// should look again (dropped when one is already pending).
type eventWaiter struct {
	tag    string
	filter agentfs.EventFilter
	// prefixes are the waiter's reach (none: every path): an event outside
	// is not its to see, so it does not wake it.
	prefixes []string
	woke     chan struct{}
}

func newEventWaiters(n *pgnotify.Listener, max int) *eventWaiters {
	return &eventWaiters{notify: n, max: max, bySubject: map[string]map[*eventWaiter]struct{}{}}
}

// subjectTag is how a notification names a subject: the md5 hex the
// trigger sends.
func subjectTag(subject string) string {
	sum := md5.Sum([]byte(subject))
	return hex.EncodeToString(sum[:])
}

// add registers a waiter of subject with filter, or fails with
// agentfs.ErrTooManyWaiters when the subject has its bound of waiters here.
// What commits after add returns wakes the waiter if it can match.
func (w *eventWaiters) add(subject string, filter agentfs.EventFilter, prefixes []string) (*eventWaiter, error) {
	// Outside w.mu: the listener calls Notified and Listening under its
	// own lock, and they take w.mu.
	w.follow.Do(func() { w.notify.Follow(ChannelEvents, w) })
	x := &eventWaiter{tag: subjectTag(subject), filter: filter, prefixes: prefixes, woke: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.bySubject[x.tag]
	if w.max > 0 && len(ws) >= w.max {
		return nil, agentfs.ErrTooManyWaiters
	}
	if ws == nil {
		ws = map[*eventWaiter]struct{}{}
		w.bySubject[x.tag] = ws
	}
	ws[x] = struct{}{}
	return x, nil
}

// remove ends a waiter.
func (w *eventWaiters) remove(x *eventWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.bySubject[x.tag], x)
	if len(w.bySubject[x.tag]) == 0 {
		delete(w.bySubject, x.tag)
	}
}

// wake tells x to look again; false when it had been told already and has
// not looked since.
func (x *eventWaiter) wake() bool {
	select {
	case x.woke <- struct{}{}:
		return true
	default:
		return false
	}
}

// Notified wakes the waiters a notification concerns. A payload that is
// not one the trigger sends wakes everyone: a spare look costs less than a
// missed event.
func (w *eventWaiters) Notified(payload string) {
	note, ok := parseEventNotice(payload)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok {
		w.wakeAllLocked()
		return
	}
	for x := range w.bySubject[note.tag] {
		switch {
		case note.all:
			w.wakeBroadly(x)
		case note.matches(x.filter, x.prefixes):
			x.wake()
		}
	}
}

// Listening wakes every waiter when the connection listens again: whatever
// committed while it did not was not heard.
func (w *eventWaiters) Listening(live bool) {
	if !live {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeAllLocked()
}

func (w *eventWaiters) wakeAllLocked() {
	for _, ws := range w.bySubject {
		for x := range ws {
			w.wakeBroadly(x)
		}
	}
}

// wakeBroadly wakes x without a filter's say, and counts it.
func (w *eventWaiters) wakeBroadly(x *eventWaiter) {
	if x.wake() {
		w.broadWakes.Add(1)
	}
}

// eventNotice is a notification on ChannelEvents: the subject's tag and
// the events one statement inserted, or all when it does not list them.
type eventNotice struct {
	tag    string
	all    bool
	events []noticedEvent
}

// noticedEvent is what a filter looks at of one event.
type noticedEvent struct{ typ, fileID, path, agentID, runID string }

// parseEventNotice reads a payload of the events trigger: the bare md5 of
// the subject, or {"s": md5, "e": [[type, file_id, path, agent_id,
// run_id], ...]}.
func parseEventNotice(payload string) (eventNotice, bool) {
	if len(payload) == md5.Size*2 && !strings.HasPrefix(payload, "{") {
		return eventNotice{tag: payload, all: true}, true
	}
	var raw struct {
		S string      `json:"s"`
		E [][5]string `json:"e"`
	}
	if err := json.Unmarshal([]byte(payload), &raw); err != nil || len(raw.S) != md5.Size*2 {
		return eventNotice{}, false
	}
	n := eventNotice{tag: raw.S, events: make([]noticedEvent, len(raw.E))}
	for i, e := range raw.E {
		n.events[i] = noticedEvent{typ: e[0], fileID: e[1], path: e[2], agentID: e[3], runID: e[4]}
	}
	return n, true
}

// matches reports whether one of the events passes filter within
// prefixes (none: every path), as ListEvents' WHERE clause decides it
// (keep the two alike: a filter this lets through costs a query, one it
// wrongly holds back loses a wake-up).
func (n eventNotice) matches(f agentfs.EventFilter, prefixes []string) bool {
	for _, e := range n.events {
		if (len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.path, p) })) &&
			(f.RunID == "" || e.runID == f.RunID) &&
			(f.AgentID == "" || e.agentID == f.AgentID) &&
			(f.FileID == "" || e.fileID == f.FileID) &&
			(f.Prefix == "" || strings.HasPrefix(e.path, f.Prefix)) &&
			(len(f.Types) == 0 || slices.Contains(f.Types, e.typ)) {
			return true
		}
	}
	return false
}
