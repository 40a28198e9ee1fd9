package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestBatchMemoryIsBoundedByTheBody posts two batches of 64 MiB of JSON
// at once to a server process and samples its RSS from /proc while they
// are admitted and run: DESIGN §11 allows the server to grow by at most
// twice the body of each batch in flight. The items mix the three shapes a
// content takes in JSON: plain text, text with escapes, and base64.
func TestBatchMemoryIsBoundedByTheBody(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Fatal("the server's RSS is read from /proc, which only Linux has: run the tests on Linux")
	}
	bin, cfg := buildBinary(t), storagetest.Config(t)
	p := startServe(t, bin, cfg, "AGENTFS_BATCH_MAX_BYTES=100663296", "AGENTFS_RATE_LIMIT=100000", "AGENTFS_RATE_BURST=100000")
	p.waitReady(t)
	c := apitest.NewClient(t, p.url, createToken(t, bin, cfg, "--subject", "agent"))
	// A small batch first, so that what every request uses once (pools,
	// code paths, the queue's client) is part of the idle RSS.
	var warm batchState
	c.Do("POST", "/v1/batch", mixedBatch("warm", 6, 1<<10), "Content-Type", "application/json",
		"Idempotency-Key", "warm").Expect(t, http.StatusAccepted).JSON(t, &warm)
	waitBatch(t, c, warm.ID, terminal, time.Minute)

	bodies := [][]byte{mixedBatch("a", 1000, 64<<10), mixedBatch("b", 1000, 64<<10)}
	idle := medianRSS(t, p.cmd.Process.Pid, 10)
	stop, peak := sampleRSS(t, p.cmd.Process.Pid)
	var wg sync.WaitGroup
	ids := make([]string, len(bodies))
	for i, body := range bodies {
		wg.Go(func() {
			var b batchState
			c.Do("POST", "/v1/batch?wait=30", body, "Content-Type", "application/json",
				"Idempotency-Key", "big-"+strconv.Itoa(i)).Expect(t, http.StatusAccepted).JSON(t, &b)
			ids[i] = b.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if b := waitBatch(t, c, id, terminal, 5*time.Minute); b.Status != "succeeded" || b.Counts.Succeeded != 1000 {
			t.Fatalf("batch %s ended %s with %+v", id, b.Status, b.Counts)
		}
	}
	stop()
	growth, budget := *peak-idle, int64(2*(len(bodies[0])+len(bodies[1])))
	t.Logf("two batches of %d and %d bytes of JSON: RSS idle %d MiB, peak %d MiB, growth %d MiB (budget %d MiB)",
		len(bodies[0]), len(bodies[1]), idle>>20, *peak>>20, growth>>20, budget>>20)
	if growth > budget {
		t.Fatalf("the server grew by %d MiB for two batches of %d MiB of JSON, more than twice their bodies (%d MiB)",
			growth>>20, len(bodies[0])>>20, budget>>20)
	}
}

// mixedBatch is a batch of n puts of about size bytes each under prefix:
// a third plain text, a third text that JSON escapes, a third base64.
func mixedBatch(prefix string, n, size int) []byte {
	ops := make([]map[string]any, n)
	plain := strings.Repeat("agentfs ", size/8)
	escaped := strings.Repeat("a \"quoted\"\tline\n", size/16)
	binary := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff, '\n'}, size/8))
	for i := range ops {
		op := map[string]any{"op": "put", "path": fmt.Sprintf("%s/%04d", prefix, i)}
		switch i % 3 {
		case 0:
			op["content"] = plain + strconv.Itoa(i)
		case 1:
			op["content"] = escaped + strconv.Itoa(i)
		default:
			op["content"], op["encoding"] = binary, "base64"
		}
		ops[i] = op
	}
	raw, _ := json.Marshal(map[string]any{"operations": ops})
	return raw
}

// rssOf reads VmRSS of a process from /proc, in bytes.
func rssOf(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line in /proc/" + strconv.Itoa(pid) + "/status")
}

// medianRSS is the median of n samples of the process's RSS, 20 ms apart.
func medianRSS(t *testing.T, pid, n int) int64 {
	t.Helper()
	samples := make([]int64, n)
	for i := range samples {
		v, err := rssOf(pid)
		if err != nil {
			t.Fatalf("read the server's RSS: %v", err)
		}
		samples[i] = v
		time.Sleep(20 * time.Millisecond) // spacing samples, not waiting for anything
	}
	slices.Sort(samples)
	return samples[n/2]
}

// sampleRSS records the process's highest RSS, every 5 ms, until stop.
func sampleRSS(t *testing.T, pid int) (stop func(), peak *int64) {
	t.Helper()
	peak = new(int64)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := rssOf(pid); err == nil && v > *peak {
				*peak = v
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-ended }, peak
}
