package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// TestCLIForks: fork SRC DST, fork ls, merge --dry-run, a conflict that
// fails the merge, and --on-conflict resolving it; a token scoped to one
// folder cannot fork from or merge into another, nor list its forks.
func TestCLIForks(t *testing.T) {
	t.Parallel()
	srv, env := servedCLI(t, "cli-forks")
	env.file(t, "put", writeLocal(t, "a.txt", "alpha\n"), "src/a.txt")
	env.file(t, "put", writeLocal(t, "b.txt", "beta\n"), "src/b.txt")
	stdout, stderr, err := env.run("fork", "src", "try/")
	var f client.Fork
	if err != nil || json.Unmarshal([]byte(stdout), &f) != nil || f.Files != 2 || f.To != "try/" {
		t.Fatalf("fork: %q %v\n%s", stdout, err, stderr)
	}
	env.expectFailure(t, "PATH_EXISTS", "fork", "src", "try")
	env.expectFailure(t, "VALIDATION_FAILED", "fork", "src", "src/in")
	env.file(t, "put", writeLocal(t, "a.txt", "alpha, fork\n"), "try/a.txt", "--replace")
	env.file(t, "put", writeLocal(t, "b.txt", "beta, fork\n"), "try/b.txt", "--replace")
	env.file(t, "put", writeLocal(t, "b.txt", "beta, target\n"), "src/b.txt", "--replace")

	stdout, _, err = env.run("fork", "ls")
	var forks []client.Fork
	if err != nil || json.Unmarshal([]byte(stdout), &forks) != nil || len(forks) != 1 || forks[0].ID != f.ID {
		t.Fatalf("fork ls: %q %v", stdout, err)
	}
	stdout, _, err = env.run("merge", f.ID, "--dry-run")
	var m client.Merge
	if err != nil || json.Unmarshal([]byte(stdout), &m) != nil || !m.DryRun || len(m.Applied) != 1 || len(m.Conflicts) != 1 {
		t.Fatalf("merge --dry-run: %q %v", stdout, err)
	}
	env.expectFailure(t, "MERGE_CONFLICT", "merge", f.ID)
	env.expectFailure(t, "VALIDATION_FAILED", "merge", f.ID, "--on-conflict", "maybe")
	stdout, _, err = env.run("merge", f.ID, "--on-conflict", "target")
	if err != nil || json.Unmarshal([]byte(stdout), &m) != nil || m.DryRun || len(m.Applied) != 1 || m.Applied[0].Path != "src/a.txt" {
		t.Fatalf("merge --on-conflict target: %q %v", stdout, err)
	}
	if out, _, err := env.run("get", "--path", "src/a.txt"); err != nil || out != "alpha, fork\n" {
		t.Fatalf("src/a.txt after the merge: %q %v", out, err)
	}

	root, err := client.New(srv.URL, srv.Token(t, "cli", "read", "write", "delegate"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := root.CreateToken(context.Background(), client.TokenOptions{Scopes: []string{"read", "write"},
		Prefixes: []string{"mine/"}, ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	scoped := maps.Clone(env)
	scoped["AGENTFS_TOKEN"] = *tok.Token
	scoped.expectFailure(t, "FORBIDDEN", "fork", "src", "mine/copy")
	scoped.expectFailure(t, "FORBIDDEN", "fork", "mine/x", "other/")
	scoped.expectFailure(t, "NOT_FOUND", "merge", f.ID)
	stdout, _, err = scoped.run("fork", "ls")
	if err != nil || strings.TrimSpace(stdout) != "null" && strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("the scoped token's fork ls: %q %v", stdout, err)
	}
}
