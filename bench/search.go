package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// searchSelective is how many of the seeded files hold the selective
// pattern (DESIGN §11: "≤ 20 files match").
const searchSelective = 20

// search: content search (GET /v1/search) for a selective pattern over
// -search-small and then -search-large text files of about 4 KiB, against
// ripgrep over the same files in a local directory with the page cache
// warm. The files are seeded with SQL (their rows and their search text,
// as an upload writes them: AgentFS searches the text Postgres holds, so
// their bytes in S3 play no part), and written to a temporary directory
// for rg. searchSelective of the files of the small point hold one line
// with the pattern, so the same 20 match at each point.
func (b *bench) search(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("search p50, a pattern in %d files, %s → %s text files of ~4 KiB", searchSelective, count(c.searchSmall), count(c.searchLarge))
	if c.databaseURL == "" {
		return []row{{name: name, agentfs: "skipped: no -database-url", budget: "≤ 50 ms; ≤ 0.25× rg; flat (≤ 2×)"}}, nil
	}
	rg, err := exec.LookPath("rg")
	if err != nil {
		return []row{{name: name, agentfs: "skipped: no rg on PATH (ensure_deps rg, or apt-get install ripgrep)", budget: "≤ 0.25× rg"}}, nil
	}
	conn, subject, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dir, err := os.MkdirTemp("", "agentfs-bench-search-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	gen := newTextGen(b.tag)
	needle := "needle_" + strings.ReplaceAll(b.tag, "-", "_") + "_selective"
	seeded := 0
	seed := func(upto int) error {
		return b.seedTexts(ctx, conn, subject, dir, gen, needle, &seeded, upto, max(c.searchSmall/searchSelective, 1))
	}
	type point struct{ agentfs, rg time.Duration }
	measure := func() (point, error) {
		var p point
		var err error
		query := "/v1/search?limit=100&prefix=" + url.QueryEscape("bench-search/"+b.tag+"/") + "&q=" + url.QueryEscape(needle)
		p.agentfs, _, _, err = b.timedCalls(ctx, conn, "search_texts", func() error {
			var page struct {
				Data         []struct{ Path string } `json:"data"`
				FilesMatched int                     `json:"files_matched"`
			}
			if _, err := b.api.call(ctx, http.MethodGet, query, nil, 0, nil, &page, http.StatusOK); err != nil {
				return err
			}
			if page.FilesMatched != searchSelective {
				return fmt.Errorf("search for %s matched %d files, want %d", needle, page.FilesMatched, searchSelective)
			}
			return nil
		})
		if err != nil {
			return p, err
		}
		if p.rg, err = timeRipgrep(ctx, rg, needle, dir, c.listCalls); err != nil {
			return p, err
		}
		logf("  %d text files: AgentFS p50 %s, rg p50 %s", seeded, fmtMS(p.agentfs), fmtMS(p.rg))
		return p, nil
	}
	points, err := atPoints([]int{c.searchSmall, c.searchLarge}, "text files", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	small, large := points[0], points[1]
	flat := float64(large.agentfs) / float64(small.agentfs)
	vsRg := float64(large.agentfs) / float64(large.rg)
	verdict := "meets"
	if flat > 2 || vsRg > 0.25 || large.agentfs > 50*time.Millisecond {
		verdict = "misses"
	}
	b.notes = append(b.notes, fmt.Sprintf("search: rg -n over the same files in a local directory (page cache warm) took %s, then %s (p50); AgentFS's ratio to rg at the small point %.2f×.",
		fmtMS(small.rg), fmtMS(large.rg), float64(small.agentfs)/float64(small.rg)))
	return []row{{
		name:    name,
		agentfs: fmt.Sprintf("%s → %s", fmtMS(small.agentfs), fmtMS(large.agentfs)),
		direct:  "rg " + fmtMS(large.rg),
		ratio:   fmt.Sprintf("%.2f× rg; %.2f× flat", vsRg, flat),
		budget:  "≤ 50 ms; ≤ 0.25× rg; flat (≤ 2×)",
		verdict: verdict,
	}}, nil
}

// seedTexts seeds text files up to upto: their files rows and search
// texts in Postgres, and the same bytes under dir for rg. One file in
// every `every` of the first searchSelective×every holds the needle, so
// the same files match at every point.
func (b *bench) seedTexts(ctx context.Context, conn *pgx.Conn, subject, dir string, gen *textGen, needle string, seeded *int, upto, every int) error {
	const chunk = 1000
	for *seeded < upto {
		n := min(chunk, upto-*seeded)
		paths, bodies, sums := make([]string, n), make([]string, n), make([]string, n)
		for i := range n {
			g := *seeded + i
			rel := fmt.Sprintf("d%03d/f%07d.go", g%500, g)
			paths[i] = "bench-search/" + b.tag + "/" + rel
			bodies[i] = gen.text(4096, needle, g%every == every/2 && g/every < searchSelective)
			sum := sha256.Sum256([]byte(bodies[i]))
			sums[i] = hex.EncodeToString(sum[:])
			local := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(local, []byte(bodies[i]), 0o644); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, `
WITH s AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS s(path, body, sha256))
, t AS (INSERT INTO search_texts (blob_key, subject, kind, body)
        SELECT 'bench-search/' || s.sha256, $1, 0, s.body FROM s ON CONFLICT (blob_key) DO NOTHING)
INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key, agent_id, run_id, last_agent_id, last_run_id)
SELECT 'file_search_' || md5(s.path), $1, s.path, octet_length(s.body), 'text/x-go', s.sha256, 'bench-search/' || s.sha256,
       'seed-agent', 'seed-search', 'seed-agent', 'seed-search'
FROM s`, subject, paths, bodies, sums); err != nil {
			return fmt.Errorf("seed search texts: %w", err)
		}
		*seeded += n
	}
	if err := settleTable(ctx, conn, "search_texts"); err != nil {
		return err
	}
	return settleTable(ctx, conn, "files")
}

// timeRipgrep runs rg -n for pattern over dir a few times to warm the page
// cache, then calls times, and returns the p50. rg exits 1 when nothing
// matches, which here is an error: the files hold the pattern.
func timeRipgrep(ctx context.Context, rg, pattern, dir string, calls int) (time.Duration, error) {
	run := func() error {
		out, err := exec.CommandContext(ctx, rg, "-n", "--no-config", pattern, dir).Output()
		if err != nil {
			return fmt.Errorf("rg %s: %w", pattern, err)
		}
		if got := strings.Count(string(out), "\n"); got != searchSelective {
			return fmt.Errorf("rg %s printed %d lines, want %d", pattern, got, searchSelective)
		}
		return nil
	}
	for range 3 {
		if err := run(); err != nil {
			return 0, err
		}
	}
	lat := make([]time.Duration, max(calls/4, 5))
	for i := range lat {
		t0 := time.Now()
		if err := run(); err != nil {
			return 0, err
		}
		lat[i] = time.Since(t0)
	}
	return percentile(lat, 50), nil
}

// textGen makes source-like text from a fixed vocabulary of made-up
// identifiers, so that trigrams spread as they do in real code.
type textGen struct {
	rnd   *rand.Rand
	words []string
}

func newTextGen(tag string) *textGen {
	sum := sha256.Sum256([]byte(tag))
	var seed [32]byte
	copy(seed[:], sum[:])
	g := &textGen{rnd: rand.New(rand.NewChaCha8(seed))}
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for range 4096 {
		n := 3 + g.rnd.IntN(8)
		w := make([]byte, n)
		for i := range w {
			w[i] = letters[g.rnd.IntN(len(letters))]
		}
		g.words = append(g.words, string(w))
	}
	return g
}

func (g *textGen) word() string { return g.words[g.rnd.IntN(len(g.words))] }

// text returns about size bytes of lines; with needle set, one line in the
// middle holds it.
func (g *textGen) text(size int, needle string, withNeedle bool) string {
	var sb strings.Builder
	lines := 0
	for sb.Len() < size {
		if withNeedle && lines == 20 {
			fmt.Fprintf(&sb, "\t// %s marks this file\n", needle)
		}
		fmt.Fprintf(&sb, "func %s(%s, %s int) int { return %s + %s_%s }\n", g.word(), g.word(), g.word(), g.word(), g.word(), g.word())
		lines++
	}
	return sb.String()
}
