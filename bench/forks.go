package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// forkRounds is how many forks (and merges) the forks measurement times.
const forkRounds = 3

// forks: a fork of -fork-files files of 1 KiB (POST /v1/forks), then a
// merge back of -merge-changes files changed in the fork (POST
// /v1/forks/{id}/merge), each timed as the client sees it, forkRounds
// times; p50s against DESIGN §11 (fork p50 ≤ 2 s; merge ≤ 1 s, one
// transaction). Neither makes an S3 request: the forked and merged files
// share their blobs (TestForkAndMergeREST counts the requests through a
// proxy).
func (b *bench) forks(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("fork of %s files; merge of %s changes", count(c.forkFiles), count(c.mergeChanges))
	src := "bench-forks/" + b.tag + "/src/"
	if err := b.putMany(ctx, src, c.forkFiles, "base"); err != nil {
		return nil, err
	}
	var forkTimes, mergeTimes []time.Duration
	for round := range forkRounds {
		dst := fmt.Sprintf("bench-forks/%s/fork%d/", b.tag, round)
		body, _ := json.Marshal(map[string]string{"from": src, "to": dst})
		var f struct {
			ID    string `json:"id"`
			Files int    `json:"files"`
		}
		start := time.Now()
		if _, err := b.api.call(ctx, http.MethodPost, "/v1/forks", bytesReader(body), int64(len(body)),
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {idemKey(b.tag, "fork", round)}}, &f, http.StatusCreated); err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		forkTimes = append(forkTimes, time.Since(start))
		if f.Files != c.forkFiles {
			return nil, fmt.Errorf("fork copied %d files, want %d", f.Files, c.forkFiles)
		}
		if err := b.putMany(ctx, dst, c.mergeChanges, fmt.Sprintf("fork %d", round)); err != nil {
			return nil, err
		}
		var m struct {
			Applied []json.RawMessage `json:"applied"`
		}
		start = time.Now()
		if _, err := b.api.call(ctx, http.MethodPost, "/v1/forks/"+url.PathEscape(f.ID)+"/merge", bytesReader([]byte(`{"on_conflict":"fork"}`)), -1,
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {idemKey(b.tag, "merge", round)}}, &m, http.StatusOK); err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		mergeTimes = append(mergeTimes, time.Since(start))
		if len(m.Applied) != c.mergeChanges {
			return nil, fmt.Errorf("merge applied %d changes, want %d", len(m.Applied), c.mergeChanges)
		}
		logf("  round %d: fork %s, merge %s", round, fmtMS(forkTimes[round]), fmtMS(mergeTimes[round]))
	}
	fork, merge := percentile(forkTimes, 50), percentile(mergeTimes, 50)
	verdict := "meets"
	if fork > 2*time.Second || merge > time.Second {
		verdict = "misses"
	}
	return []row{{
		name:    name,
		agentfs: fmt.Sprintf("fork p50 %s; merge p50 %s", fmtMS(fork), fmtMS(merge)),
		direct:  "—",
		ratio:   "0 S3 requests (tested)",
		budget:  "fork p50 ≤ 2 s; merge ≤ 1 s, one transaction",
		verdict: verdict,
	}}, nil
}

// putMany writes n files of 1 KiB under prefix (their bytes named by
// content, so each call replaces them with new bytes) through batches of
// up to 1000 puts, waited for.
func (b *bench) putMany(ctx context.Context, prefix string, n int, content string) error {
	for from := 0; from < n; from += 1000 {
		var ops []map[string]any
		for i := from; i < min(n, from+1000); i++ {
			ops = append(ops, map[string]any{"op": "put", "path": fmt.Sprintf("%s%05d.txt", prefix, i),
				"content": fmt.Sprintf("%-1024s", content+" "+prefix), "if_exists": "replace"})
		}
		body, _ := json.Marshal(map[string]any{"operations": ops})
		var bt struct {
			Status string `json:"status"`
		}
		if _, err := b.api.call(ctx, http.MethodPost, "/v1/batch?wait=30", bytesReader(body), int64(len(body)),
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {idemKey(b.tag, "puts-"+strings.ReplaceAll(prefix, "/", "-"), from)}},
			&bt, http.StatusOK, http.StatusCreated, http.StatusAccepted); err != nil {
			return fmt.Errorf("seed %s: %w", prefix, err)
		}
		if bt.Status != "succeeded" {
			return fmt.Errorf("seed %s: the batch is %s after 30 s", prefix, bt.Status)
		}
	}
	return nil
}

// idemKey is an Idempotency-Key of this run (keys take no "/").
func idemKey(tag, what string, n int) string { return fmt.Sprintf("%s-%s-%d", tag, what, n) }
