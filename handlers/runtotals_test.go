package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage"
)

// runFromEvents is what a run summary said before its totals were kept
// (migration 027): the run's events aggregated and its live files counted,
// each held to prefixes (none: every path).
func runFromEvents(t *testing.T, srv *apitest.Server, run string, prefixes []string) string {
	t.Helper()
	ctx := context.Background()
	var (
		agents  []string
		bytes   int64
		live    int
		lastPos int64
	)
	in := func(col string) string {
		if len(prefixes) == 0 {
			return "true"
		}
		return "EXISTS (SELECT 1 FROM unnest(@p::text[]) AS r(p) WHERE starts_with(" + col + ", r.p))"
	}
	args := pgx.NamedArgs{"run": run, "p": prefixes}
	err := srv.Store.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT agent_id) FILTER (WHERE agent_id IS NOT NULL), '{}'),
			coalesce(sum(size_bytes) FILTER (WHERE type IN ('file.created', 'file.replaced')), 0), coalesce(max(pos), 0)
		FROM events WHERE subject = 'alice' AND run_id = @run AND `+in("path"), args).Scan(&agents, &bytes, &lastPos)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := srv.Store.Pool().Query(ctx, `SELECT type || '=' || count(*) FROM events
		WHERE subject = 'alice' AND run_id = @run AND `+in("path")+` GROUP BY type ORDER BY type`, args)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM files WHERE subject = 'alice' AND (run_id = @run OR last_run_id = @run)
		AND deleted_at IS NULL AND NOT coalesce(expires_at <= now(), false) AND `+in("path"), args).Scan(&live)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) == 0 {
		return "not found"
	}
	return fmt.Sprintf("agents=%v bytes=%d live=%d counts=%v", agents, bytes, live, counts)
}

// runFromTotals is the same read from the store's run summary (the kept
// totals), in the reach of prefixes.
func runFromTotals(t *testing.T, srv *apitest.Server, run string, prefixes []string) string {
	t.Helper()
	ctx := context.Background()
	if len(prefixes) > 0 {
		ctx = storage.Within(ctx, prefixes, "")
	}
	r, err := srv.Store.RunSummary(ctx, "alice", run)
	if err != nil {
		return "not found"
	}
	var counts []string
	for _, typ := range []string{"file.created", "file.deleted", "file.expired", "file.moved", "file.replaced", "file.restored", "file.reverted"} {
		if n := r.Counts[typ]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s=%d", typ, n))
		}
	}
	if len(counts) != len(r.Counts) {
		t.Fatalf("counts of unexpected types: %v", r.Counts)
	}
	return fmt.Sprintf("agents=%v bytes=%d live=%d counts=%v", r.AgentIDs, r.BytesWritten, r.LiveFiles, counts)
}

// TestRunTotalsMatchTheEvents: the totals kept as events commit say what
// aggregating the run's events and counting its files says, for every
// path of the effects (creates, replaces by another run, moves between
// folders, deletes, restores, reverts, an expiry before and after the
// sweeper records it, a purge of old events), whole and held to a folder.
func TestRunTotalsMatchTheEvents(t *testing.T) {
	c, b := setup(t)
	srv := b.srv
	ctx := context.Background()
	run := func(id, agent string) []string { return []string{"X-Run-ID", id, "X-Agent-ID", agent} }
	views := [][]string{nil, {"a/"}, {"a/b/"}, {"c/"}, {"a/", "c/"}, {"d/"}, {"zzz/"}}
	check := func(step string) {
		t.Helper()
		for _, id := range []string{"t", "u"} {
			for _, p := range views {
				want, got := runFromEvents(t, srv, id, p), runFromTotals(t, srv, id, p)
				if got != want {
					t.Fatalf("%s: run %s in %v: totals say %s, events say %s", step, id, p, got, want)
				}
			}
		}
	}
	root := upload(t, c, "root.txt", "r", run("t", "w1")...).Expect(t, http.StatusCreated).File(t)
	a1 := upload(t, c, "a/one.txt", "one", run("t", "w1")...).Expect(t, http.StatusCreated).File(t)
	a2 := upload(t, c, "a/b/two.txt", "twotwo", run("t", "w2")...).Expect(t, http.StatusCreated).File(t)
	a3 := upload(t, c, "a/b/three.txt", "3", run("t", "w1")...).Expect(t, http.StatusCreated).File(t)
	check("creates")
	c.Do("POST", "/v1/files?path=a/one.txt&if_exists=replace", "ONE!", run("u", "w3")...).Expect(t, http.StatusOK)
	c.Do("POST", "/v1/files?path=a/b/two.txt&if_exists=replace", "2", run("t", "w2")...).Expect(t, http.StatusOK)
	check("replaces")
	move(c, a2.ID, "c/two.txt", "", run("t", "w2")...).Expect(t, http.StatusOK)
	move(c, a1.ID, "c/one.txt", "", run("u", "w3")...).Expect(t, http.StatusOK)
	check("moves")
	c.Do("DELETE", "/v1/files/"+root.ID, nil, run("u", "w3")...).Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+a2.ID, nil, run("t", "w1")...).Expect(t, http.StatusOK)
	check("deletes")
	c.Do("POST", "/v1/files/"+root.ID+"/restore", nil, run("t", "w1")...).Expect(t, http.StatusOK)
	revert(c, a1.ID, 1, run("t", "w2")...).Expect(t, http.StatusOK)
	check("restore and revert")
	// Writes without a run still move the counts of the runs their files
	// count for.
	c.Do("POST", "/v1/files?path=a/b/three.txt&if_exists=replace", "three").Expect(t, http.StatusOK)
	check("a replace without a run")
	move(c, a1.ID, "d/one.txt", "").Expect(t, http.StatusOK)
	c.Do("DELETE", "/v1/files/"+a3.ID, nil).Expect(t, http.StatusOK)
	upload(t, c, "d/free.txt", "free").Expect(t, http.StatusCreated)
	check("a move, a delete and a create without a run")
	if _, err := srv.Store.Pool().Exec(ctx, `UPDATE files SET expires_at = now() - interval '1 second' WHERE id = $1`, root.ID); err != nil {
		t.Fatal(err)
	}
	check("past its expiry")
	if _, err := srv.Store.ExpireFiles(ctx); err != nil {
		t.Fatal(err)
	}
	check("expiry recorded")
	if _, err := srv.Store.Pool().Exec(ctx, `DELETE FROM events WHERE subject = 'alice' AND pos <= 3`); err != nil {
		t.Fatal(err)
	}
	check("oldest events swept")
	if _, err := srv.Store.Pool().Exec(ctx, `DELETE FROM events WHERE subject = 'alice' AND run_id = 'u'`); err != nil {
		t.Fatal(err)
	}
	check("a run's events all swept")
	if got := runFromTotals(t, srv, "u", nil); got != "not found" {
		t.Fatalf("a run without events: %s", got)
	}
}
