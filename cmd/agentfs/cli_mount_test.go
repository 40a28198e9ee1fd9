package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestMountVerbUnmountsOnSignals: agentfs mount serves in the foreground
// with --prefix and --run, and SIGTERM or SIGINT unmounts it cleanly
// (exit 0, nothing left mounted) with every closed file stored.
func TestMountVerbUnmountsOnSignals(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("no /dev/fuse (%v): this test needs FUSE (root, the fuse module, fuse3's fusermount3)", err)
	}
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	tok := srv.Token(t, "alice", "read", "write")
	bin := buildBinary(t)
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGTERM} {
		dir := t.TempDir()
		args := []string{"mount", dir, "--prefix", "cli/", "--run", "cli-run"}
		name := sig.String() + ".txt"
		if i == 2 {
			// Write-back: the signal comes right after the close, and the
			// unmount stores what is pending first.
			args = append(args, "--write-back", "--cache-dir", t.TempDir())
			name = "write-back.txt"
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AGENTFS_URL="+srv.URL, "AGENTFS_TOKEN="+tok)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exec.Command("fusermount3", "-uz", dir).Run() })
		for deadline := time.Now().Add(20 * time.Second); !mountedAt(dir); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never mounted: %s", stderr.String())
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agentfs mount after %v: %v\n%s", sig, err, stderr.String())
		}
		if mountedAt(dir) {
			t.Fatalf("still mounted after %v", sig)
		}
		c, err := client.New(srv.URL, tok)
		if err != nil {
			t.Fatal(err)
		}
		page, err := c.ListFiles(context.Background(), client.ListOptions{Path: "cli/" + name})
		if err != nil || len(page.Data) != 1 || *page.Data[0].RunID != "cli-run" {
			t.Fatalf("the file written before %v: %+v %v", sig, page, err)
		}
	}
}

func mountedAt(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return strings.Contains(string(b), " "+dir+" fuse.agentfs ")
}
