package mount_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/mount"
)

// TestSignalsInterruptNothing: a program that receives signals while it
// works in the mount (a Go program's preemption signals, SIGCHLD from its
// children) makes the kernel send FUSE an INTERRUPT of the call in flight;
// the call still completes: no write, read, open or close fails for it,
// and every closed file is stored.
func TestSignalsInterruptNothing(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	dir, _ := mounted(t, c, mount.Options{Prefix: "sig"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // SIGURG, which the Go runtime takes as a preemption request, to every thread
		defer wg.Done()
		pid := os.Getpid()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tasks, _ := os.ReadDir("/proc/self/task")
			for _, task := range tasks {
				if tid, err := strconv.Atoi(task.Name()); err == nil {
					_ = syscall.Tgkill(pid, tid, syscall.SIGURG)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	const files = 40
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("f%02d.txt", i))
		body := bytes.Repeat([]byte{'a' + byte(i%26)}, 64<<10)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if _, err := f.WriteAt([]byte("J"), 0); err != nil {
			t.Fatalf("write at an offset %d: %v", i, err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		body[0] = 'J'
		if !bytes.Equal(got, body) {
			t.Fatalf("read %d: %d bytes, not what was written", i, len(got))
		}
	}
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	for i := range files {
		got, f := stored(t, c, fmt.Sprintf("sig/f%02d.txt", i))
		if f == nil || len(got) != 64<<10 || got[0] != 'J' {
			t.Fatalf("f%02d.txt stored %d bytes (%+v)", i, len(got), f)
		}
	}
}
