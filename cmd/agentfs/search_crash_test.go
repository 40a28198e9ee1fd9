package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestSearchPendingSurvivesSIGKILL: a server whose mover never runs
// (AGENTFS_FAULT_MOVER=off) answers writes from three doors (a REST
// upload, a batch, an upload session), whose texts it records pending,
// outside the trigram index, and is killed with SIGKILL. Nothing is lost:
// a server started after finds every file by search at once, its mover
// then moves every pending text into the trigram index, and search finds
// the same files after the move.
func TestSearchPendingSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin, cfg := buildBinary(t), storagetest.Config(t)
	a := startServe(t, bin, cfg, "AGENTFS_FAULT_MOVER=off")
	a.waitReady(t)
	token := createToken(t, bin, cfg, "--subject", "agent")
	ca := apitest.NewClient(t, a.url, token)

	body := func(path string) string {
		return "package crash\n\n// killed_before_moving " + path + "\nfunc f() {}\n"
	}
	var want []string
	for i := range 5 {
		p := fmt.Sprintf("crash/rest/%02d.go", i)
		ca.Do("POST", "/v1/files?path="+url.QueryEscape(p), body(p)).Expect(t, http.StatusCreated)
		want = append(want, p)
	}
	ops := make([]map[string]any, 20)
	for i := range ops {
		p := fmt.Sprintf("crash/batch/%02d.go", i)
		ops[i] = map[string]any{"op": "put", "path": p, "content": body(p)}
		want = append(want, p)
	}
	raw, _ := json.Marshal(map[string]any{"operations": ops})
	var b batchState
	ca.Do("POST", "/v1/batch", raw, "Content-Type", "application/json", "Idempotency-Key", "crash-search").
		Expect(t, http.StatusAccepted).JSON(t, &b)
	if end := waitBatch(t, ca, b.ID, terminal, 2*time.Minute); end.Status != "succeeded" || end.Counts.Succeeded != len(ops) {
		t.Fatalf("batch: %s %+v", end.Status, end.Counts)
	}
	session := "crash/session/big.go"
	content := body(session)
	rawSession, _ := json.Marshal(map[string]any{"path": session, "size_bytes": len(content)})
	var u struct {
		ID        string `json:"id"`
		PartCount int    `json:"part_count"`
	}
	ca.Do("POST", "/v1/uploads", rawSession, "Content-Type", "application/json").Expect(t, http.StatusCreated).JSON(t, &u)
	if u.PartCount != 1 {
		t.Fatalf("the session has %d parts, want 1", u.PartCount)
	}
	ca.Do("PUT", "/v1/uploads/"+u.ID+"/parts/1", content).Expect(t, http.StatusOK)
	ca.Do("POST", "/v1/uploads/"+u.ID+"/complete", nil).Expect(t, http.StatusCreated)
	want = append(want, session)
	sort.Strings(want)

	// Every answer is sent; every text is still pending.
	if n := pendingTexts(t, cfg); n != len(want) {
		t.Fatalf("%d texts pending before the kill, want %d", n, len(want))
	}
	if got := searchPaths(t, ca); !slices.Equal(got, want) {
		t.Fatalf("before the kill, search found %v, want %v", got, want)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err == nil {
		t.Fatal("the server exited cleanly, not as killed")
	}
	if n := pendingTexts(t, cfg); n != len(want) {
		t.Fatalf("%d texts pending after the kill, want %d", n, len(want))
	}

	// A server started after: its mover runs at once. The search is made
	// as soon as it is ready, whether or not the mover has run yet.
	c := startServe(t, bin, cfg)
	c.waitReady(t)
	cc := apitest.NewClient(t, c.url, token)
	if got := searchPaths(t, cc); !slices.Equal(got, want) {
		t.Fatalf("after the restart, search found %v, want %v", got, want)
	}
	storagetest.Eventually(t, time.Minute, "the mover to move every pending text", func() bool {
		return pendingTexts(t, cfg) == 0
	})
	if n := indexedTexts(t, cfg); n != len(want) {
		t.Fatalf("%d texts in the trigram index after the move, want %d", n, len(want))
	}
	if got := searchPaths(t, cc); !slices.Equal(got, want) {
		t.Fatalf("after the move, search found %v, want %v", got, want)
	}
}

// searchPaths is the paths of the files with a match for the crash
// test's word, in the answer's order.
func searchPaths(t *testing.T, c *apitest.Client) []string {
	t.Helper()
	var res api.SearchResults
	c.Do("GET", "/v1/search?prefix=crash/&limit=100&q=killed_before_moving", nil).Expect(t, http.StatusOK).JSON(t, &res)
	if res.HasMore {
		t.Fatalf("the search has more than one page: %+v", res)
	}
	var paths []string
	for _, m := range res.Data {
		paths = append(paths, m.Path)
	}
	if int(res.FilesMatched) != len(paths) {
		t.Fatalf("files_matched %d, but %d matches", res.FilesMatched, len(paths))
	}
	return paths
}

// pendingTexts and indexedTexts count the search_texts rows of kind 3
// (pending) and 0 (in the trigram index).
func pendingTexts(t *testing.T, cfg storage.Config) int { return textsOfKind(t, cfg, 3) }
func indexedTexts(t *testing.T, cfg storage.Config) int { return textsOfKind(t, cfg, 0) }

func textsOfKind(t *testing.T, cfg storage.Config, kind int) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM search_texts WHERE kind = $1`, kind).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
