package mount_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mount"
)

// eventually waits, with a generous deadline, until check holds.
// restWriteShows writes content to path through the REST API and waits,
// as what says, for the mount to show it at local.
func (w *world) restWriteShows(t *testing.T, path, content, local, what string) {
	t.Helper()
	if _, err := w.client(t).PutFile(context.Background(), path, bytesReader(content), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, what, func() bool {
		got, _ := os.ReadFile(local)
		return string(got) == content
	})
}

func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !check(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoMountsSeeEachOther: what one mount of a prefix closed, another
// mount of it reads; a change made elsewhere reaches a file the kernel
// already cached (the event feed invalidates it).
func TestTwoMountsSeeEachOther(t *testing.T) {
	w := newWorld(t)
	a, _ := mounted(t, w.client(t), mount.Options{Prefix: "shared"})
	b, _ := mounted(t, w.client(t), mount.Options{Prefix: "shared"})
	if err := os.WriteFile(filepath.Join(a, "note.txt"), []byte("from a"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(dir string) string { b, _ := os.ReadFile(filepath.Join(dir, "note.txt")); return string(b) }
	eventually(t, "b reads what a closed", func() bool { return read(b) == "from a" })
	if err := os.WriteFile(filepath.Join(b, "note.txt"), []byte("from b, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reads what b closed over the file it cached", func() bool { return read(a) == "from b, longer" })
	w.restWriteShows(t, "shared/sub/rest.txt", "via REST", filepath.Join(a, "sub", "rest.txt"), "a REST write appears in the mount")
}

// TestRunRevertUndoesTheSession: every write of a mount carries its run,
// so reverting the run undoes the whole shell session: files it created
// go, files it changed come back, files it removed return.
func TestRunRevertUndoesTheSession(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.client(t)
	for _, p := range []string{"keep.txt", "edit.txt", "gone.txt"} {
		if _, err := c.PutFile(ctx, p, bytesReader("before "+p), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ := mounted(t, w.client(t, client.WithRunID("shell-1")), mount.Options{})
	sh(t, dir, "mkdir -p out && echo new > out/new.txt && echo changed > edit.txt && rm gone.txt && "+
		"printf saved > .edit.tmp && mv .edit.tmp keep.txt && sed -i s/saved/sedded/ keep.txt")
	b, err := c.RevertRun(ctx, "shell-1", client.RevertRunOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = c.WaitBatch(ctx, b.ID); err != nil || b.Status != "succeeded" {
		t.Fatalf("revert batch: %+v %v", b, err)
	}
	for p, want := range map[string]string{"keep.txt": "before keep.txt", "edit.txt": "before edit.txt", "gone.txt": "before gone.txt"} {
		if got, _ := stored(t, c, p); got != want {
			t.Fatalf("%s after the revert: %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"out/new.txt", "out", ".edit.tmp"} {
		if _, f := stored(t, c, p); f != nil {
			t.Fatalf("%s stays after the revert: %+v", p, f)
		}
	}
}

// TestScopedTokenMount: a mount with a token scoped to P/ sees and touches
// only P/.
func TestScopedTokenMount(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.client(t)
	for _, p := range []string{"P/in.txt", "Q/out.txt", "top.txt"} {
		if _, err := c.PutFile(ctx, p, bytesReader(p), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := c.CreateToken(ctx, client.TokenOptions{Scopes: []string{"read", "write"}, Prefixes: []string{"P/"}, ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := mounted(t, w.clientWith(t, *tok.Token), mount.Options{})
	if got := sh(t, dir, "find . | sort"); got != ".\n./P\n./P/in.txt" {
		t.Fatalf("the scoped mount sees %q", got)
	}
	for _, p := range []string{"Q/out.txt", "top.txt"} {
		if _, err := os.ReadFile(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("read %s outside the grant: %v", p, err)
		}
	}
	err = os.WriteFile(filepath.Join(dir, "outside.txt"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a write outside the grant: %v", err)
	}
	if _, f := stored(t, c, "outside.txt"); f != nil {
		t.Fatalf("a write outside the grant was stored: %+v", f)
	}
	sh(t, dir, "echo inside > P/new.txt")
	if got, _ := stored(t, c, "P/new.txt"); got != "inside\n" {
		t.Fatalf("inside the grant: %q", got)
	}
}
