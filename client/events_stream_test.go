package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// TestStreamEvents: StreamEvents yields every event once, in feed order,
// while they are written, and a stream started again from Cursor after
// the loop broke off goes on with the next event.
func TestStreamEvents(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	c, err := client.New(b.srv.URL, b.token, client.WithRetryPolicy(fast)) // direct: a stream is not buffered
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 30
	// The writer is waited for: the feed can hand out a write's event
	// before the write's answer reaches the writer, and a test that ended
	// then would cancel that answer.
	wrote := make(chan struct{})
	defer func() { <-wrote }()
	go func() {
		defer close(wrote)
		for i := range n {
			if _, err := b.direct.PutFile(ctx, fmt.Sprintf("st/%02d.txt", i), strings.NewReader("x"), client.PutOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var got []string
	s := c.StreamEvents(client.EventOptions{Prefix: "st/"})
	for e, err := range s.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, e.Path); len(got) == 10 {
			break
		}
	}
	s = c.StreamEvents(client.EventOptions{Prefix: "st/", After: s.Cursor()})
	for e, err := range s.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, e.Path); len(got) == n {
			break
		}
	}
	for i, p := range got {
		if want := fmt.Sprintf("st/%02d.txt", i); p != want {
			t.Fatalf("event %d is %s, want %s (all: %v)", i, p, want, got)
		}
	}
	// A problem that asking again cannot mend ends the loop with it.
	var last error
	for _, err := range c.StreamEvents(client.EventOptions{After: "not-a-cursor"}).All(ctx) {
		last = err
	}
	if p := (*client.Problem)(nil); !errors.As(last, &p) || p.Code != "INVALID_REQUEST" {
		t.Fatalf("a bad cursor ended the stream with %v, want INVALID_REQUEST", last)
	}
}

// TestListRunsAndPlanRevertRun: the runs, newest activity first, and a
// run revert's plan, which changes nothing.
func TestListRunsAndPlanRevertRun(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	for _, run := range []string{"run-1", "run-2", "run-3"} {
		rc, err := client.New(b.srv.URL, b.token, client.WithRunID(run))
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, rc, run+"/a.txt", "a", client.PutOptions{})
	}
	var ids []string
	for r, err := range c.AllRuns(ctx, client.RunListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.RunID)
	}
	if strings.Join(ids, ",") != "run-3,run-2,run-1" {
		t.Fatalf("runs %v", ids)
	}
	plan, err := c.PlanRevertRun(ctx, "run-2", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 1 || plan.Items[0].Action != "delete" || plan.Items[0].Path != "run-2/a.txt" {
		t.Fatalf("plan %+v", plan)
	}
	if _, err := c.FileAt(ctx, "run-2/a.txt"); err != nil {
		t.Fatalf("the plan changed something: %v", err)
	}
}
