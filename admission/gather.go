package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentfs/agentfs"
)

// Group commit: the puts of their own (not batch items) that one caller
// makes at once commit together. A put whose lane (its subject and token)
// has no commit running commits at once, as it always did; one that finds
// a commit running waits, and when that commit ends the puts that gathered
// meanwhile commit in one transaction (their files in one statement, their
// events numbered once, one commit), led by the first of them. Under load
// this is what a subject's commits cost: each one holds the subject's event
// counter from its numbering to its end, so they run one after another,
// and a group pays for that once. A lone put adds no wait.
//
// The writes of a group are independent requests: when the group's
// transaction fails, each one commits in a transaction of its own and ends
// as it would have alone. A group never holds two puts of one path; the
// later waits for the next group.

// DefaultGroupMax is the most puts one group commit holds when
// Config.GroupMax is 0.
const DefaultGroupMax = 64

// lanes are the commits running, by lane.
type lanes struct {
	mu    sync.Mutex
	byKey map[laneKey]*lane
}

// laneKey names the writes that may commit together: one subject and one
// token (so one grant: whatever the store checks of the caller's reach in
// the transaction holds for each of them).
type laneKey struct {
	subject, token, prefixes string
}

// lane is one lane's commit running and the puts waiting for it.
type lane struct {
	waiting []*waiter
}

// waiter is a put waiting for its lane: it is told to lead a group (which
// holds it first) or how its write ended in another's group.
type waiter struct {
	w    *write
	turn chan turn
}

type turn struct {
	group []*waiter // non-nil: commit these, this waiter first
	err   error
}

// gathered commits w, a put of its own, with the puts of its lane that
// arrive while the lane's commit runs.
func (c *Core) gathered(ctx context.Context, w *write) error {
	if c.groupMax() <= 1 {
		return c.commit(ctx, []*write{w})[0]
	}
	key := laneKey{subject: w.who.Subject, token: w.who.TokenID, prefixes: strings.Join(w.who.Grant.Prefixes, "\x00")}
	me := &waiter{w: w, turn: make(chan turn, 1)}
	group := []*waiter{me}
	c.lanes.mu.Lock()
	if c.lanes.byKey == nil {
		c.lanes.byKey = map[laneKey]*lane{}
	}
	l, busy := c.lanes.byKey[key]
	if busy {
		l.waiting = append(l.waiting, me)
	} else {
		c.lanes.byKey[key] = &lane{}
	}
	c.lanes.mu.Unlock()
	if busy {
		t := <-me.turn
		if t.group == nil {
			return t.err
		}
		group = t.group
	}
	ws := make([]*write, len(group))
	for i, g := range group {
		ws[i] = g.w
	}
	// The group commits whatever becomes of the request that leads it;
	// should its commit panic, the lane still moves on and every write of
	// the group ends, its outcome unknown.
	var errs []error
	defer func() {
		if errs == nil {
			c.handOff(key)
			for _, g := range group[1:] {
				g.turn <- turn{err: fmt.Errorf("%w: the commit of its group broke off", agentfs.ErrUnavailable)}
			}
		}
	}()
	errs = c.commitApart(context.WithoutCancel(ctx), ws)
	c.handOff(key)
	for i, g := range group[1:] {
		g.turn <- turn{err: errs[i+1]}
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.CommitGroup(len(ws))
	}
	return errs[0]
}

// handOff ends key's running commit: the puts waiting form the next group
// (in their order, at most GroupMax, one put a path), whose first put
// leads it; with none waiting the lane is idle.
func (c *Core) handOff(key laneKey) {
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	l := c.lanes.byKey[key]
	if len(l.waiting) == 0 {
		delete(c.lanes.byKey, key)
		return
	}
	var group, rest []*waiter
	paths := map[string]bool{}
	for _, g := range l.waiting {
		p := g.w.e.admission().paths
		if len(group) == c.groupMax() || slices.ContainsFunc(p, func(p string) bool { return paths[p] }) {
			rest = append(rest, g)
			continue
		}
		for _, p := range p {
			paths[p] = true
		}
		group = append(group, g)
	}
	l.waiting = rest
	group[0].turn <- turn{group: group}
}

func (c *Core) groupMax() int {
	if c.cfg.GroupMax == 0 {
		return DefaultGroupMax
	}
	return c.cfg.GroupMax
}
