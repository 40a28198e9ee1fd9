package mount_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mount"
)

// repoRoot is this repository's root, whose source the tests copy in.
func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestGitInTheMount: a clone of a local repository into the mount is
// clean, and an edit, a commit and the log work as on a disk.
func TestGitInTheMount(t *testing.T) {
	w := newWorld(t)
	dir, _ := mounted(t, w.client(t), mount.Options{Prefix: "git", KernelCacheTimeout: -1})
	src := t.TempDir()
	sh(t, src, "git init -q -b main . && printf 'one\\n' > a.txt && mkdir -p d && printf 'two\\n' > d/b.txt && git add . && git commit -qm first")
	sh(t, dir, "git clone -q "+src+" repo")
	// What git recorded at checkout (it fstats a file before closing it)
	// is what the stored file shows: git reads none of them again.
	if d := indexStatDiffs(t, filepath.Join(dir, "repo")); len(d) > 0 {
		t.Fatalf("stored files show other times than git recorded at checkout:\n%s", strings.Join(d, "\n"))
	}
	if out := sh(t, filepath.Join(dir, "repo"), "git status --porcelain"); out != "" {
		t.Fatalf("a fresh clone is not clean:\n%s", out)
	}
	repo := filepath.Join(dir, "repo")
	sh(t, repo, "printf 'edited\\n' >> a.txt && git commit -qam second")
	if out := sh(t, repo, "git log --format=%s"); out != "second\nfirst" {
		t.Fatalf("git log: %q", out)
	}
	if out := sh(t, repo, "git status --porcelain && git fsck --no-progress 2>&1"); out != "" {
		t.Fatalf("after the commit: %q", out)
	}
}

// TestUntarDiffGrepSed: a tar of this repository's Go source unpacked in
// the mount is byte for byte the original (diff -r), grep -r finds what it
// finds on disk, and sed -i edits in place.
func TestUntarDiffGrepSed(t *testing.T) {
	w := newWorld(t)
	dir, _ := mounted(t, w.client(t), mount.Options{})
	root := repoRoot(t)
	tarball := filepath.Join(t.TempDir(), "src.tar")
	sh(t, root, "tar -cf "+tarball+" storage handlers admission")
	orig := t.TempDir()
	sh(t, orig, "tar -xf "+tarball)
	sh(t, dir, "tar -xf "+tarball)
	if n := sh(t, dir, "find . -type f | wc -l"); n < "100" && len(n) < 3 {
		t.Fatalf("only %s files unpacked", n)
	}
	sh(t, dir, "diff -r "+orig+" .")
	want := sh(t, orig, "grep -rn 'func (s \\*Store) ListChildren' . | sort")
	if got := sh(t, dir, "grep -rn 'func (s \\*Store) ListChildren' . | sort"); got != want || got == "" {
		t.Fatalf("grep -r in the mount: %q, on disk %q", got, want)
	}
	sh(t, dir, "sed -i 's/ListChildren/ListFolderEntries/g' storage/children.go")
	if got := sh(t, dir, "grep -c ListFolderEntries storage/children.go"); got == "0" {
		t.Fatal("sed -i changed nothing")
	}
	if out := sh(t, dir, "grep -c ListChildren storage/children.go || true"); out != "0" {
		t.Fatalf("sed -i left %s lines", out)
	}
}

// TestEditorAtomicSave: writing a temporary file and renaming it over the
// original (what editors and git do) keeps one file, its id and its whole
// history.
func TestEditorAtomicSave(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	dir, _ := mounted(t, c, mount.Options{})
	sh(t, dir, "printf 'v1' > notes.md")
	_, before := stored(t, c, "notes.md")
	for _, v := range []string{"v2", "v3"} {
		sh(t, dir, "printf '"+v+"' > .notes.md.swp && mv .notes.md.swp notes.md")
	}
	body, after := stored(t, c, "notes.md")
	if body != "v3" || after.ID != before.ID || after.Version != before.Version+2 {
		l, _ := c.ListVersions(context.Background(), after.ID, client.VersionListOptions{})
		var vs []string
		for _, v := range l.Data {
			vs = append(vs, fmt.Sprintf("%d:%d:%s", v.Version, v.SizeBytes, v.SHA256[:6]))
		}
		t.Fatalf("after two saves: %q version %d id %s (was %s); versions %v", body, after.Version, after.ID, before.ID, vs)
	}
	page, err := c.ListFiles(context.Background(), client.ListOptions{Prefix: ".notes"})
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("temporary files stay live: %v %v", page, err)
	}
	if out := sh(t, dir, "ls -a"); strings.Contains(out, "swp") {
		t.Fatalf("ls shows %q", out)
	}
}

// TestRsyncAndPython: rsync -a copies a tree in and out unchanged (modes
// and mtimes too), and Python writes and renames files.
func TestRsyncAndPython(t *testing.T) {
	w := newWorld(t)
	dir, _ := mounted(t, w.client(t), mount.Options{})
	src := t.TempDir()
	sh(t, src, "mkdir -p t/u && printf 'x' > t/a && printf 'yy' > t/u/b && chmod 750 t/u/b && touch -d 2020-01-01 t/a")
	sh(t, dir, "rsync -a "+src+"/t/ in/")
	back := t.TempDir()
	sh(t, back, "rsync -a "+dir+"/in/ out/")
	sh(t, back, "diff -r "+src+"/t out")
	if got := sh(t, back, "stat -c '%a %Y' out/u/b out/a"); got != sh(t, src, "stat -c '%a %Y' t/u/b t/a") {
		t.Fatalf("modes and mtimes after rsync out and in: %s", got)
	}
	py := `
import os
with open("py.txt", "w") as f:
    f.write("from python\n")
os.rename("py.txt", "renamed.txt")
with open("renamed.txt", "a") as f:
    f.write("appended\n")
print(open("renamed.txt").read(), end="")
`
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, dir, "python3 -c '"+py+"'"); out != "from python\nappended" {
		t.Fatalf("python: %q", out)
	}
}
