package admission_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/idempotency"
)

// groups hears the size of each commit of a put of its own.
type groups struct {
	mu    sync.Mutex
	sizes []int
}

func (g *groups) KeyOutcome(string)          {}
func (g *groups) ItemOutcome(string, string) {}
func (g *groups) CommitGroup(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizes = append(g.sizes, n)
}

func sorted(s []int) []int { slices.Sort(s); return s }

func (g *groups) seen() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// holdLane sets the core up so that its first keyed put, once committed,
// holds its lane until release is closed: the puts that arrive meanwhile
// wait and then commit together.
func holdLane(obs *groups, committed chan<- struct{}, release <-chan struct{}) func(*admission.Config) {
	var once sync.Once
	return func(c *admission.Config) {
		c.Observer = obs
		c.AfterCommit = func() {
			once.Do(func() {
				close(committed)
				<-release
			})
		}
	}
}

// gather starts the lane-holding put, then the puts of the test while it
// holds the lane; it returns once all of them wait, and the results after
// the lane is released.
func gather(t *testing.T, core *admission.Core, committed chan struct{}, release chan struct{},
	puts []func() (idempotency.Result, error)) ([]idempotency.Result, []error) {
	t.Helper()
	first := make(chan error, 1)
	go func() {
		_, err := putContent(context.Background(), core, keyed("hold"), "hold.txt", "hold", false)
		first <- err
	}()
	<-committed
	res, errs := make([]idempotency.Result, len(puts)), make([]error, len(puts))
	var wg sync.WaitGroup
	for i, put := range puts {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errs[i] = put() }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for core.Waiting() < len(puts) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d puts wait for the lane", core.Waiting(), len(puts))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	return res, errs
}

// Puts of one caller that arrive while its commit runs commit together in
// one transaction, each answered as it would be alone; their files, keys
// and events are all there.
func TestPutsArrivingDuringACommitCommitTogether(t *testing.T) {
	obs, committed, release := &groups{}, make(chan struct{}), make(chan struct{})
	core, b := setup(t, holdLane(obs, committed, release))
	ctx := context.Background()
	const n = 12
	puts := make([]func() (idempotency.Result, error), n)
	for i := range puts {
		who := unkeyed
		if i%2 == 0 {
			who = keyed(fmt.Sprintf("k%d", i))
		}
		puts[i] = func() (idempotency.Result, error) {
			return putContent(ctx, core, who, fmt.Sprintf("g/%02d.txt", i), fmt.Sprintf("content %d", i), false)
		}
	}
	res, errs := gather(t, core, committed, release, puts)
	for i := range puts {
		if errs[i] != nil || res[i].Status != http.StatusCreated {
			t.Fatalf("put %d: %v %d %s", i, errs[i], res[i].Status, res[i].Body)
		}
		f := fileOf(t, res[i])
		if f.Path != fmt.Sprintf("g/%02d.txt", i) || b.content(t, f.ID) != fmt.Sprintf("content %d", i) {
			t.Fatalf("put %d answered %s at %s holding %q", i, f.ID, f.Path, b.content(t, f.ID))
		}
		b.wantOneVersion(t, f.Path)
	}
	if sizes := obs.seen(); !slices.Equal(sorted(sizes), []int{1, n}) {
		t.Fatalf("commit group sizes %v, want the holding put alone, then the %d that waited together", sizes, n)
	}
	// A keyed put of the group replays its recorded answer.
	again, err := putContent(ctx, core, keyed("k4"), "g/04.txt", "content 4", false)
	if err != nil || !again.Replayed || string(again.Body) != string(res[4].Body) {
		t.Fatalf("replay of a grouped put: %v replayed=%v %s, want %s", err, again.Replayed, again.Body, res[4].Body)
	}
	// Every put made one event, numbered without a gap.
	evs, _, err := b.store.ListEvents(ctx, "s", agentfs.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n+1 {
		t.Fatalf("%d events, want %d", len(evs), n+1)
	}

}

// A put of a group that fails at its commit (here: another token took its
// path after it was decided) fails alone; the others of its group commit.
// Two puts of one path never share a group: the second replaces the
// first, in their order.
func TestAGroupsFailingPutFailsAlone(t *testing.T) {
	obs, committed, release := &groups{}, make(chan struct{}), make(chan struct{})
	core, b := setup(t, holdLane(obs, committed, release))
	ctx := context.Background()
	paths := []string{"a.txt", "taken.txt", "b.txt", "same.txt"}
	var puts []func() (idempotency.Result, error)
	for i, p := range paths {
		puts = append(puts, func() (idempotency.Result, error) {
			return putContent(ctx, core, keyed(fmt.Sprintf("f%d", i)), p, "new "+p, false)
		})
	}
	other := unkeyed
	other.TokenID = "tok_other"
	// The second put of same.txt waits until the first is queued, so
	// their order is known; then another token takes taken.txt, which the
	// waiting put was decided against as free.
	res, errs := gather(t, core, committed, release, append(puts, func() (idempotency.Result, error) {
		for core.Waiting() < len(paths) {
			time.Sleep(time.Millisecond)
		}
		if _, err := putContent(ctx, core, other, "taken.txt", "theirs", false); err != nil {
			return idempotency.Result{}, fmt.Errorf("another token's put: %w", err)
		}
		return putContent(ctx, core, keyed("f-same-2"), "same.txt", "second", true)
	}))
	for i, p := range paths {
		var exists *agentfs.PathExistsError
		switch {
		case p == "taken.txt":
			if !errors.As(errs[i], &exists) {
				t.Fatalf("put on a path taken since: %v %d %s, want PathExistsError", errs[i], res[i].Status, res[i].Body)
			}
		case errs[i] != nil || res[i].Status != http.StatusCreated:
			t.Fatalf("put %s: %v %d %s", p, errs[i], res[i].Status, res[i].Body)
		}
	}
	if errs[4] != nil || res[4].Status != http.StatusOK {
		t.Fatalf("second put of same.txt: %v %d %s", errs[4], res[4].Status, res[4].Body)
	}
	same := fileOf(t, res[4])
	if same.Version != 2 || b.content(t, same.ID) != "second" {
		t.Fatalf("same.txt at version %d holding %q, want the second put over the first", same.Version, b.content(t, same.ID))
	}
	b.wantOneVersion(t, "a.txt")
	// The holding put, the other token's, the group, then the second put
	// of same.txt alone.
	if sizes := obs.seen(); !slices.Equal(sorted(sizes), []int{1, 1, 1, len(paths)}) {
		t.Fatalf("commit group sizes %v, want [1 1 1 %d]: the second put of a path waits for a group of its own", sizes, len(paths))
	}
}

// Another token's puts (another grant) are another lane: they never wait
// for this token's commit.
func TestAnotherTokensPutDoesNotWait(t *testing.T) {
	obs, committed, release := &groups{}, make(chan struct{}), make(chan struct{})
	core, _ := setup(t, holdLane(obs, committed, release))
	ctx := context.Background()
	go func() { _, _ = putContent(ctx, core, keyed("hold"), "hold.txt", "hold", false) }()
	<-committed
	other := unkeyed
	other.TokenID, other.Grant.Prefixes = "tok_other", []string{"o/"}
	res, err := putContent(ctx, core, other, "o/x.txt", "x", false)
	close(release)
	if err != nil || res.Status != http.StatusCreated {
		t.Fatalf("another token's put while the lane is held: %v %d %s", err, res.Status, res.Body)
	}
}
