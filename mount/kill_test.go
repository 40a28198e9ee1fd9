package mount_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mount"
)

// TestMain serves a mount in a child process of the test binary when
// AGENTFS_MOUNT_CHILD names its directory, so a test can SIGKILL it; in
// write-back when AGENTFS_MOUNT_CHILD_CACHE names its cache dir.
func TestMain(m *testing.M) {
	if dir := os.Getenv("AGENTFS_MOUNT_CHILD"); dir != "" {
		c, err := client.New(os.Getenv("AGENTFS_URL"), os.Getenv("AGENTFS_TOKEN"), client.WithRunID("killed"))
		if err == nil {
			var mnt *mount.Mount
			opts := mount.Options{Prefix: "k"}
			if cache := os.Getenv("AGENTFS_MOUNT_CHILD_CACHE"); cache != "" {
				opts.WriteBack, opts.CacheDir = true, cache
			}
			if mnt, err = mount.New(c, dir, opts); err == nil {
				mnt.Wait()
				os.Exit(0)
			}
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestSIGKILLLosesNothingClosed: the mount process killed while a file is
// being written leaves every file it closed stored exactly once, and a
// new mount shows them.
func TestSIGKILLLosesNothingClosed(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "AGENTFS_MOUNT_CHILD="+dir, "AGENTFS_URL="+w.srv.URL, "AGENTFS_TOKEN="+w.tok)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
		}
		_ = exec.Command("fusermount3", "-uz", dir).Run()
		_ = child.Wait()
	})
	eventually(t, "the child mounts", func() bool {
		b, _ := os.ReadFile("/proc/self/mounts")
		return strings.Contains(string(b), dir+" fuse.agentfs")
	})
	sh(t, dir, "for i in $(seq 1 20); do echo closed $i > f$i.txt; done")
	// A writer that has written but not closed when the mount dies.
	writer := exec.Command("sh", "-c", `cd "$1" && exec 3>open.txt && echo partial >&3 && sleep 30`, "sh", dir)
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Process.Kill(); _ = writer.Wait() }()
	time.Sleep(300 * time.Millisecond)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = child.Wait()
	_ = writer.Process.Kill()
	_ = writer.Wait()
	if out, err := exec.Command("fusermount3", "-uz", dir).CombinedOutput(); err != nil {
		t.Fatalf("unmount after the kill: %v %s", err, out)
	}

	c := w.client(t)
	page, err := c.ListFiles(context.Background(), client.ListOptions{Prefix: "k/", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range page.Data {
		if seen[f.Path] {
			t.Fatalf("%s is two live files", f.Path)
		}
		seen[f.Path] = true
	}
	for i := 1; i <= 20; i++ {
		if !seen[fmt.Sprintf("k/f%d.txt", i)] {
			t.Fatalf("closed file f%d.txt lost: %v", i, seen)
		}
	}
	again, _ := mounted(t, c, mount.Options{Prefix: "k"})
	want := ""
	for i := 1; i <= 20; i++ {
		want += fmt.Sprintf("closed %d\n", i)
	}
	if got := sh(t, again, "for i in $(seq 1 20); do cat f$i.txt; done && ls | grep -c '^f'"); got != want+"20" {
		t.Fatalf("the remount shows %q", got)
	}
}
