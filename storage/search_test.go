package storage_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// grepPaths searches the subject "s" and answers "path:line" of every
// match, over every page.
func grepPaths(t *testing.T, store *storage.Store, q agentfs.Search) []string {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	var out []string
	for {
		page, err := store.Search(context.Background(), "s", q)
		if err != nil {
			t.Fatalf("search %q: %v", q.Pattern, err)
		}
		for _, m := range page.Matches {
			out = append(out, fmt.Sprintf("%s:%d", m.Path, m.Line))
		}
		if page.Next == nil {
			return out
		}
		q.After = page.Next
	}
}

func mustPut(t *testing.T, store *storage.Store, path, body string, replace bool) *agentfs.File {
	t.Helper()
	res, err := putFile(context.Background(), store, put(path, replace), strings.NewReader(body), alone)
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return res.File
}

func wantGrep(t *testing.T, store *storage.Store, pattern string, want ...string) {
	t.Helper()
	got := grepPaths(t, store, agentfs.Search{Pattern: pattern})
	if !slices.Equal(got, want) {
		t.Fatalf("grep %q = %q, want %q", pattern, got, want)
	}
}

// TestSearchReadsItsWrites holds every statement that changes which bytes
// are current to the index: a search right after it sees the new state.
func TestSearchReadsItsWrites(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	a := mustPut(t, store, "a.txt", "alpha one\nbeta two\n", false)
	wantGrep(t, store, "beta", "a.txt:2")

	// A replace matches only its new bytes.
	mustPut(t, store, "a.txt", "gamma three\n", true)
	wantGrep(t, store, "beta")
	wantGrep(t, store, "gamma", "a.txt:1")

	// A revert shares the old blob, and with it its index row.
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := store.RevertFileTx(ctx, tx, agentfs.Revert{Subject: "s", FileID: a.ID, Version: 1}, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantGrep(t, store, "beta", "a.txt:2")
	wantGrep(t, store, "gamma")

	// A move: the same bytes at a new path.
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := store.MoveFileTx(ctx, tx, agentfs.Move{Subject: "s", FileID: a.ID, Path: "b/moved.txt"}, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantGrep(t, store, "beta", "b/moved.txt:2")

	// A copy shares the blob too.
	p, err := store.PrepareCopy(ctx, a.ID, put("c.txt", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := p.Apply(ctx, tx, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p.Finish(ctx, nil)
	wantGrep(t, store, "beta", "b/moved.txt:2", "c.txt:2")

	// A delete hides it; a restore shows it again.
	if _, err := deleteFile(ctx, store, "s", a.ID); err != nil {
		t.Fatal(err)
	}
	wantGrep(t, store, "beta", "c.txt:2")
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, _, err := store.RestoreFileTx(ctx, tx, "s", a.ID, agentfs.Origin{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantGrep(t, store, "beta", "b/moved.txt:2", "c.txt:2")

	// An expired file matches nothing.
	past := time.Now().Add(-time.Minute)
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE files SET expires_at = $1 WHERE path = 'c.txt'`, past)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantGrep(t, store, "beta", "b/moved.txt:2")
}

func TestSearchSkipsAndCounts(t *testing.T) {
	cfg := setupConfig(t)
	cfg.SearchMaxFileBytes = 16
	store := openConfig(t, cfg)
	mustPut(t, store, "bin.dat", "needle\x00x", false)
	mustPut(t, store, "latin1.txt", "needle \xe9", false)
	mustPut(t, store, "big.txt", strings.Repeat("needle ", 10), false)
	mustPut(t, store, "ok.txt", "a needle\n", false)
	mustPut(t, store, "empty.txt", "", false)
	page, err := store.Search(context.Background(), "s", agentfs.Search{Pattern: "needle", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Matches) != 1 || page.Matches[0].Path != "ok.txt" || page.Matches[0].Column != 3 {
		t.Fatalf("matches %+v, want ok.txt:1:3 only", page.Matches)
	}
	if page.SkippedBinary != 2 || page.SkippedTooLarge != 1 || page.FilesMatched != 1 || !page.IndexComplete {
		t.Fatalf("page %+v: want 2 binary, 1 too large, 1 matched, index complete", page)
	}
}

func TestSearchPagesNeverLoseALine(t *testing.T) {
	store, _ := setup(t)
	var want []string
	for f := range 5 {
		var b strings.Builder
		for l := 1; l <= 7; l++ {
			if l%2 == 1 {
				fmt.Fprintf(&b, "hit %d\n", l)
				want = append(want, fmt.Sprintf("f%d.txt:%d", f, l))
			} else {
				b.WriteString("miss\n")
			}
		}
		mustPut(t, store, fmt.Sprintf("f%d.txt", f), b.String(), false)
	}
	for _, limit := range []int{1, 3, 4, 100} {
		got := grepPaths(t, store, agentfs.Search{Pattern: "hit", Limit: limit, Context: 1})
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %q, want %q", limit, got, want)
		}
	}
	var last *agentfs.SearchPage
	q := agentfs.Search{Pattern: "hit", Limit: 3}
	for {
		page, err := store.Search(context.Background(), "s", q)
		if err != nil {
			t.Fatal(err)
		}
		last = page
		if page.Next == nil {
			break
		}
		q.After = page.Next
	}
	if last.FilesMatched != 5 || last.FilesSearched != 5 {
		t.Fatalf("last page counts %d matched, %d searched; want 5 and 5", last.FilesMatched, last.FilesSearched)
	}
}

func TestSearchScope(t *testing.T) {
	store, _ := setup(t)
	for _, p := range []string{"reports/a.txt", "reports-old/b.txt", "src/x.go", "src/deep/y.go", "other.go"} {
		mustPut(t, store, p, "needle\n", false)
	}
	for _, c := range []struct {
		q    agentfs.Search
		want []string
	}{
		{agentfs.Search{Prefix: "reports/"}, []string{"reports/a.txt:1"}},
		{agentfs.Search{Prefix: "reports"}, []string{"reports-old/b.txt:1", "reports/a.txt:1"}},
		{agentfs.Search{Glob: "**/*.go"}, []string{"other.go:1", "src/deep/y.go:1", "src/x.go:1"}},
		{agentfs.Search{Glob: "src/*.go"}, []string{"src/x.go:1"}},
		{agentfs.Search{Prefix: "reports/", Glob: "src/**"}, nil},
		{agentfs.Search{Within: []string{"reports"}}, []string{"reports/a.txt:1"}},
		{agentfs.Search{Within: []string{"src/", "other.go"}}, []string{"other.go:1", "src/deep/y.go:1", "src/x.go:1"}},
		{agentfs.Search{RunID: "nope"}, nil},
		{agentfs.Search{RunID: "run", Prefix: "src/deep"}, []string{"src/deep/y.go:1"}},
	} {
		c.q.Pattern = "needle"
		if got := grepPaths(t, store, c.q); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.q, got, c.want)
		}
	}
}

// TestSearchTimesOut holds a page to Config.SearchTimeout: a statement
// that runs past it is cancelled in Postgres and the search is too broad.
func TestSearchTimesOut(t *testing.T) {
	cfg := setupConfig(t)
	cfg.SearchTimeout = 200 * time.Millisecond
	store := openConfig(t, cfg)
	mustPut(t, store, "a.txt", "needle\n", false)
	store.SetSearchHook(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_sleep(30)")
		return err
	})
	start := time.Now()
	_, err := store.Search(context.Background(), "s", agentfs.Search{Pattern: "needle", Limit: 10})
	if !errors.Is(err, agentfs.ErrSearchTooBroad) {
		t.Fatalf("err %v, want ErrSearchTooBroad", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the search took %v: the statement was not cancelled", d)
	}
}

// TestIndexOldFiles builds the index for files written before it existed:
// their rows removed as if never written, search says it is incomplete,
// then the backfill indexes them and says it is complete.
func TestIndexOldFiles(t *testing.T) {
	ctx := context.Background()
	cfg := setupConfig(t)
	store := openConfig(t, cfg)
	for k := range 70 {
		mustPut(t, store, fmt.Sprintf("old%02d.txt", k), fmt.Sprintf("line\nold needle %d\n", k), false)
	}
	mustPut(t, store, "old.bin", "x\x00", false)
	if err := store.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM search_texts; UPDATE search_backfill SET done_at = NULL`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	store = openConfig(t, cfg) // a fresh instance reads the state again
	page, err := store.Search(ctx, "s", agentfs.Search{Pattern: "needle", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if page.IndexComplete || len(page.Matches) != 0 {
		t.Fatalf("before the backfill: %d matches, complete %v; want none, incomplete", len(page.Matches), page.IndexComplete)
	}
	done, err := store.IndexOldFiles(ctx)
	if err != nil || !done {
		t.Fatalf("IndexOldFiles = %v, %v", done, err)
	}
	page, err = store.Search(ctx, "s", agentfs.Search{Pattern: "needle", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !page.IndexComplete || len(page.Matches) != 70 || page.SkippedBinary != 1 {
		t.Fatalf("after the backfill: %d matches, %d binary, complete %v; want 70, 1, complete",
			len(page.Matches), page.SkippedBinary, page.IndexComplete)
	}
}

func setupConfig(t *testing.T) storage.Config {
	t.Helper()
	t.Parallel()
	return storagetest.Config(t)
}

func openConfig(t *testing.T, cfg storage.Config) *storage.Store {
	t.Helper()
	return storagetest.OpenConfig(t, cfg)
}

// searchPages searches the subject "s" and answers every page.
func searchPages(t *testing.T, store *storage.Store, q agentfs.Search) []*agentfs.SearchPage {
	t.Helper()
	var out []*agentfs.SearchPage
	for {
		page, err := store.Search(context.Background(), "s", q)
		if err != nil {
			t.Fatalf("search %+v: %v", q, err)
		}
		out = append(out, page)
		if page.Next == nil {
			return out
		}
		q.After = page.Next
	}
}

// TestSearchIndexLookupAndWalkAgree holds the two ways a page finds its
// candidates to the same answers, page by page and cursor by cursor: the
// blobs the trigram index lists (when there are at most so many), and the
// walk of the files in scope. The files include a copy sharing a blob, a
// deleted file and an old version whose blobs still match, another
// subject's file, paths in and out of a prefix and a grant.
func TestSearchIndexLookupAndWalkAgree(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	for k := range 12 {
		body := fmt.Sprintf("common line %d\nplain text\n", k)
		if k%4 == 1 {
			body += "the Needle is here\nand a needle there\ncommon again\n"
		}
		mustPut(t, store, fmt.Sprintf("%s/f%02d.txt", []string{"src", "docs", "src/deep"}[k%3], k), body, false)
	}
	gone := mustPut(t, store, "src/gone.txt", "needle of a deleted file\n", false)
	if _, err := deleteFile(ctx, store, "s", gone.ID); err != nil {
		t.Fatal(err)
	}
	mustPut(t, store, "docs/replaced.txt", "an old needle\n", false)
	mustPut(t, store, "docs/replaced.txt", "common and new\n", true)
	first := mustPut(t, store, "src/copied.txt", "needle to copy\ncommon\n", false)
	p, err := store.PrepareCopy(ctx, first.ID, put("docs/copy.txt", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WithTx(ctx, func(tx pgx.Tx) error { _, _, err := p.Apply(ctx, tx, agentfs.Origin{}); return err }); err != nil {
		t.Fatal(err)
	}
	p.Finish(ctx, nil)
	other := put("src/other.txt", false)
	other.Subject = "s2"
	if _, err := putFile(ctx, store, other, strings.NewReader("needle of another subject\n"), alone); err != nil {
		t.Fatal(err)
	}

	queries := []agentfs.Search{
		{Pattern: "needle"}, {Pattern: "needle", IgnoreCase: true}, {Pattern: "common"},
		{Pattern: "needle|common"}, {Pattern: "n.edle"}, {Pattern: "ne.dl"}, {Pattern: "absent_word"},
		{Pattern: "needle", Limit: 1}, {Pattern: "common", Limit: 2, Context: 1},
		{Pattern: "needle", Prefix: "src/"}, {Pattern: "needle", IgnoreCase: true, Within: []string{"docs", "src/deep/"}},
		{Pattern: "needle", Glob: "**/*.txt", RunID: "run"},
	}
	// 0 is the default bound; 3 lets the selective patterns through the
	// lookup and sends the broad ones to the walk; -1 always walks.
	for _, q := range queries {
		if q.Limit == 0 {
			q.Limit = 100
		}
		store.SetSearchKeys(-1)
		walked := searchPages(t, store, q)
		for _, keys := range []int{0, 3} {
			store.SetSearchKeys(keys)
			if got := searchPages(t, store, q); !reflect.DeepEqual(got, walked) {
				t.Errorf("%+v with at most %d keys:\n%s\nwalking:\n%s", q, keys, dumpPages(got), dumpPages(walked))
			}
		}
	}

	// Both ways were taken: "needle" (5 blobs of s: 3 live texts, the deleted
	// and the replaced file's) by the lookup under the default bound and by
	// the walk under 3; "common" (every file) by the walk under 3; "ne.dl"
	// (no run of three letters to look up) by the walk.
	cases := []struct {
		pattern        string
		keys           int
		byKeys, walked int64
	}{{"needle", 0, 1, 0}, {"needle", 3, 0, 1}, {"common", 3, 0, 1}, {"absent_word", 3, 1, 0}, {"ne.dl", 0, 0, 1}}
	for _, c := range cases {
		store.SetSearchKeys(c.keys)
		before := store.Counters()
		searchPages(t, store, agentfs.Search{Pattern: c.pattern, Limit: 100})
		after := store.Counters()
		if by, w := after.SearchByKeys-before.SearchByKeys, after.SearchWalks-before.SearchWalks; by != c.byKeys || w != c.walked {
			t.Errorf("%q with at most %d keys: %d pages by keys and %d walks, want %d and %d", c.pattern, c.keys, by, w, c.byKeys, c.walked)
		}
	}
}

func dumpPages(pages []*agentfs.SearchPage) string {
	var b strings.Builder
	for _, p := range pages {
		fmt.Fprintf(&b, "  matched %d searched %d next %+v\n", p.FilesMatched, p.FilesSearched, p.Next)
		for _, m := range p.Matches {
			fmt.Fprintf(&b, "    %s:%d:%d %q %q %q\n", m.Path, m.Line, m.Column, m.Text, m.Before, m.After)
		}
	}
	return b.String()
}

// TestSearchPlansForItsArguments: a search's statements are planned for
// their own arguments every time, never by the generic plan of a cached
// statement, which does not know how few blobs or skipped files there are
// and walks every file under the prefix.
func TestSearchPlansForItsArguments(t *testing.T) {
	store, _ := setup(t)
	mustPut(t, store, "a.txt", "needle\n", false)
	var mode string
	store.SetSearchHook(func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode)
	})
	for range 7 { // past the five runs after which Postgres may choose a generic plan
		wantGrep(t, store, "needle", "a.txt:1")
		if mode != "force_custom_plan" {
			t.Fatalf("plan_cache_mode in a search is %q, want force_custom_plan", mode)
		}
	}
}

// TestSearchPendingSurvivesACrash: a write records its text pending (out
// of the trigram index) and is searchable at once; a move that never
// commits (a crash between the write and the move) leaves it pending and
// searchable; the next mover's run puts it into the index, where the
// search still finds it.
func TestSearchPendingSurvivesACrash(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	f := mustPut(t, store, "p/pending.txt", "one\nzebra_pending_word two\n", false)
	kindOf := func() int {
		t.Helper()
		var kind int
		if err := store.WithTx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT t.kind FROM search_texts t JOIN files f ON f.blob_key = t.blob_key WHERE f.id = $1`, f.ID).Scan(&kind)
		}); err != nil {
			t.Fatal(err)
		}
		return kind
	}
	if k := kindOf(); k != 3 {
		t.Fatalf("kind after the write = %d, want 3 (pending)", k)
	}
	wantGrep(t, store, "zebra_pending", "p/pending.txt:2")

	crash := errors.New("crash before commit")
	err := store.WithTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE search_texts SET kind = 0 WHERE kind = 3`)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			t.Error("the move found nothing pending")
		}
		return crash
	})
	if !errors.Is(err, crash) {
		t.Fatalf("move = %v, want the crash", err)
	}
	if k := kindOf(); k != 3 {
		t.Fatalf("kind after a move that did not commit = %d, want 3", k)
	}
	wantGrep(t, store, "zebra_pending", "p/pending.txt:2")

	moved, err := store.IndexPending(ctx)
	if err != nil || moved < 1 {
		t.Fatalf("IndexPending = %d, %v; want at least 1 moved", moved, err)
	}
	if k := kindOf(); k != 0 {
		t.Fatalf("kind after the move = %d, want 0 (indexed)", k)
	}
	wantGrep(t, store, "zebra_pending", "p/pending.txt:2")
	wantGrep(t, store, "zebra_absent")
	if again, err := store.IndexPending(ctx); err != nil || again != 0 {
		t.Fatalf("second IndexPending = %d, %v; want 0", again, err)
	}
}
