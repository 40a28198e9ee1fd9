package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
)

// replay: keyed 4 KiB uploads, then the same requests again; the replays
// must not add an object to the server's bucket, and their p50 must be at
// most half a first upload's.
func (b *bench) replay(ctx context.Context) ([]row, error) {
	c := b.cfg
	const size = 4096
	n := c.replayN
	req := func(i int) (string, []byte, http.Header) {
		h := http.Header{"Content-Type": {"application/octet-stream"}}
		h.Set("Idempotency-Key", fmt.Sprintf("bench-%s-replay-%d", b.tag, i))
		return b.path(fmt.Sprintf("replay/%d", i)), b.data.bytes(int64(i)*size, size), h
	}
	timedPut := func(i int) (*file, *http.Response, time.Duration, error) {
		p, data, h := req(i)
		t0 := time.Now()
		f, resp, err := b.api.putFile(ctx, p, bytesReader(data), size, h)
		return f, resp, time.Since(t0), err
	}
	ids := make([]string, n)
	first := make([]time.Duration, n)
	for i := range n {
		f, resp, took, err := timedPut(i)
		if err != nil {
			return nil, err
		}
		first[i] = took
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			return nil, fmt.Errorf("first keyed upload %d answered as a replay", i)
		}
		ids[i] = f.ID
	}
	before, err := b.countObjects(ctx)
	if err != nil {
		return nil, err
	}
	replays := make([]time.Duration, n)
	for i := range n {
		f, resp, took, err := timedPut(i)
		if err != nil {
			return nil, fmt.Errorf("replay %d: %w", i, err)
		}
		replays[i] = took
		if resp.Header.Get("Idempotent-Replayed") != "true" || f.ID != ids[i] {
			return nil, fmt.Errorf("replay %d: Idempotent-Replayed %q, file %s (first was %s)", i, resp.Header.Get("Idempotent-Replayed"), f.ID, ids[i])
		}
	}
	after, err := b.countObjects(ctx)
	if err != nil {
		return nil, err
	}
	fp, rp := percentile(first, 50), percentile(replays, 50)
	logf("  replay p50 %s, first p50 %s; objects in bucket %s: %d before the replays, %d after", fmtMS(rp), fmtMS(fp), c.s3Bucket, before, after)
	r := float64(rp) / float64(fp)
	verdict := "meets"
	if before != after || r > 0.5 {
		verdict = "misses"
	}
	return []row{{
		name:    fmt.Sprintf("keyed 4 KiB replay p50 vs first upload p50, %d each", n),
		agentfs: fmt.Sprintf("%s vs %s; S3 objects %d → %d", fmtMS(rp), fmtMS(fp), before, after),
		ratio:   fmt.Sprintf("%.2f×", r),
		budget:  "no S3 write; ≤ 0.5×",
		verdict: verdict,
	}}, nil
}

// countObjects counts the objects in the server's bucket.
func (b *bench) countObjects(ctx context.Context) (int, error) {
	n := 0
	for o := range b.s3.ListObjects(ctx, b.cfg.s3Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return 0, fmt.Errorf("list bucket %s: %w", b.cfg.s3Bucket, o.Err)
		}
		n++
	}
	return n, nil
}

// batchBudget is the least ratio of a batch's items/s to the same
// puts as standalone uploads from 16 clients; the budget names it for 1 KiB
// items, so other sizes are reported without a verdict.
const (
	batchBudget     = 1.5
	batchBudgetSize = 1 << 10
)

// batchMemoryBudget bounds the server's RSS growth while a batch runs, as
// a multiple of its body; the budget names it for a batch of 64 MiB of
// JSON (1000 items of 64 KiB), so smaller batches are reported in a note.
const (
	batchMemoryBudget   = 2
	batchMemoryMinBytes = 32 << 20
)

// batches: one batch per item size.
func (b *bench) batches(ctx context.Context) ([]row, error) {
	var rows []row
	for _, size := range b.cfg.batchSizes {
		r, err := b.batch(ctx, size)
		rows = append(rows, r...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// batchMemory is the row (or, for a small body, the note) of the server's
// RSS growth while a batch of body bytes of JSON was admitted and ran.
func (b *bench) batchMemory(n int, label string, body, idle, peak int64) []row {
	grow := max(0, peak-idle)
	logf("  batch of %d × %s: %s of JSON; server RSS idle %s, peak %s (+%s, %.2f× the body)",
		n, label, fmtSize(body), fmtMiB(idle), fmtMiB(peak), fmtMiB(grow), float64(grow)/float64(body))
	if body < batchMemoryMinBytes {
		b.notes = append(b.notes, fmt.Sprintf("batch of %d × %s: %s of JSON; server RSS %s before, peak %s while it ran.",
			n, label, fmtSize(body), fmtMiB(idle), fmtMiB(peak)))
		return nil
	}
	verdict := "meets"
	if grow > batchMemoryBudget*body {
		verdict = "misses"
	}
	return []row{{
		name:    fmt.Sprintf("server RSS growth, batch of %d × %s (%s of JSON)", n, label, fmtSize(body)),
		agentfs: fmt.Sprintf("+%s (%.2f× the body; idle %s, peak %s)", fmtMiB(grow), float64(grow)/float64(body), fmtMiB(idle), fmtMiB(peak)),
		budget:  fmt.Sprintf("≤ %d× the body (+%s)", batchMemoryBudget, fmtMiB(batchMemoryBudget*body)),
		verdict: verdict,
	}}
}

// batch: one batch of utf8 puts of size bytes each, waited for, against
// the same number of standalone uploads from concurrent clients. Contents
// are made before the clock starts, on both sides.
func (b *bench) batch(ctx context.Context, size int64) ([]row, error) {
	c := b.cfg
	n := c.batchItems
	name := fmt.Sprintf("batch of %d × %s puts, items/s", n, fmtSize(size))
	textHdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	label := fmtSize(size)

	contents := make([][]byte, n)
	for i := range contents {
		contents[i] = b.data.text(int64(i)*size, size)
	}
	sn, sd, _, err := concurrently(ctx, c.smallClients, 0, n, func(ctx context.Context, i int) error {
		_, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("standalone-%s/%d", label, i)), bytesReader(contents[i]), size, textHdr)
		return err
	})
	if err != nil {
		return nil, err
	}
	sr := float64(sn) / sd.Seconds()
	standalone := fmtRate(sr, "/s") + fmt.Sprintf(" (AgentFS standalone, %d clients)", c.smallClients)
	logf("  %d standalone %s uploads from %d clients: %s, %.0f/s", sn, label, c.smallClients, sd.Round(time.Millisecond), sr)

	type op struct {
		Op       string `json:"op"`
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	ops := make([]op, n)
	for i := range ops {
		ops[i] = op{Op: "put", Path: b.path(fmt.Sprintf("batch-%s/%d", label, i)), Content: string(contents[i]), Encoding: "utf8"}
	}
	body, err := json.Marshal(map[string]any{"operations": ops})
	if err != nil {
		return nil, err
	}
	// The server reads the whole batch body before it answers, then runs
	// its items: its RSS growth meanwhile is held to twice the body.
	var mem *sampler
	var idle int64
	if c.serverPID > 0 {
		if idle, err = idleRSS(c.serverPID, 10, 20*time.Millisecond); err != nil {
			return nil, err
		}
		mem = startSampler(c.serverPID, 10*time.Millisecond)
		defer func() {
			if mem != nil {
				_, _, _ = mem.finish()
			}
		}()
	}
	t0 := time.Now()
	var bt batch
	// wait=30 answers as soon as the batch ends (the server is told when it
	// does), so no polling interval rounds the time up.
	_, err = b.api.call(ctx, http.MethodPost, "/v1/batch?wait=30", bytesReader(body), int64(len(body)),
		jsonHeader(fmt.Sprintf("bench-%s-batch-%d", b.tag, size)), &bt, http.StatusAccepted, http.StatusOK)
	var se *statusError
	if errors.As(err, &se) && (se.status == http.StatusNotFound || se.status == http.StatusMethodNotAllowed || se.status == http.StatusNotImplemented) {
		logf("  POST /v1/batch answered %d: not served yet", se.status)
		return []row{{name: name, agentfs: fmt.Sprintf("not served yet (POST /v1/batch: %d)", se.status), direct: standalone, budget: "reported"}}, nil
	}
	if errors.As(err, &se) && se.status == http.StatusRequestEntityTooLarge {
		return nil, fmt.Errorf("the batch body (%s) is over the server's AGENTFS_BATCH_MAX_BYTES (scripts/bench.sh raises it): %w", fmtSize(int64(len(body))), err)
	}
	if err != nil {
		return nil, err
	}
	for !terminal(bt.Status) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := b.api.call(ctx, http.MethodGet, "/v1/batch/"+url.PathEscape(bt.ID), nil, 0, nil, &bt, http.StatusOK); err != nil {
			return nil, err
		}
	}
	d := time.Since(t0)
	if bt.Counts.Succeeded != n {
		detail := ""
		for _, it := range bt.Items {
			if it.Error != nil {
				detail = ": first item error " + it.Error.Code + " " + it.Error.Detail
				break
			}
		}
		return nil, fmt.Errorf("batch %s ended %s with %d of %d items succeeded%s", bt.ID, bt.Status, bt.Counts.Succeeded, n, detail)
	}
	var rows []row
	if mem != nil {
		peak, _, err := mem.finish()
		mem = nil
		if err != nil {
			return nil, err
		}
		rows = b.batchMemory(n, label, int64(len(body)), idle, peak)
	}
	br := float64(n) / d.Seconds()
	logf("  batch of %d × %s (%s of JSON): %s, %.0f items/s", n, label, fmtSize(int64(len(body))), d.Round(time.Millisecond), br)
	r := row{name: name, agentfs: fmtRate(br, "/s"), direct: standalone, ratio: ratio(br, sr), budget: "reported"}
	if size == batchBudgetSize {
		r.budget, r.verdict = fmt.Sprintf("≥ %g×", batchBudget), "misses"
		if br/sr >= batchBudget {
			r.verdict = "meets"
		}
	}
	return append([]row{r}, rows...), nil
}

func terminal(status string) bool {
	switch status {
	case "succeeded", "partially_succeeded", "failed", "canceled":
		return true
	}
	return false
}
