package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestRunRecoveryVerb: agentfs run recovery prints the run's keys and
// next actions as text, --json the whole answer, and a run of which
// nothing is kept says so.
func TestRunRecoveryVerb(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-rec")
	local := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(local, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	env.file(t, "put", local, "rec/a.txt", "--key", "cli-rec-1")
	stdout, stderr, err := env.run("run", "recovery", "cli-rec")
	if err != nil {
		t.Fatalf("run recovery: %v\n%s", err, stderr)
	}
	for _, want := range []string{"Run cli-rec, as of event cursor ", "Confirmed: 1 events (1 created",
		"- cli-rec-1 completed: POST /v1/files. nothing to redo", "Next actions: none"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("run recovery lacks %q:\n%s", want, stdout)
		}
	}
	r := runJSON[client.RunRecovery](t, env, "run", "recovery", "cli-rec", "--json")
	if r.Object != "run_recovery" || len(r.Operations) != 1 || r.Operations[0].Status != "completed" {
		t.Fatalf("run recovery --json: %+v", r)
	}
	env.expectFailure(t, "NOT_FOUND", "run", "recovery", "cli-nobody")
	_, _, err = env.run("run", "recovery", "cli-nobody")
	expectNext(t, err, "cli-nobody", "nothing of it happened")
}
