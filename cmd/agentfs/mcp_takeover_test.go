package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestMCPTakeoverWithTheNamedTools: agent a (the official TypeScript SDK's
// client) works a run over /mcp, with two upload sessions of the run open
// (one with its part in, one missing it: the run's uploads went over REST,
// as `agentfs cp` sends them, since no tool sends parts), and dies not
// knowing whether its last keyed write_file happened: the server commits
// it and is killed before answering (AGENTFS_FAULT_AFTER_COMMIT=exit).
// Against a fresh server, agent b, a fresh client of the same run that
// knows only what the run meant to write, calls run_recovery and then
// only the tool calls its text names, with their arguments; b dies after
// its first write_file and agent c takes over the same way. Each intended
// file then exists once (one file.created event, version 1, the intended
// bytes), the write a never heard back from is not repeated, both sessions
// are done, and the recovery names nothing left to do.
func TestMCPTakeoverWithTheNamedTools(t *testing.T) {
	node, dir := nodeTools(t)
	r := newRescueRig(t)
	a, ca := r.serve(t, "AGENTFS_FAULT_AFTER_COMMIT=exit")
	const run = "mcp-takeover"
	intent := map[string]string{
		"takeover/plan.md":     "# Plan\nthe keyed write whose answer was lost\n",
		"takeover/full.txt":    "a session with every part in\n",
		"takeover/partial.txt": "a session whose part never arrived\n",
	}
	session := func(path string, sendPart bool) string {
		raw, _ := json.Marshal(map[string]any{"path": path, "size_bytes": len(intent[path])})
		var u struct{ ID string }
		ca.Do("POST", "/v1/uploads", raw, "Content-Type", "application/json", "X-Run-ID", run).
			Expect(t, http.StatusCreated).JSON(t, &u)
		if sendPart {
			ca.Do("PUT", "/v1/uploads/"+u.ID+"/parts/1", intent[path], "X-Run-ID", run).Expect(t, http.StatusOK)
		}
		return u.ID
	}
	session("takeover/full.txt", true)
	session("takeover/partial.txt", false)
	rawIntent, _ := json.Marshal(intent)
	env := func(base, agent string) []string {
		return []string{"AGENTFS_URL=" + base, "AGENTFS_TOKEN=" + r.token, "AGENTFS_RUN=" + run,
			"AGENTFS_AGENT=" + agent, "AGENTFS_INTENT=" + string(rawIntent)}
	}
	out := runNode(t, node, dir, env(a.url, "a"), "tests/mcp-takeover.mjs")
	t.Logf("agent a:\n%s", out)
	if err := a.cmd.Wait(); err == nil || !strings.Contains(out, "the server died before answering") {
		t.Fatalf("the server of agent a did not die committing its write (%v)", err)
	}

	p, cb := r.serve(t)
	out = runNode(t, node, dir, env(p.url, "b"), "tests/mcp-takeover.mjs")
	t.Logf("agents b and c:\n%s", out)
	for _, want := range []string{"> complete_upload", "> abort_upload", "\"idempotency_key\":\"rewrite-upl_", "- a-plan completed",
		"agent c:", "ok: run_recovery and only the tools it named"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the takeover lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `> write_file {"path":"takeover/plan.md"`) {
		t.Fatalf("the write whose answer was lost was sent again:\n%s", out)
	}
	checkOnceEach(t, cb, run, intent)
}

// checkOnceEach: every intended file exists once, at version 1 with the
// intended bytes, made by one file.created event of the run, and the run
// made no other event.
func checkOnceEach(t *testing.T, c *apitest.Client, run string, intent map[string]string) {
	t.Helper()
	var events struct {
		Data []struct{ Type, Path string } `json:"data"`
	}
	c.Do("GET", "/v1/events?run_id="+run+"&limit=1000", nil).Expect(t, http.StatusOK).JSON(t, &events)
	seen := map[string]int{}
	for _, e := range events.Data {
		if e.Type != "file.created" {
			t.Fatalf("event %s of %s: the run only creates", e.Type, e.Path)
		}
		seen[e.Path]++
	}
	if len(events.Data) != len(intent) {
		t.Fatalf("the run made %d events (%v), want one per intended file (%d)", len(events.Data), seen, len(intent))
	}
	for path, content := range intent {
		var list apitest.FileList
		c.Do("GET", "/v1/files?path="+url.QueryEscape(path), nil).Expect(t, http.StatusOK).JSON(t, &list)
		sum := sha256.Sum256([]byte(content))
		if seen[path] != 1 || len(list.Data) != 1 || list.Data[0].Version != 1 || list.Data[0].SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: %d events, files %+v; want one file at version 1 of the intended bytes", path, seen[path], list.Data)
		}
	}
}
