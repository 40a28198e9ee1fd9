package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestCLIPathOrID: every verb that takes a file takes its id or its path,
// without a flag, and does the same with either.
func TestCLIPathOrID(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-paths")
	v1 := writeLocal(t, "plan.md", "# v1\n")
	v2 := writeLocal(t, "plan.md", "# v2\n")
	f := env.file(t, "put", v1, "p/plan.md")
	env.file(t, "put", v2, "p/plan.md", "--replace")

	for _, ref := range []struct{ name, arg string }{{"ByPath", "p/plan.md"}, {"ByID", f.ID}, {"ByExplicitPath", "agentfs:p/plan.md"}} {
		t.Run(ref.name, func(t *testing.T) {
			stdout, stderr, err := env.run("cat", ref.arg)
			if err != nil || stdout != "# v2\n" {
				t.Fatalf("cat %s: %q, %v\n%s", ref.arg, stdout, err, stderr)
			}
			dest := filepath.Join(t.TempDir(), "plan.md")
			if g := env.file(t, "get", ref.arg, dest); g.ID != f.ID {
				t.Fatalf("get %s printed %+v", ref.arg, g)
			}
			if got, _ := os.ReadFile(dest); string(got) != "# v2\n" {
				t.Fatalf("get %s wrote %q", ref.arg, got)
			}
			stdout, stderr, err = env.run("versions", ref.arg)
			if err != nil || strings.Count(stdout, `"file_id":"`+f.ID+`"`) < 2 {
				t.Fatalf("versions %s: %q, %v\n%s", ref.arg, stdout, err, stderr)
			}
			stdout, stderr, err = env.run("share", ref.arg)
			if err != nil || !strings.Contains(stdout, "/s/") {
				t.Fatalf("share %s: %q, %v\n%s", ref.arg, stdout, err, stderr)
			}
			if g := env.file(t, "expire", ref.arg, "7d"); g.ID != f.ID || g.ExpiresAt == nil {
				t.Fatalf("expire %s printed %+v", ref.arg, g)
			}
			if g := env.file(t, "expire", ref.arg, "--never"); g.ID != f.ID || g.ExpiresAt != nil {
				t.Fatalf("expire --never %s printed %+v", ref.arg, g)
			}
		})
	}
	t.Run("RevertMoveRemoveRestore", func(t *testing.T) {
		if g := env.file(t, "revert", "p/plan.md", "1"); g.ID != f.ID || g.Version != 3 {
			t.Fatalf("revert by path printed %+v", g)
		}
		if g := env.file(t, "mv", "p/plan.md", "q/"); g.ID != f.ID || g.Path != "q/plan.md" {
			t.Fatalf("mv by path into a folder printed %+v", g)
		}
		if g := env.file(t, "mv", f.ID, "q/final.md"); g.ID != f.ID || g.Path != "q/final.md" {
			t.Fatalf("mv by id printed %+v", g)
		}
		if g := env.file(t, "rm", "q/final.md"); g.ID != f.ID || g.DeletedAt == nil {
			t.Fatalf("rm by path printed %+v", g)
		}
		// A second file at the path, deleted later: restore PATH brings
		// back the one deleted last.
		other := env.file(t, "put", v1, "q/final.md")
		env.file(t, "rm", other.ID)
		if g := env.file(t, "restore", "q/final.md"); g.ID != other.ID || g.DeletedAt != nil {
			t.Fatalf("restore by path printed %+v, want %s (deleted last)", g, other.ID)
		}
		env.expectFailure(t, "PATH_EXISTS", "restore", f.ID) // its path was taken meanwhile
		env.file(t, "rm", "q/final.md")
		if g := env.file(t, "restore", f.ID); g.ID != f.ID || g.DeletedAt != nil {
			t.Fatalf("restore by id printed %+v", g)
		}
	})
	t.Run("PathOfNoFile", func(t *testing.T) {
		for _, args := range [][]string{
			{"rm", "p/none.md"}, {"versions", "p/none.md"}, {"revert", "p/none.md", "1"}, {"mv", "p/none.md", "x"},
			{"share", "p/none.md"}, {"expire", "p/none.md", "1d"}, {"get", "p/none.md"}, {"cat", "p/none.md"},
		} {
			stdout, _, err := env.run(args...)
			if err == nil || !strings.Contains(err.Error(), `no live file holds path "p/none.md"`) || stdout != "" || exitCode(err) != 1 {
				t.Errorf("agentfs %s: %v, stdout %q", strings.Join(args, " "), err, stdout)
			}
		}
		_, _, err := env.run("restore", "p/never.md")
		if err == nil || !strings.Contains(err.Error(), `no deleted file held path "p/never.md"`) {
			t.Errorf("restore of a path no file held: %v", err)
		}
	})
	t.Run("IDOfNoFile", func(t *testing.T) {
		for _, verb := range []string{"rm", "restore", "versions", "share", "get", "cat"} {
			env.expectFailure(t, "NOT_FOUND", verb, noSuchID)
		}
	})
	t.Run("PutIntoFolder", func(t *testing.T) {
		g := env.file(t, "put", v1, "folder/")
		if g.Path != "folder/plan.md" {
			t.Fatalf("put into a folder made %+v", g)
		}
	})
	if !client.IsFileID(f.ID) || client.IsFileID("file_nope") || client.IsFileID("p/plan.md") {
		t.Fatal("IsFileID")
	}
}
