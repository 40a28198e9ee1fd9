package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs/client"
)

// tursoResult is what tools/node/turso-bench.mjs prints: each round's
// rates per second, each listing's milliseconds.
type tursoResult struct {
	Node    string    `json:"node"`
	Writes  []float64 `json:"writes"`
	Reads1  []float64 `json:"reads1"`
	Reads16 []float64 `json:"reads16"`
	ListMS  []float64 `json:"list_ms"`
}

// turso: DESIGN §11's rows against Turso's agentfs-sdk on a local SQLite
// file, in the same run: 4 KiB writes one at a time, 4 KiB reads one at a
// time and 16 at once, and a listing of 2,000 files with their metadata
// (readdirPlus there, GET /v1/files in pages of 1,000 here). AgentFS is
// driven by its Go client, as a user would. The reads are made again
// through a server without the blob cache (-nocache-url), the "before"
// of the cache.
func (b *bench) turso(ctx context.Context) ([]row, error) {
	c := b.cfg
	peer, err := b.runTurso(ctx)
	if err != nil {
		return nil, err
	}
	logf("  turso: agentfs-sdk on Node %s: writes %v/s, reads %v/s and %v/s (16 at once), listing %v ms",
		peer.Node, rounded(peer.Writes), rounded(peer.Reads1), rounded(peer.Reads16), rounded(peer.ListMS))

	fc, err := b.goClient(c.url)
	if err != nil {
		return nil, err
	}
	data := b.data.bytes(0, 4<<10)
	var writes, reads1, reads16, coldReads1, coldReads16 []float64
	var cold *client.Client
	if c.noCacheURL != "" {
		if cold, err = b.goClient(c.noCacheURL); err != nil {
			return nil, err
		}
	}
	for r := range c.tursoRounds {
		ids := make([]string, c.tursoWrites)
		t0 := time.Now()
		for i := range ids {
			f, err := fc.PutFile(ctx, b.path(fmt.Sprintf("turso/w%d/f%d.bin", r, i)), bytes.NewReader(data), client.PutOptions{})
			if err != nil {
				return nil, fmt.Errorf("write: %w", err)
			}
			ids[i] = f.ID
		}
		writes = append(writes, float64(len(ids))/time.Since(t0).Seconds())
		pick := func(i int) string { return ids[(i*7)%len(ids)] }
		for _, side := range []struct {
			cl      *client.Client
			r1, r16 *[]float64
		}{{fc, &reads1, &reads16}, {cold, &coldReads1, &coldReads16}} {
			if side.cl == nil {
				continue
			}
			rate, err := readRate(ctx, side.cl, 1, c.tursoReads, pick)
			if err != nil {
				return nil, err
			}
			*side.r1 = append(*side.r1, rate)
			if rate, err = readRate(ctx, side.cl, 16, c.tursoReads, pick); err != nil {
				return nil, err
			}
			*side.r16 = append(*side.r16, rate)
		}
	}

	listMS, slimMS, err := b.listTimes(ctx, fc, data, 2*c.tursoRounds)
	if err != nil {
		return nil, err
	}

	const readBudget, writeBudget, listBudget = 1.0, 1.0, 1.0
	peerName := "Turso agentfs-sdk, SQLite file"
	rows := []row{
		withDirect(rateRow("4 KiB writes, one at a time, vs Turso's agentfs-sdk", median(writes), median(peer.Writes), "/s", writeBudget), peerName),
		withDirect(rateRow("4 KiB reads, one at a time, vs Turso's agentfs-sdk", median(reads1), median(peer.Reads1), "/s", readBudget), peerName),
		withDirect(rateRow("4 KiB reads, 16 at once, vs Turso's agentfs-sdk", median(reads16), median(peer.Reads16), "/s", readBudget), peerName),
	}
	if cold != nil {
		rows = append(rows,
			withDirect(rateRow("4 KiB reads, one at a time, without the blob cache, vs Turso's agentfs-sdk", median(coldReads1), median(peer.Reads1), "/s", readBudget), peerName),
			withDirect(rateRow("4 KiB reads, 16 at once, without the blob cache, vs Turso's agentfs-sdk", median(coldReads16), median(peer.Reads16), "/s", readBudget), peerName))
		b.notes = append(b.notes, fmt.Sprintf("turso: 4 KiB reads with the blob cache against the same reads through a server without it (before → after): one at a time %s → %s, 16 at once %s → %s.",
			fmtRate(median(coldReads1), "/s"), fmtRate(median(reads1), "/s"), fmtRate(median(coldReads16), "/s"), fmtRate(median(reads16), "/s")))
	}
	// A listing is a time: the ratio is the peer's time over AgentFS's,
	// so that ≥ 1.0× means AgentFS is as fast.
	agentMS, peerMS := median(listMS), median(peer.ListMS)
	lr := rateRow(fmt.Sprintf("listing %d files with their metadata vs Turso's readdirPlus", c.tursoList), 1/agentMS, 1/peerMS, "", listBudget)
	lr.agentfs, lr.direct = fmt.Sprintf("%.1f ms", agentMS), fmt.Sprintf("%.1f ms (%s)", peerMS, peerName)
	rows = append(rows, lr)
	slimAgent := median(slimMS)
	sr := rateRow(fmt.Sprintf("listing %d files with fields=%s vs Turso's readdirPlus", c.tursoList, statFields), 1/slimAgent, 1/peerMS, "", listBudget)
	sr.agentfs, sr.direct = fmt.Sprintf("%.1f ms", slimAgent), fmt.Sprintf("%.1f ms (%s)", peerMS, peerName)
	rows = append(rows, sr)
	b.notes = append(b.notes, fmt.Sprintf("turso: medians of %d rounds (%d writes, %d reads each) and of %d listings; AgentFS through its Go client, listing in pages of 1,000; the peer is agentfs-sdk on Node %s, its SQLite file in the temporary directory.",
		c.tursoRounds, c.tursoWrites, c.tursoReads, 2*c.tursoRounds, peer.Node))
	return rows, nil
}

// goClient is AgentFS's Go client of base, on the bench's transport.
func (b *bench) goClient(base string) (*client.Client, error) {
	tr, err := newTransport()
	if err != nil {
		return nil, err
	}
	return client.New(base, b.cfg.token, client.WithHTTPClient(&http.Client{Transport: tr}))
}

// readRate reads n files' whole content from workers at once and returns
// the reads per second; each must be 4 KiB.
func readRate(ctx context.Context, fc *client.Client, workers, n int, pick func(i int) string) (float64, error) {
	var next atomic.Int64
	t0 := time.Now()
	err := inParallel(ctx, workers, workers, func(ctx context.Context, _ int) error {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			ct, err := fc.FileContent(ctx, pick(i), client.ContentOptions{})
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			got, err := io.Copy(io.Discard, ct)
			ct.Close()
			if err != nil || got != 4<<10 {
				return fmt.Errorf("read %d bytes of 4 KiB: %v", got, err)
			}
		}
		return nil
	})
	return float64(n) / time.Since(t0).Seconds(), err
}

// statFields are the File members a readdir with stats gives: what the
// peer's readdirPlus answers (name, size, mode, mtime, type).
const statFields = "path,size_bytes,mode,mtime,kind"

// listTimes writes the listed folder (16 at once) and times n listings of
// it, every page, in milliseconds: whole files, then with statFields
// alone, alternating.
func (b *bench) listTimes(ctx context.Context, fc *client.Client, data []byte, n int) (whole, slim []float64, err error) {
	want := b.cfg.tursoList
	prefix := b.path("turso/list/")
	var next atomic.Int64
	err = inParallel(ctx, 16, 16, func(ctx context.Context, _ int) error {
		for i := int(next.Add(1) - 1); i < want; i = int(next.Add(1) - 1) {
			if _, err := fc.PutFile(ctx, fmt.Sprintf("%sf%05d.bin", prefix, i), bytes.NewReader(data), client.PutOptions{}); err != nil {
				return fmt.Errorf("seed the listing: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for range n {
		for _, fields := range [][]string{nil, strings.Split(statFields, ",")} {
			t0 := time.Now()
			got := 0
			for f, err := range fc.AllFiles(ctx, client.ListOptions{Prefix: prefix, Limit: 1000, Fields: fields}) {
				if err != nil {
					return nil, nil, fmt.Errorf("list: %w", err)
				}
				if f.SizeBytes != int64(len(data)) || f.Path == "" || f.MTime.IsZero() {
					return nil, nil, fmt.Errorf("list: %q has %d bytes, mtime %v", f.Path, f.SizeBytes, f.MTime)
				}
				got++
			}
			ms := float64(time.Since(t0).Microseconds()) / 1000
			if got != want {
				return nil, nil, fmt.Errorf("listed %d files, want %d", got, want)
			}
			if fields == nil {
				whole = append(whole, ms)
			} else {
				slim = append(slim, ms)
			}
		}
	}
	return whole, slim, nil
}

// runTurso runs tools/node/turso-bench.mjs with its SQLite file in a new
// temporary folder.
func (b *bench) runTurso(ctx context.Context) (*tursoResult, error) {
	c := b.cfg
	dir, err := os.MkdirTemp("", "agentfs-bench-turso-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script, err := filepath.Abs(filepath.Join("tools", "node", "turso-bench.mjs"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.nodeBin, script, dir, fmt.Sprint(c.tursoWrites), fmt.Sprint(c.tursoReads),
		fmt.Sprint(c.tursoList), fmt.Sprint(c.tursoRounds))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s (run from the repository's root, with tools/node installed: make tools): %v: %s", c.nodeBin, script, err, oneLine(stderr.String(), 300))
	}
	var res tursoResult
	if err := json.Unmarshal(outb, &res); err != nil {
		return nil, fmt.Errorf("turso-bench.mjs printed %q: %w", oneLine(string(outb), 200), err)
	}
	if len(res.Writes) == 0 || len(res.Reads1) == 0 || len(res.Reads16) == 0 || len(res.ListMS) == 0 {
		return nil, fmt.Errorf("turso-bench.mjs printed no measurement: %s", oneLine(string(outb), 200))
	}
	return &res, nil
}

// rounded is vs to whole numbers, for the log.
func rounded(vs []float64) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v + 0.5)
	}
	return out
}
