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

// TestPOSIX is the behaviour table of the calls a mount answers: each row
// makes a call in the mount and checks what it returned and what the
// store then holds.
func TestPOSIX(t *testing.T) {
	w := newWorld(t)
	c := w.client(t, client.WithRunID("posix"))
	dir, _ := mounted(t, c, mount.Options{Prefix: "m"})
	ctx := context.Background()
	at := func(p string) string { return filepath.Join(dir, p) }
	versions := func(p string) int {
		_, f := stored(t, c, "m/"+p)
		if f == nil {
			t.Fatalf("no file at m/%s", p)
		}
		l, err := c.ListVersions(ctx, f.ID, client.VersionListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Data)
	}
	for _, row := range []struct {
		name string
		call func() error
		want syscall.Errno
		then func(t *testing.T)
	}{
		{"create and write", func() error { return os.WriteFile(at("a.txt"), []byte("hello"), 0o640) }, 0, func(t *testing.T) {
			if body, f := stored(t, c, "m/a.txt"); body != "hello" || f.Mode != 0o640 || *f.RunID != "posix" {
				t.Fatalf("stored %q %+v", body, f)
			}
		}},
		{"read", func() error { return expect(os.ReadFile(at("a.txt"))).is("hello") }, 0, nil},
		{"write at an offset", func() error {
			f, err := os.OpenFile(at("a.txt"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("J"), 0); err != nil {
				return err
			}
			return f.Close()
		}, 0, func(t *testing.T) {
			if body, _ := stored(t, c, "m/a.txt"); body != "Jello" || versions("a.txt") != 2 {
				t.Fatalf("stored %q in %d versions", body, versions("a.txt"))
			}
		}},
		{"truncate", func() error { return os.Truncate(at("a.txt"), 2) }, 0, func(t *testing.T) {
			if body, _ := stored(t, c, "m/a.txt"); body != "Je" {
				t.Fatalf("stored %q", body)
			}
		}},
		{"fsync makes a version, close after it none", func() error {
			f, err := os.OpenFile(at("a.txt"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			if _, err := f.Write([]byte("!")); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			if body, _ := stored(t, c, "m/a.txt"); body != "Je!" {
				return errors.New("fsync did not store: " + body)
			}
			return f.Close()
		}, 0, func(t *testing.T) {
			if n := versions("a.txt"); n != 4 {
				t.Fatalf("%d versions, want 4 (create, write, truncate, fsync)", n)
			}
		}},
		{"chmod", func() error { return os.Chmod(at("a.txt"), 0o755) }, 0, func(t *testing.T) {
			if _, f := stored(t, c, "m/a.txt"); f.Mode != 0o755 || versions("a.txt") != 4 {
				t.Fatalf("mode %o", f.Mode)
			}
		}},
		{"utimes", func() error {
			when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			return os.Chtimes(at("a.txt"), when, when)
		}, 0, func(t *testing.T) {
			if _, f := stored(t, c, "m/a.txt"); f.MTime.Year() != 2001 {
				t.Fatalf("mtime %v", f.MTime)
			}
		}},
		{"mkdir keeps an empty folder", func() error { return os.Mkdir(at("empty"), 0o755) }, 0, func(t *testing.T) {
			if _, f := stored(t, c, "m/empty"); f == nil || f.Kind != "directory" {
				t.Fatalf("marker %+v", f)
			}
		}},
		{"mkdir over a folder", func() error { return os.Mkdir(at("empty"), 0o755) }, syscall.EEXIST, nil},
		{"rename keeps the id", func() error { return os.Rename(at("a.txt"), at("empty/b.txt")) }, 0, func(t *testing.T) {
			if _, f := stored(t, c, "m/empty/b.txt"); f == nil || versions("empty/b.txt") != 4 {
				t.Fatalf("moved %+v", f)
			}
		}},
		{"rmdir of a folder with a file", func() error { return os.Remove(at("empty")) }, syscall.ENOTEMPTY, nil},
		{"rename over a file makes its next version", func() error {
			if err := os.WriteFile(at("empty/tmp"), []byte("new"), 0o644); err != nil {
				return err
			}
			return os.Rename(at("empty/tmp"), at("empty/b.txt"))
		}, 0, func(t *testing.T) {
			if body, _ := stored(t, c, "m/empty/b.txt"); body != "new" || versions("empty/b.txt") != 5 {
				t.Fatalf("stored %q in %d versions", body, versions("empty/b.txt"))
			}
			if _, f := stored(t, c, "m/empty/tmp"); f != nil {
				t.Fatalf("the temporary file stays: %+v", f)
			}
		}},
		{"unlink", func() error { return os.Remove(at("empty/b.txt")) }, 0, func(t *testing.T) {
			if _, f := stored(t, c, "m/empty/b.txt"); f != nil {
				t.Fatalf("still live: %+v", f)
			}
		}},
		{"rmdir", func() error { return os.Remove(at("empty")) }, 0, func(t *testing.T) {
			if _, err := os.Stat(at("empty")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("stat after rmdir: %v", err)
			}
		}},
		{"symlink", func() error { return os.Symlink("target/file", at("link")) }, 0, nil},
		{"readlink", func() error { return expect2(os.Readlink(at("link"))).is("target/file") }, 0, func(t *testing.T) {
			if body, f := stored(t, c, "m/link"); body != "target/file" || f.Kind != "symlink" {
				t.Fatalf("symlink stored %q %+v", body, f)
			}
		}},
		{"hard link", func() error { return os.Link(at("link"), at("hard")) }, syscall.ENOTSUP, nil},
		{"setxattr", func() error { return syscall.Setxattr(dir, "user.x", []byte("1"), 0) }, syscall.ENOTSUP, nil},
		{"getxattr of a file", func() error {
			if err := os.WriteFile(at("x"), nil, 0o644); err != nil {
				return err
			}
			_, err := syscall.Getxattr(at("x"), "user.x", make([]byte, 16))
			return err
		}, syscall.ENOTSUP, nil},
		{"statfs", func() error {
			var st syscall.Statfs_t
			if err := syscall.Statfs(dir, &st); err != nil {
				return err
			}
			if st.Bavail == 0 || st.Bsize == 0 {
				return errors.New("statfs answers no free space")
			}
			return nil
		}, 0, nil},
		{"open a missing file", func() error { _, err := os.Open(at("nope")); return err }, syscall.ENOENT, nil},
	} {
		err := row.call()
		var got syscall.Errno
		if !errors.As(err, &got) && err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if got != row.want {
			t.Fatalf("%s: errno %v (%v), want %v", row.name, got, err, row.want)
		}
		if row.then != nil {
			row.then(t)
		}
	}
}

type result struct {
	got string
	err error
}

func expect(b []byte, err error) result  { return result{string(b), err} }
func expect2(s string, err error) result { return result{s, err} }
func (r result) is(want string) error {
	if r.err != nil {
		return r.err
	}
	if r.got != want {
		return errors.New("got " + r.got + ", want " + want)
	}
	return nil
}
