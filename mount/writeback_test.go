package mount_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mount"
)

// quickTree is the tree the bench's quick mount line untars: Go's src/net.
func quickTree(t *testing.T) string {
	t.Helper()
	tree := filepath.Join(runtime.GOROOT(), "src", "net")
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		t.Fatalf("no Go source tree at %s (%v): the write-back tests untar it", tree, err)
	}
	return tree
}

// settle waits for a write-back mount's pending stores.
func settle(t *testing.T, m *mount.Mount) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Settle(ctx); err != nil {
		t.Fatalf("settle: %v (%d pending)", err, m.Pending())
	}
}

// TestWriteBackUntar: tar -x of the quick tree into a write-back mount,
// then Settle: every file's bytes, mode and mtime through the API are the
// originals', each in exactly one version.
func TestWriteBackUntar(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	dir, m := mounted(t, c, mount.Options{Prefix: "wb", WriteBack: true, CacheDir: t.TempDir()})
	tree := quickTree(t)
	tarball := filepath.Join(t.TempDir(), "net.tar")
	sh(t, filepath.Dir(tree), "tar -cf "+tarball+" net")
	orig := t.TempDir()
	sh(t, orig, "tar -xf "+tarball)
	sh(t, dir, "tar -xf "+tarball)
	// Before the stores finish, the mount shows the tree as on disk.
	sh(t, dir, "diff -r "+orig+" .")
	settle(t, m)
	if n := m.Pending(); n != 0 {
		t.Fatalf("%d pending after Settle", n)
	}

	ctx := context.Background()
	storedFiles := map[string]client.File{}
	for f, err := range c.AllFiles(ctx, client.ListOptions{Prefix: "wb/", Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == "file" {
			storedFiles[strings.TrimPrefix(f.Path, "wb/")] = *f
		}
	}
	count := 0
	err := filepath.WalkDir(orig, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		count++
		rel, _ := filepath.Rel(orig, p)
		f, ok := storedFiles[rel]
		if !ok {
			t.Errorf("%s was not stored", rel)
			return nil
		}
		delete(storedFiles, rel)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if f.Version != 1 {
			t.Errorf("%s: version %d, want exactly one", rel, f.Version)
		}
		if f.Mode != int32(st.Mode().Perm()) || !f.MTime.Equal(st.ModTime()) {
			t.Errorf("%s: mode %o mtime %v, on disk %o %v", rel, f.Mode, f.MTime, st.Mode().Perm(), st.ModTime())
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		body, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
		if got := testkit.ReadAll(t, body, err); string(got) != string(want) {
			t.Errorf("%s: stored %d bytes differ from the original's %d", rel, len(got), len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count < 400 {
		t.Fatalf("only %d files in the tree", count)
	}
	if len(storedFiles) != 0 {
		t.Fatalf("stored files that are not in the tree: %d", len(storedFiles))
	}
}
