package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestCLIPoints: checkpoint create, ls and rm; diff (JSON and --patch);
// ls and get --as-of; restore PREFIX --to POINT, dry and waited.
func TestCLIPoints(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-points")
	a := env.file(t, "put", writeLocal(t, "a.txt", "alpha\n"), "src/a.txt")
	stdout, stderr, err := env.run("checkpoint", "create", "before", "--prefix", "src/")
	var cp client.Checkpoint
	if err != nil || json.Unmarshal([]byte(stdout), &cp) != nil || cp.Name == nil || *cp.Name != "before" {
		t.Fatalf("checkpoint create: %q %v\n%s", stdout, err, stderr)
	}
	env.expectFailure(t, "CHECKPOINT_EXISTS", "checkpoint", "create", "before")
	env.file(t, "put", writeLocal(t, "a.txt", "broken\n"), "src/a.txt", "--replace")
	env.file(t, "put", writeLocal(t, "n.txt", "new\n"), "src/n.txt")

	stdout, stderr, err = env.run("diff", "before", "--prefix", "src/")
	var changes []client.Change
	if err != nil || json.Unmarshal([]byte(stdout), &changes) != nil || len(changes) != 2 {
		t.Fatalf("diff: %q %v\n%s", stdout, err, stderr)
	}
	stdout, _, err = env.run("diff", "before", "now", "--prefix", "src/", "--patch")
	if err != nil || !strings.Contains(stdout, "-alpha\n+broken\n") || !strings.Contains(stdout, "+++ b/src/n.txt") {
		t.Fatalf("diff --patch: %q %v", stdout, err)
	}
	if files := env.list(t, "--as-of", "before", "--prefix", "src/"); len(files) != 1 || files[0].Version != 1 {
		t.Fatalf("ls --as-of: %+v", files)
	}
	for _, args := range [][]string{{"get", a.ID, "--as-of", "before"}, {"get", "--path", "src/a.txt", "--as-of", cp.ID}} {
		if stdout, stderr, err := env.run(args...); err != nil || stdout != "alpha\n" {
			t.Fatalf("%v: %q %v\n%s", args, stdout, err, stderr)
		}
	}
	local := filepath.Join(t.TempDir(), "a.txt")
	if _, stderr, err := env.run("get", a.ID, local, "--as-of", "before"); err != nil {
		t.Fatalf("get to a file --as-of: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(local); string(b) != "alpha\n" {
		t.Fatalf("get --as-of wrote %q", b)
	}

	stdout, _, err = env.run("restore", "src/", "--to", "before", "--dry-run")
	var plan client.RestorePlan
	if err != nil || json.Unmarshal([]byte(stdout), &plan) != nil || len(plan.Items) != 2 {
		t.Fatalf("restore --dry-run: %q %v", stdout, err)
	}
	stdout, stderr, err = env.run("restore", "src/", "--to", "before", "--wait")
	var b client.Batch
	if err != nil || json.Unmarshal([]byte(stdout), &b) != nil || b.Status != "succeeded" {
		t.Fatalf("restore --wait: %q %v\n%s", stdout, err, stderr)
	}
	if stdout, _, _ := env.run("diff", "before", "--prefix", "src/"); strings.TrimSpace(stdout) != "[]" && strings.TrimSpace(stdout) != "null" {
		t.Fatalf("diff after the restore: %q", stdout)
	}
	stdout, _, err = env.run("checkpoint", "ls")
	var cps []client.Checkpoint
	if err != nil || json.Unmarshal([]byte(stdout), &cps) != nil || len(cps) != 1 {
		t.Fatalf("checkpoint ls: %q %v", stdout, err)
	}
	if _, stderr, err := env.run("checkpoint", "rm", "before"); err != nil {
		t.Fatalf("checkpoint rm: %v\n%s", err, stderr)
	}
	env.expectFailure(t, "NOT_FOUND", "checkpoint", "rm", "before")
}
