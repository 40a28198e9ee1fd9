package mount_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mount"
)

// needFUSE fails the test, saying how to get FUSE, when this machine
// cannot mount: the mount tests never skip.
func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("no /dev/fuse (%v): the mount tests need FUSE; run them as root on Linux with the fuse module loaded "+
			"(modprobe fuse), or in a container started with --device /dev/fuse --cap-add SYS_ADMIN", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatalf("no fusermount3 on PATH: install Debian's fuse3 (apt-get install -y fuse3, or scripts/test.sh, which runs ensure_deps fuse)")
	}
}

// world is a test server and a way to mount it.
type world struct {
	srv *apitest.Server
	tok string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	needFUSE(t)
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	return &world{srv: srv, tok: srv.Token(t, "alice", "read", "write", "delegate")}
}

// client is a Go client of the world with opts.
func (w *world) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	return w.clientWith(t, w.tok, opts...)
}

func (w *world) clientWith(t *testing.T, tok string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(w.srv.URL, tok, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mounted mounts c at a new directory and unmounts it when the test ends,
// also when it fails.
func mounted(t *testing.T, c *client.Client, opts mount.Options) (string, *mount.Mount) {
	t.Helper()
	dir := t.TempDir()
	m, err := mount.New(c, dir, opts)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	t.Cleanup(func() {
		unmount(t, m, dir)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the mount at %s did not end after its unmount", dir)
		}
	})
	return dir, m
}

// unmount unmounts, waiting for files still open to close, and lazily in
// the end so no test leaves a mount behind.
func unmount(t *testing.T, m *mount.Mount, dir string) {
	var err error
	for range 50 {
		if err = m.Unmount(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("unmount %s: %v", dir, err)
	if out, err := exec.Command("fusermount3", "-uz", dir).CombinedOutput(); err != nil {
		t.Errorf("lazy unmount of %s: %v %s", dir, err, out)
	}
}

// sh runs a shell command in dir and answers its output; it fails the test
// when the command fails.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	// The shell changes into dir itself: a child that entered the mount
	// between fork and exec would stop in the kernel on this very
	// process's filesystem.
	cmd := exec.Command("sh", "-c", `cd "$1" && `+script, "sh", dir)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// stored is the content of the live file at path, "" and false when none.
func stored(t *testing.T, c *client.Client, path string) (string, *client.File) {
	t.Helper()
	ctx := context.Background()
	page, err := c.ListFiles(ctx, client.ListOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) == 0 {
		return "", nil
	}
	f := page.Data[0]
	body, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
	return string(testkit.ReadAll(t, body, err)), &f
}

// livePaths are the live files under prefix (100 at most), by path; it
// fails the test when two hold one path.
func livePaths(t *testing.T, c *client.Client, prefix string) map[string]client.File {
	t.Helper()
	page, err := c.ListFiles(context.Background(), client.ListOptions{Prefix: prefix, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]client.File{}
	for _, f := range page.Data {
		if _, ok := seen[f.Path]; ok {
			t.Fatalf("%s is two live files", f.Path)
		}
		seen[f.Path] = f
	}
	return seen
}

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
