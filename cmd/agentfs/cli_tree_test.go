package main

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeTree writes a tree that has what trees have: nested folders, names
// in several scripts, empty files, a file at the top, and a copy of Go's
// src/net (about 400 files of real source).
func makeTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "tree")
	files := map[string]string{
		"top.txt":                  "at the top\n",
		"empty":                    "",
		"a/b/c/deep.md":            "# deep\n",
		"a/b/empty.log":            "",
		"café/crème brûlée.txt":    "sugar\n",
		"日本語/ファイル.md":              "こんにちは\n",
		"emoji/🚀 launch.json":      `{"go":true}`,
		"spaces in/a name (1).txt": "parens\n",
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(root, "net"), os.DirFS("/usr/local/go/src/net")); err != nil {
		t.Fatalf("copy Go's src/net into the test tree: %v", err)
	}
	// os.CopyFS keeps the modes of src (read-only in a Go install):
	// make the copies writable, as a user's files are.
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// countFiles counts the regular files under root.
func countFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// diffTrees fails the test unless diff -r finds a and b alike.
func diffTrees(t *testing.T, a, b string) {
	t.Helper()
	out, err := exec.Command("diff", "-r", a, b).CombinedOutput()
	if err != nil {
		t.Fatalf("diff -r %s %s: %v\n%s", a, b, err, out)
	}
}

// treeLines decodes what cp -r and sync print when piped: one JSON object
// a line, the summary last.
func treeLines(t *testing.T, stdout string) ([]stepLine, treeSummary) {
	t.Helper()
	var (
		steps []stepLine
		sum   treeSummary
	)
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var op struct{ Op string }
		if err := json.Unmarshal(line, &op); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		if op.Op == "summary" {
			if err := json.Unmarshal(line, &sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var s stepLine
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
	}
	if sum.Op != "summary" {
		t.Fatalf("no summary line in %q", stdout)
	}
	return steps, sum
}

// writes counts the requests that change something.
func (p *countingProxy) writes() int {
	return p.count("POST", "") + p.count("PUT", "") + p.count("PATCH", "") + p.count("DELETE", "")
}

// TestCLICopyTree: cp -r up and back down gives the same tree (diff -r),
// and run again sends nothing.
func TestCLICopyTree(t *testing.T) {
	t.Parallel()
	proxy, env := countedCLI(t, "cli-cp-tree")
	root := makeTree(t)
	n := countFiles(t, root)

	stdout, stderr, err := env.run("cp", "-r", root, "trees/one/")
	if err != nil {
		t.Fatalf("cp -r up: %v\n%s", err, stderr)
	}
	steps, sum := treeLines(t, stdout)
	if sum.Uploaded != n || len(steps) != n || sum.Failed != 0 || sum.Skipped != 0 {
		t.Fatalf("cp -r up of %d files: %+v, %d lines\n%s", n, sum, len(steps), stderr)
	}
	for _, s := range steps {
		if s.Op != "upload" || s.Status != "done" || !s.New || s.FileID == "" || !strings.HasPrefix(s.Path, "trees/one/") {
			t.Fatalf("step %+v", s)
		}
	}
	if got := proxy.count("POST", "/v1/files"); got != n {
		t.Fatalf("%d POST /v1/files for %d files", got, n)
	}

	proxy.reset()
	stdout, stderr, err = env.run("cp", "-r", root, "trees/one/")
	if err != nil {
		t.Fatalf("cp -r up again: %v\n%s", err, stderr)
	}
	if _, sum = treeLines(t, stdout); sum.Uploaded != 0 || sum.Unchanged != n || proxy.writes() != 0 {
		t.Fatalf("cp -r again: %+v, %d writes; want nothing sent", sum, proxy.writes())
	}

	back := filepath.Join(t.TempDir(), "back")
	stdout, stderr, err = env.run("cp", "-r", "trees/one", back)
	if err != nil {
		t.Fatalf("cp -r down: %v\n%s", err, stderr)
	}
	if _, sum = treeLines(t, stdout); sum.Downloaded != n || sum.Failed != 0 {
		t.Fatalf("cp -r down: %+v\n%s", sum, stderr)
	}
	diffTrees(t, root, back)

	// A folder without -r, or a directory without it, is a usage error.
	if _, _, err := env.run("cp", "trees/one/", back); exitCode(err) != 2 || !strings.Contains(err.Error(), "cp -r") {
		t.Fatalf("cp of a folder without -r: %v", err)
	}
	if _, _, err := env.run("cp", root, "trees/two/"); exitCode(err) != 2 || !strings.Contains(err.Error(), "cp -r") {
		t.Fatalf("cp of a directory without -r: %v", err)
	}
}

// TestCLICopyOneFile: cp copies one file up and down, into folders, and
// with explicit agentfs: paths.
func TestCLICopyOneFile(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-cp-one")
	local := writeLocal(t, "note.txt", "a note\n")

	f := env.file(t, "cp", local, "notes/")
	if f.Path != "notes/note.txt" || f.SizeBytes != 7 {
		t.Fatalf("cp into a folder made %+v", f)
	}
	if g := env.file(t, "cp", local, "agentfs:notes/renamed.txt"); g.Path != "notes/renamed.txt" {
		t.Fatalf("cp to agentfs:PATH made %+v", g)
	}
	dir := t.TempDir()
	if g := env.file(t, "cp", "notes/note.txt", dir+"/"); g.ID != f.ID {
		t.Fatalf("cp down printed %+v", g)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "note.txt")); string(got) != "a note\n" {
		t.Fatalf("cp down wrote %q", got)
	}
	if g := env.file(t, "cp", f.ID, filepath.Join(dir, "by-id.txt")); g.ID != f.ID {
		t.Fatalf("cp down by id printed %+v", g)
	}
	if _, _, err := env.run("cp", "notes/note.txt", "notes/other.txt"); exitCode(err) != 2 || !strings.Contains(err.Error(), "both remote") {
		t.Fatalf("cp between two remote paths: %v", err)
	}
	if _, _, err := env.run("cp", local, dir); exitCode(err) != 2 || !strings.Contains(err.Error(), "both local") {
		t.Fatalf("cp between two local paths: %v", err)
	}
}

// TestCLISyncTree: sync sends only what changed (a second sync sends
// nothing), --dry-run changes nothing, --delete deletes what the source
// lacks, both ways, and the trees end alike (diff -r).
func TestCLISyncTree(t *testing.T) {
	t.Parallel()
	proxy, env := countedCLI(t, "cli-sync-tree")
	root := makeTree(t)
	n := countFiles(t, root)

	sync := func(args ...string) ([]stepLine, treeSummary) {
		t.Helper()
		stdout, stderr, err := env.run(append([]string{"sync"}, args...)...)
		if err != nil {
			t.Fatalf("sync %v: %v\n%s", args, err, stderr)
		}
		return treeLines(t, stdout)
	}
	if _, sum := sync(root, "mirror/"); sum.Uploaded != n || sum.Failed != 0 {
		t.Fatalf("first sync: %+v", sum)
	}
	proxy.reset()
	if steps, sum := sync(root, "mirror/"); len(steps) != 0 || sum.Uploaded != 0 || sum.Unchanged != n || proxy.writes() != 0 {
		t.Fatalf("second sync: %d steps, %+v, %d writes; want nothing sent", len(steps), sum, proxy.writes())
	}

	// Change one file (same size: told apart by SHA-256), add one,
	// remove one (and its folder).
	must(t, os.WriteFile(filepath.Join(root, "top.txt"), []byte("at the TOP\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "a/b/new.txt"), []byte("new"), 0o644))
	must(t, os.RemoveAll(filepath.Join(root, "café"))) // AgentFS keeps no empty folders

	proxy.reset()
	steps, sum := sync(root, "mirror/", "--delete", "--dry-run")
	if proxy.writes() != 0 || sum.Uploaded != 2 || sum.Deleted != 1 || !sum.DryRun || len(steps) != 3 {
		t.Fatalf("dry run: %+v, %d writes, steps %+v", sum, proxy.writes(), steps)
	}
	for _, s := range steps {
		if s.Status != "planned" {
			t.Fatalf("dry run step %+v", s)
		}
	}
	if _, sum := sync(root, "mirror/", "--dry-run"); sum.Deleted != 0 || sum.Uploaded != 2 {
		t.Fatalf("dry run without --delete: %+v", sum)
	}

	proxy.reset()
	steps, sum = sync(root, "mirror/", "--delete")
	if sum.Uploaded != 2 || sum.Deleted != 1 || sum.Unchanged != n-2 || len(steps) != 3 {
		t.Fatalf("sync --delete: %+v, steps %+v", sum, steps)
	}
	if got := proxy.count("POST", "/v1/files") + proxy.count("DELETE", ""); got != 3 || proxy.writes() != 3 {
		t.Fatalf("sync --delete made %d writes (%d uploads and deletes), want 3", proxy.writes(), got)
	}
	for _, s := range steps {
		if s.Path == "mirror/top.txt" && (s.New || s.Op != "upload") || s.Path == "mirror/café/crème brûlée.txt" && s.Op != "delete" {
			t.Fatalf("step %+v", s)
		}
	}
	if files := env.list(t, "--prefix", "mirror/"); len(files) != n {
		t.Fatalf("mirror/ holds %d files, want %d", len(files), n)
	}

	// Down: into a new directory, then --delete removes a stray file there
	// (and the folder it leaves empty), and leaves the trees alike.
	down := filepath.Join(t.TempDir(), "down")
	if _, sum := sync("mirror/", down); sum.Downloaded != n {
		t.Fatalf("sync down: %+v", sum)
	}
	diffTrees(t, root, down)
	must(t, os.MkdirAll(filepath.Join(down, "stray"), 0o755))
	must(t, os.WriteFile(filepath.Join(down, "stray/x.txt"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(down, "top.txt"), []byte("edited here"), 0o644))
	if _, sum := sync("mirror/", down, "--dry-run", "--delete"); sum.Downloaded != 1 || sum.Deleted != 1 {
		t.Fatalf("dry run down: %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(down, "stray/x.txt")); err != nil {
		t.Fatalf("the dry run removed a file: %v", err)
	}
	if _, sum := sync("mirror/", down, "--delete"); sum.Downloaded != 1 || sum.Deleted != 1 || sum.Unchanged != n-1 {
		t.Fatalf("sync down --delete: %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(down, "stray")); !os.IsNotExist(err) {
		t.Fatalf("the emptied folder stayed: %v", err)
	}
	diffTrees(t, root, down)
	proxy.reset()
	if steps, sum := sync("mirror/", down, "--delete"); len(steps) != 0 || sum.Downloaded != 0 || proxy.count("GET", "/content") != 0 {
		t.Fatalf("second sync down: %+v, %d content reads", sum, proxy.count("GET", "/content"))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
