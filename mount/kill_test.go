package mount_test

import (
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

// mountChild starts this test binary as a mount process of dir (env is
// what it is told besides) and waits until it has mounted; kill SIGKILLs
// it. When the test ends the child is gone and dir unmounted, whatever
// happened.
func mountChild(t *testing.T, dir string, env ...string) (kill func()) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(append(os.Environ(), "AGENTFS_MOUNT_CHILD="+dir), env...)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
		_ = exec.Command("fusermount3", "-uz", dir).Run()
	})
	eventually(t, "the child mounts", func() bool {
		b, _ := os.ReadFile("/proc/self/mounts")
		return strings.Contains(string(b), dir+" fuse.agentfs")
	})
	return func() {
		t.Helper()
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed = true
		_ = child.Wait()
	}
}

// TestSIGKILLLosesNothingClosed: the mount process killed while a file is
// being written leaves every file it closed stored exactly once, and a
// new mount shows them.
func TestSIGKILLLosesNothingClosed(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	kill := mountChild(t, dir, "AGENTFS_URL="+w.srv.URL, "AGENTFS_TOKEN="+w.tok)
	sh(t, dir, "for i in $(seq 1 20); do echo closed $i > f$i.txt; done")
	// A writer that has written but not closed when the mount dies.
	writer := exec.Command("sh", "-c", `cd "$1" && exec 3>open.txt && echo partial >&3 && sleep 30`, "sh", dir)
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Process.Kill(); _ = writer.Wait() }()
	time.Sleep(300 * time.Millisecond)
	kill()
	_ = writer.Process.Kill()
	_ = writer.Wait()
	if out, err := exec.Command("fusermount3", "-uz", dir).CombinedOutput(); err != nil {
		t.Fatalf("unmount after the kill: %v %s", err, out)
	}

	c := w.client(t)
	seen := livePaths(t, c, "k/")
	for i := 1; i <= 20; i++ {
		if _, ok := seen[fmt.Sprintf("k/f%d.txt", i)]; !ok {
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
