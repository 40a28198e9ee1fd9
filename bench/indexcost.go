package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// indexCostBudget is the bound on a 4 KiB text upload's p50 with the
// search index over the same upload's without it (DESIGN §11).
const indexCostBudget = 1.2

// indexCost: POST /v1/files of 4 KiB of source-like text to the server,
// which indexes it for search, against the same to a second server on the
// same Postgres and S3 that indexes nothing (AGENTFS_SEARCH_MAX_FILE_BYTES=0,
// started by scripts/bench.sh; -noindex-url), one upload at a time,
// alternating; the p50s count. The second server still writes the small
// row that marks a blob as not searched, so the ratio is what the text and
// its trigrams cost. Before timing, it checks that the second server's
// upload is indeed not searchable.
func (b *bench) indexCost(ctx context.Context) ([]row, error) {
	c := b.cfg
	const size = 4096
	name := fmt.Sprintf("4 KiB text upload with the search index vs without (AGENTFS_SEARCH_MAX_FILE_BYTES=0), p50 of %d each in %d rounds", c.indexCalls, indexCostRounds)
	if c.noIndexURL == "" {
		return []row{{name: name, agentfs: "skipped: no -noindex-url (scripts/bench.sh starts that server)", budget: fmt.Sprintf("p50 ≤ %g×", indexCostBudget)}}, nil
	}
	tr, err := newTransport()
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	plain := newAPI(c.noIndexURL, c.token, tr)
	if err := b.checkNotIndexed(ctx, plain); err != nil {
		return nil, err
	}
	gen := newTextGen(b.tag + "-indexcost")
	hdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	upload := func(a *api, side string, i int) (time.Duration, error) {
		body := gen.text(size, "", false)[:size]
		t0 := time.Now()
		_, _, err := a.putFile(ctx, b.path(fmt.Sprintf("indexcost/%s/%d.go", side, i)), strings.NewReader(body), size, hdr)
		return time.Since(t0), err
	}
	// indexCostRounds rounds of c.indexCalls uploads each, alternating
	// within a round; the verdict is the median of the rounds' p50
	// ratios, which one slow stretch of the shared machine moves less
	// than it moves one long round.
	var ratios []float64
	var with, without []time.Duration
	for round := range indexCostRounds {
		warmup := 0
		if round == 0 {
			warmup = 10
		}
		w, n, err := alternated(warmup, c.indexCalls,
			func(i int) (time.Duration, error) { return upload(b.api, "indexed", round*(c.indexCalls+10)+i) },
			func(i int) (time.Duration, error) { return upload(plain, "plain", round*(c.indexCalls+10)+i) })
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, float64(percentile(w, 50))/float64(percentile(n, 50)))
		with, without = append(with, w...), append(without, n...)
	}
	w50, n50 := percentile(with, 50), percentile(without, 50)
	logf("  indexed p50 %s (p90 %s), not indexed p50 %s (p90 %s)", fmtMS(w50), fmtMS(percentile(with, 90)), fmtMS(n50), fmtMS(percentile(without, 90)))
	var each []string
	for _, r := range ratios {
		each = append(each, fmt.Sprintf("%.2f×", r))
	}
	b.notes = append(b.notes, fmt.Sprintf("search index cost: both servers share Postgres and S3; uploads alternate, one at a time; rounds' p50 ratios %s; over all rounds p90 %s with the index, %s without.",
		strings.Join(each, ", "), fmtMS(percentile(with, 90)), fmtMS(percentile(without, 90))))
	slices.Sort(ratios)
	r := ratios[len(ratios)/2]
	verdict := "meets"
	if r > indexCostBudget {
		verdict = "misses"
	}
	return []row{{name: name, agentfs: fmt.Sprintf("%s vs %s", fmtMS(w50), fmtMS(n50)),
		ratio: fmt.Sprintf("%.2f× (median of %d rounds)", r, indexCostRounds), budget: fmt.Sprintf("p50 ≤ %g×", indexCostBudget), verdict: verdict}}, nil
}

// indexCostRounds is how many rounds indexCost times.
const indexCostRounds = 5

// checkNotIndexed uploads a text through the server without the index and
// searches for it through the one with it: the file must be counted as
// too large, not matched, or the comparison compares nothing.
func (b *bench) checkNotIndexed(ctx context.Context, plain *api) error {
	word := "unindexed_" + strings.ReplaceAll(b.tag, "-", "_")
	p := b.path("indexcost/check/" + word + ".txt")
	body := "a line with " + word + "\n"
	if _, _, err := plain.putFile(ctx, p, strings.NewReader(body), int64(len(body)), http.Header{"Content-Type": {"text/plain"}}); err != nil {
		return fmt.Errorf("upload to -noindex-url: %w", err)
	}
	var page struct {
		FilesMatched int `json:"files_matched"`
		FilesSkipped struct {
			TooLarge int `json:"too_large"`
		} `json:"files_skipped"`
	}
	query := "/v1/search?prefix=" + url.QueryEscape(p) + "&q=" + url.QueryEscape(word)
	if _, err := b.api.call(ctx, http.MethodGet, query, nil, 0, nil, &page, http.StatusOK); err != nil {
		return err
	}
	if page.FilesMatched != 0 || page.FilesSkipped.TooLarge != 1 {
		return fmt.Errorf("the server at -noindex-url indexes its uploads (search matched %d files, skipped %d as too large; want 0 and 1): start it with AGENTFS_SEARCH_MAX_FILE_BYTES=0",
			page.FilesMatched, page.FilesSkipped.TooLarge)
	}
	return nil
}
