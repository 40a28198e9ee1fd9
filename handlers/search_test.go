package handlers_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// searchAll answers every match of a search, over every page.
func searchAll(t *testing.T, c *apitest.Client, query string) []api.SearchMatch {
	t.Helper()
	var out []api.SearchMatch
	cursor := ""
	for {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var page api.SearchResults
		c.Do("GET", "/v1/search?"+q, nil).Expect(t, http.StatusOK).JSON(t, &page)
		out = append(out, page.Data...)
		if !page.HasMore {
			return out
		}
		cursor = *page.NextCursor
	}
}

// grep answers "path:line" of every match of a search, over every page.
func grep(t *testing.T, c *apitest.Client, query string) []string {
	t.Helper()
	var out []string
	for _, m := range searchAll(t, c, query) {
		out = append(out, fmt.Sprintf("%s:%d", m.Path, m.Line))
	}
	return out
}

func expectGrep(t *testing.T, c *apitest.Client, query string, want ...string) {
	t.Helper()
	if got := grep(t, c, query); !slices.Equal(got, want) {
		t.Fatalf("search %s = %q, want %q", query, got, want)
	}
}

// TestSearchReadsItsWritesFromEveryDoor searches right after each write's
// answer: a standalone upload, a replace, a batch (put, copy, delete), an
// upload session, a revert, a move, a delete and a restore.
func TestSearchReadsItsWritesFromEveryDoor(t *testing.T) {
	c, b0 := setup(t)
	f := upload(t, c, "notes/a.txt", "first draft\n").Expect(t, 201).File(t)
	expectGrep(t, c, "q=draft", "notes/a.txt:1")

	c.Do("POST", "/v1/files?path=notes/a.txt&if_exists=replace", "second\nversion\n").Expect(t, 200)
	expectGrep(t, c, "q=draft")
	expectGrep(t, c, "q=version", "notes/a.txt:2")

	src := upload(t, c, "src.txt", "copied words\n").Expect(t, 201).File(t)
	b, _ := runBatch(t, c, "search-batch", []map[string]any{
		{"op": "put", "path": "batch/put.txt", "content": "batched words\n"},
		{"op": "copy", "file_id": src.ID, "path": "batch/copy.txt"},
		{"op": "delete", "file_id": src.ID},
	}, http.StatusAccepted)
	if b.Status != "succeeded" {
		t.Fatalf("batch %+v", b)
	}
	expectGrep(t, c, "q=words", "batch/copy.txt:1", "batch/put.txt:1")

	u := createUpload(t, c, map[string]any{"path": "big/session.txt", "size_bytes": 15}, 201)
	putPart(t, c, u.ID, 1, []byte("assembled text\n")).Expect(t, 200)
	complete(t, c, u.ID, "").Expect(t, http.StatusCreated)
	expectGrep(t, c, "q=assembled", "big/session.txt:1")

	revert(c, f.ID, 1).Expect(t, http.StatusOK)
	expectGrep(t, c, "q=draft", "notes/a.txt:1")
	expectGrep(t, c, "q=version")

	move(c, f.ID, "moved/a.txt", "").Expect(t, http.StatusOK)
	expectGrep(t, c, "q=draft", "moved/a.txt:1")

	c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK)
	expectGrep(t, c, "q=draft")
	c.Do("POST", "/v1/files/"+f.ID+"/restore", nil).Expect(t, http.StatusOK)
	expectGrep(t, c, "q=draft", "moved/a.txt:1")

	// Another subject's files do not exist for the search.
	expectGrep(t, b0.srv.Client(t, "bob"), "q=draft")
}

func TestSearchAnswer(t *testing.T) {
	c, _ := setup(t)
	long := strings.Repeat("x", 5000) + "needle"
	upload(t, c, "a.txt", "zero\none needle\ntwo\nthree\r\n"+long).Expect(t, 201)
	upload(t, c, "b.bin", "needle\x00").Expect(t, 201)
	var page api.SearchResults
	c.Do("GET", "/v1/search?q=needle&context=1&limit=1", nil).Expect(t, http.StatusOK).JSON(t, &page)
	first := *page.NextCursor
	m := page.Data[0]
	if page.Object != "search_results" || len(page.Data) != 1 || !page.HasMore || m.Path != "a.txt" || m.Line != 2 || m.Column != 5 ||
		m.Text != "one needle" || !slices.Equal(m.Before, []string{"zero"}) || !slices.Equal(m.After, []string{"two"}) ||
		m.Version != 1 || page.FilesSkipped.Binary != 1 || !page.IndexComplete {
		t.Fatalf("first page %+v", page)
	}
	c.Do("GET", "/v1/search?q=needle&context=1&limit=1&cursor="+url.QueryEscape(*page.NextCursor), nil).Expect(t, http.StatusOK).JSON(t, &page)
	m = page.Data[0]
	if page.HasMore || m.Line != 5 || m.Column != 5001 || !m.Truncated || len(m.Text) != 4096 || !slices.Equal(m.Before, []string{"three\r"}) ||
		len(m.After) != 0 || page.FilesMatched != 1 || page.FilesSearched != 1 {
		t.Fatalf("second page %+v", page)
	}
	// A cursor belongs to its search.
	c.Do("GET", "/v1/search?q=other&context=1&limit=1&cursor="+url.QueryEscape(first), nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
}

func TestSearchBadInput(t *testing.T) {
	c, b := setup(t)
	upload(t, c, "a.txt", "aaaa\n").Expect(t, 201)
	for _, tc := range []struct {
		query, field string
	}{
		{"q=", "q"},
		{"", "q"},
		{"q=a(b", "q"},
		{"q=" + url.QueryEscape("a{1001}"), "q"},
		{"q=" + url.QueryEscape("((a{100}){100}){100}"), "q"},
		{"q=%FF", "q"},
		{"q=" + url.QueryEscape(strings.Repeat("x", 5000)), "q"},
		{"q=a&context=1000", "context"},
		{"q=a&context=-1", "context"},
		{"q=a&limit=0", "limit"},
		{"q=a&limit=1001", "limit"},
		{"q=a&glob=" + url.QueryEscape("../*"), "glob"},
		{"q=a&glob=" + url.QueryEscape("src/../x"), "glob"},
		{"q=a&run_id=" + url.QueryEscape("no spaces"), "run_id"},
	} {
		res := c.Do("GET", "/v1/search?"+tc.query, nil)
		if res.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422", tc.query, res.Status)
			continue
		}
		p := res.ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: errors %+v, want the field %s", tc.query, p.Errors, tc.field)
		}
	}
	for _, q := range []string{"q=a&context=x", "q=a&limit=many", "q=a&literal=maybe", "q=a&cursor=bogus"} {
		c.Do("GET", "/v1/search?"+q, nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	}
	// Bounded answers: a huge alternation and nested quantifiers are RE2
	// (linear time), and answer at once.
	alts := make([]string, 10000)
	for k := range alts {
		alts[k] = "w" + strconv.Itoa(k)
	}
	for _, q := range []string{strings.Join(alts[:400], "|"), "(a*)*$", "(a|aa)+b", "(.*)*(.*)*x"} {
		c.Do("GET", "/v1/search?q="+url.QueryEscape(q), nil).Expect(t, http.StatusOK)
	}
	b.srv.Client(t, "alice", "write").Do("GET", "/v1/search?q=a", nil).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
}

// TestSearchMatchesRipgrep writes a few hundred varied files (unicode,
// long lines, CRLF, no final newline) both to AgentFS and to a directory,
// and holds every search to rg -n over the directory, for patterns both
// dialects read the same way.
func TestSearchMatchesRipgrep(t *testing.T) {
	rg := os.Getenv("RG_BIN")
	if rg == "" {
		var err error
		if rg, err = osexec.LookPath("rg"); err != nil {
			t.Fatalf("ripgrep not found: install it with `source scripts/lib.sh; ensure_deps rg` (scripts/test.sh does) or set RG_BIN")
		}
	}
	c, _ := setup(t)
	dir := t.TempDir()
	files := corpus(300)
	var ops []map[string]any
	for path, body := range files {
		ops = append(ops, map[string]any{"op": "put", "path": path, "content": body})
		full := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := runBatch(t, c, "corpus", ops, http.StatusAccepted); b.Status != "succeeded" {
		t.Fatalf("batch %+v", b)
	}
	for _, tc := range []struct {
		pattern      string
		literal, ign bool
	}{
		{pattern: "needle"},
		{pattern: "fo+bar"},
		{pattern: "^start"},
		{pattern: "end$"},
		{pattern: "(alpha|beta)gamma"},
		{pattern: "[0-9]{3}-[0-9]{4}"},
		{pattern: "café"},
		{pattern: "日本語"},
		{pattern: "x.y"},
		{pattern: "hello world", ign: true},
		{pattern: "ÉCOLE", ign: true},
		{pattern: "^$"},
		{pattern: "a.b*c", literal: true},
		{pattern: "[[:upper:]]{4}"},
		{pattern: "q[^u]"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			args := []string{"--no-config", "-n", "--column", "--no-heading", "--with-filename", "--color=never", "-uu"}
			query := "q=" + url.QueryEscape(tc.pattern) + "&limit=1000"
			if tc.literal {
				args, query = append(args, "-F"), query+"&literal=true"
			}
			if tc.ign {
				args, query = append(args, "-i"), query+"&ignore_case=true"
			}
			want := ripgrep(t, rg, dir, append(args, "-e", tc.pattern, "."))
			got := searchLines(t, c, query)
			if !slices.Equal(got, want) {
				k := 0
				for k < min(len(got), len(want)) && got[k] == want[k] {
					k++
				}
				t.Fatalf("%d lines, rg %d; the first difference, at %d:\n got: %.300q\nwant: %.300q", len(got), len(want), k, got[k:min(k+2, len(got))], want[k:min(k+2, len(want))])
			}
		})
	}
}

// ripgrep runs rg in dir and answers its lines as path:line:column:text,
// sorted by path (bytes) then line.
func ripgrep(t *testing.T, rg, dir string, args []string) []string {
	t.Helper()
	cmd := osexec.Command(rg, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*osexec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("rg %v: %v", args, err)
		}
	}
	type hit struct {
		path string
		line int
		rest string
	}
	var hits []hit
	// Lines end at "\n" only: a "\r" before it is part of the line, for
	// rg as for the search.
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(strings.TrimPrefix(line, "./"), ":", 4)
		n, _ := strconv.Atoi(parts[1])
		hits = append(hits, hit{parts[0], n, parts[2] + ":" + cut(parts[3])})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.line - b.line
	})
	lines := []string{}
	for _, h := range hits {
		lines = append(lines, fmt.Sprintf("%s:%d:%s", h.path, h.line, h.rest))
	}
	return lines
}

// cut is a line as the search answers it: at most 4096 bytes.
func cut(s string) string {
	if len(s) <= 4096 {
		return s
	}
	s = s[:4096]
	for len(s) > 0 && !utf8ValidEnd(s) {
		s = s[:len(s)-1]
	}
	return s
}

func utf8ValidEnd(s string) bool {
	for k := len(s) - 1; k >= 0 && k >= len(s)-4; k-- {
		b := s[k]
		if b < 0x80 {
			return true
		}
		if b >= 0xC0 {
			need := 2
			if b >= 0xE0 {
				need = 3
			}
			if b >= 0xF0 {
				need = 4
			}
			return len(s)-k == need
		}
	}
	return false
}

// searchLines answers every match of a search as path:line:column:text.
func searchLines(t *testing.T, c *apitest.Client, query string) []string {
	t.Helper()
	lines := []string{}
	for _, m := range searchAll(t, c, query) {
		lines = append(lines, fmt.Sprintf("%s:%d:%d:%s", m.Path, m.Line, m.Column, m.Text))
	}
	return lines
}

// corpus makes n files of varied text: words with the patterns' targets
// among them, unicode, CRLF line ends, long lines, empty lines, files
// without a final newline, and paths that sort differently by segment
// and by byte.
func corpus(n int) map[string]string {
	r := rand.New(rand.NewPCG(25, 17))
	words := []string{"needle", "foobar", "fooooobar", "fbar", "alphagamma", "betagamma", "gammabeta", "555-1234", "12-345",
		"café", "cafe", "CAFÉ", "日本語", "日本", "xzy", "x.y", "x-y", "Hello", "WORLD", "hello world", "HeLLo WoRlD", "école", "ÉCOLE",
		"a.b*c", "a.bbc", "ABCD", "abcd", "ÀÉÎÕ", "qatar", "queen", "q", "end", "start", "ſ", "K", "k", "\t", " ", "é"}
	dirs := []string{"a", "a-b", "a/b", "src", "src/deep", "ünï", "docs"}
	out := map[string]string{}
	for k := range n {
		var b strings.Builder
		nl := "\n"
		if k%5 == 0 {
			nl = "\r\n"
		}
		for l := range 1 + r.IntN(30) {
			switch {
			case r.IntN(12) == 0:
				// an empty line
			case r.IntN(40) == 0:
				b.WriteString(strings.Repeat("long ", 1200) + words[r.IntN(len(words))])
			default:
				if r.IntN(6) == 0 {
					b.WriteString("start ")
				}
				for range 1 + r.IntN(8) {
					b.WriteString(words[r.IntN(len(words))])
					b.WriteString(" ")
				}
				if l%3 == 0 {
					b.WriteString("end")
				}
			}
			b.WriteString(nl)
		}
		body := b.String()
		if k%7 == 0 {
			body = strings.TrimSuffix(strings.TrimSuffix(body, "\n"), "\r")
		}
		out[fmt.Sprintf("%s/f%03d.txt", dirs[k%len(dirs)], k)] = body
	}
	return out
}
