package client_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestPointsClient: a checkpoint, a bad edit, the diff (JSON and patch),
// as-of reads, a planned and a waited restore, through the Go client.
func TestPointsClient(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	put := func(path, body string) *client.File {
		f, err := c.PutFile(ctx, path, strings.NewReader(body), client.PutOptions{Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := put("p/a.txt", "alpha\n")
	cp, err := c.CreateCheckpoint(ctx, client.CheckpointOptions{Name: "before", Prefix: "p/"})
	if err != nil || cp.Name == nil || *cp.Name != "before" {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	_, err = c.CreateCheckpoint(ctx, client.CheckpointOptions{Name: "before"})
	var pe *client.Problem
	if !errors.As(err, &pe) || pe.Code != "CHECKPOINT_EXISTS" {
		t.Fatalf("the name again: %v", err)
	}
	put("p/a.txt", "broken\n")
	put("p/new.txt", "new\n")

	d, err := c.Diff(ctx, "before", client.DiffOptions{Prefix: "p/"})
	if err != nil || len(d.Data) != 2 || d.Data[0].Change != "modified" || d.Data[1].Change != "added" {
		t.Fatalf("diff %+v %v", d, err)
	}
	patch, err := c.DiffPatch(ctx, "before", client.DiffOptions{Prefix: "p/"})
	if err != nil || !strings.Contains(patch, "-alpha\n+broken\n") || !strings.Contains(patch, "new file mode 100644\n") {
		t.Fatalf("patch %q %v", patch, err)
	}
	l, err := c.ListFiles(ctx, client.ListOptions{AsOf: "before", Prefix: "p/"})
	if err != nil || len(l.Data) != 1 || l.Data[0].Path != "p/a.txt" {
		t.Fatalf("as-of listing %+v %v", l, err)
	}
	old, err := c.FileAsOf(ctx, a.ID, cp.ID)
	if err != nil || old.Version != 1 {
		t.Fatalf("file as of %+v %v", old, err)
	}
	content, err := c.FileContentAsOf(ctx, a.ID, "before", client.ContentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(content)
	content.Close()
	if string(body) != "alpha\n" {
		t.Fatalf("content as of: %q", body)
	}

	plan, err := c.PlanRestore(ctx, "p/", "before")
	if err != nil || len(plan.Items) != 2 {
		t.Fatalf("plan %+v %v", plan, err)
	}
	b, err := c.Restore(ctx, "p/", "before", client.RestorePointOptions{Wait: true})
	if err != nil || b.Status != "succeeded" || len(b.Items) != 2 {
		t.Fatalf("restore %+v %v", b, err)
	}
	if d, err := c.Diff(ctx, "before", client.DiffOptions{Prefix: "p/"}); err != nil || len(d.Data) != 0 {
		t.Fatalf("diff after the restore %+v %v", d, err)
	}
	cps, err := c.ListCheckpoints(ctx, client.CheckpointListOptions{})
	if err != nil || len(cps.Data) != 1 {
		t.Fatalf("checkpoints %+v %v", cps, err)
	}
	if err := c.DeleteCheckpoint(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetCheckpoint(ctx, "before"); !errors.As(err, &pe) || pe.Code != "NOT_FOUND" {
		t.Fatalf("deleted checkpoint: %v", err)
	}
}

// TestRestoreSwapClient: two files that swapped paths by moves since a
// checkpoint swap back through the client's restore, planned as two moves.
func TestRestoreSwapClient(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	a, err := c.PutFile(ctx, "sw/a.txt", strings.NewReader("a\n"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.PutFile(ctx, "sw/b.txt", strings.NewReader("b\n"), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCheckpoint(ctx, client.CheckpointOptions{Name: "unswapped"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ id, path string }{{a.ID, "sw/t.txt"}, {b.ID, "sw/a.txt"}, {a.ID, "sw/b.txt"}} {
		if _, err := c.Move(ctx, m.id, m.path, client.MoveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := c.PlanRestore(ctx, "sw/", "unswapped")
	if err != nil || len(plan.Items) != 2 || plan.Items[0].Change != "moved" || plan.Items[1].Change != "moved" {
		t.Fatalf("plan %+v %v", plan, err)
	}
	res, err := c.Restore(ctx, "sw/", "unswapped", client.RestorePointOptions{Wait: true})
	if err != nil || res.Status != "succeeded" {
		t.Fatalf("restore %+v %v", res, err)
	}
	for path, id := range map[string]string{"sw/a.txt": a.ID, "sw/b.txt": b.ID} {
		l, err := c.ListFiles(ctx, client.ListOptions{Path: path})
		if err != nil || len(l.Data) != 1 || l.Data[0].ID != id {
			t.Fatalf("%s after the restore: %+v %v, want file %s", path, l, err, id)
		}
	}
	if d, err := c.Diff(ctx, "unswapped", client.DiffOptions{Prefix: "sw/"}); err != nil || len(d.Data) != 0 {
		t.Fatalf("diff after the restore %+v %v", d, err)
	}
}
