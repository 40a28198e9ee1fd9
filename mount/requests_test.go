package mount_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/mount"
)

// counting counts the requests a client sends, by method and path, apart
// from the event feed's.
type counting struct {
	mu   sync.Mutex
	seen []string
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(r.URL.Path, "/v1/events") {
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen
	c.seen = nil
	return s
}

// TestMadeFolderAsksNothingOfMissingNames: in a folder the mount made, a
// new file costs its store alone (no lookup of the name that is not
// there yet), and a file written into that folder elsewhere still shows
// (the feed reports it, and from then on the folder is asked again).
func TestMadeFolderAsksNothingOfMissingNames(t *testing.T) {
	w := newWorld(t)
	cnt := &counting{}
	dir, _ := mounted(t, w.client(t, client.WithHTTPClient(&http.Client{Transport: cnt})), mount.Options{Prefix: "made"})
	if err := os.Mkdir(filepath.Join(dir, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	cnt.take()
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, "new", name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := cnt.take()
	if len(got) != 3 {
		t.Fatalf("three new files in a made folder sent %d requests, want their 3 stores: %q", len(got), got)
	}
	for _, r := range got {
		if !strings.HasPrefix(r, "POST /v1/files") {
			t.Fatalf("a request other than a store: %q", got)
		}
	}
	w.restWriteShows(t, "made/new/remote.txt", "from REST", filepath.Join(dir, "new", "remote.txt"),
		"a REST write into the made folder shows in the mount")
	if got := sh(t, filepath.Join(dir, "new"), "ls | tr '\\n' ' '"); got != "a.txt b.txt c.txt remote.txt" {
		t.Fatalf("ls of the made folder: %q", got)
	}
}

// gets are the GET requests among reqs.
func gets(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// pastKernelCache waits until the kernel's entries and attributes of a
// mount with a KernelCacheTimeout of a second expired, so the next calls
// reach the mount.
func pastKernelCache() { time.Sleep(1500 * time.Millisecond) }

// TestGrepAfterUntarAsksNothing: tar -x stores each file with one request
// (its mode and mtime ride on the store), and grep -r of what it unpacked
// then sends none: the folders the mount made know their entries, an
// open of a file whose folder knows it reads no metadata again, and the
// bytes the mount just stored are read from its cache.
func TestGrepAfterUntarAsksNothing(t *testing.T) {
	w := newWorld(t)
	cnt := &counting{}
	dir, _ := mounted(t, w.client(t, client.WithHTTPClient(&http.Client{Transport: cnt})), mount.Options{Prefix: "g", KernelCacheTimeout: time.Second})
	src := t.TempDir()
	sh(t, src, "mkdir -p tree/d && for i in 1 2 3 4; do echo package p$i > tree/d/f$i.go; done && chmod 755 tree/d/f1.go && "+
		"touch -d 2001-02-03T04:05:06Z tree/d/f2.go && tar -cf t.tar tree")
	sh(t, dir, "ls > /dev/null") // the mount's root is listed
	cnt.take()
	sh(t, dir, "tar -xf "+filepath.Join(src, "t.tar"))
	got := cnt.take()
	if len(got) != 6 {
		t.Fatalf("tar -x of 2 folders and 4 files sent %d requests, want 6 stores: %q", len(got), got)
	}
	for _, r := range got {
		if !strings.HasPrefix(r, "POST /v1/files?") {
			t.Fatalf("tar -x sent more than its stores: %q", got)
		}
	}
	if _, f := stored(t, w.client(t), "g/tree/d/f2.go"); f == nil || f.MTime.Year() != 2001 {
		t.Fatalf("the mtime tar set did not ride on the store: %+v", f)
	}
	if _, f := stored(t, w.client(t), "g/tree/d/f1.go"); f == nil || f.Mode != 0o755 {
		t.Fatalf("the mode tar set did not ride on the store: %+v", f)
	}
	pastKernelCache()
	cnt.take()
	if out := sh(t, dir, "grep -r -c package tree | sort"); out != "tree/d/f1.go:1\ntree/d/f2.go:1\ntree/d/f3.go:1\ntree/d/f4.go:1" {
		t.Fatalf("grep -r: %q", out)
	}
	if got := cnt.take(); len(got) != 0 {
		t.Fatalf("grep -r after tar -x sent %d requests, want none: %q", len(got), got)
	}
	// What another door stores is still seen: the feed makes the folder
	// forget, and the next open reads the new version.
	w.restReplaceShows(t, "g/tree/d/f3.go", "package changed\n", filepath.Join(dir, "tree/d/f3.go"))
}

// restReplaceShows replaces the file at path through the REST API and
// waits for the mount to read the new content at local.
func (w *world) restReplaceShows(t *testing.T, path, content, local string) {
	t.Helper()
	if _, err := w.client(t).PutFile(context.Background(), path, bytesReader(content), client.PutOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mount reads the REST replace of "+path, func() bool {
		got, _ := os.ReadFile(local)
		return string(got) == content
	})
}

// TestListedFolderAnswersLookups: in a folder the mount did not make, the
// first lookup lists the folder once (delimiter=/), and the lookups, stats
// and opens of its other names then ask nothing, until the feed reports
// a change under it.
func TestListedFolderAnswersLookups(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.client(t)
	for i := range 5 {
		if _, err := c.PutFile(ctx, fmt.Sprintf("l/d/f%d.txt", i), bytesReader(fmt.Sprint("file ", i)), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cnt := &counting{}
	dir, _ := mounted(t, w.client(t, client.WithHTTPClient(&http.Client{Transport: cnt})), mount.Options{Prefix: "l", KernelCacheTimeout: time.Second})
	sh(t, dir, "test -d d")
	cnt.take()
	if out := sh(t, dir, "stat -c %s d/f0.txt d/f1.txt d/f2.txt d/f3.txt d/f4.txt | tr '\\n' ' '; test ! -e d/none"); out != "6 6 6 6 6" {
		t.Fatalf("stat: %q", out)
	}
	got := cnt.take()
	if len(got) != 1 || !strings.Contains(got[0], "delimiter=%2F") || !strings.Contains(got[0], "prefix=l%2Fd%2F") {
		t.Fatalf("stat of 5 files and a missing name in a folder sent %q, want its one listing", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "d/f2.txt")); err != nil || string(b) != "file 2" {
		t.Fatalf("read: %q %v", b, err)
	}
	if got := gets(cnt.take()); len(got) != 1 || !strings.Contains(got[0], "/content") {
		t.Fatalf("a read of a listed file sent %q, want its content alone", got)
	}
	pastKernelCache()
	if b, err := os.ReadFile(filepath.Join(dir, "d/f2.txt")); err != nil || string(b) != "file 2" {
		t.Fatalf("read again: %q %v", b, err)
	}
	if got := cnt.take(); len(got) != 0 {
		t.Fatalf("a read again of the same version sent %q, want nothing", got)
	}
	w.restWriteShows(t, "l/d/new.txt", "new", filepath.Join(dir, "d/new.txt"), "a REST write into the listed folder shows")
	w.restReplaceShows(t, "l/d/f0.txt", "replaced", filepath.Join(dir, "d/f0.txt"))
}

// TestGitStatusReadsNothing: git status in a clone the mount made stats
// every file and reads the index: it reads nothing from the store but a
// folder's listing where the mode and mtime it holds are older than the
// mount trusts them (git may still store a refreshed index).
func TestGitStatusReadsNothing(t *testing.T) {
	w := newWorld(t)
	cnt := &counting{}
	dir, _ := mounted(t, w.client(t, client.WithHTTPClient(&http.Client{Transport: cnt})), mount.Options{Prefix: "git", KernelCacheTimeout: time.Second})
	src := t.TempDir()
	sh(t, src, "git init -q -b main . && mkdir -p a/b && for i in 1 2 3; do echo $i > a/b/f$i; echo $i > top$i; done && git add -A && git commit -qm x")
	sh(t, dir, "git clone -q "+src+" clone && cd clone && git status --porcelain")
	folders := strings.Count(sh(t, filepath.Join(dir, "clone"), "find . -type d"), "\n") + 1
	pastKernelCache()
	cnt.take()
	if out := sh(t, filepath.Join(dir, "clone"), "git status --porcelain"); out != "" {
		t.Fatalf("git status: %q", out)
	}
	listings := 0
	for _, r := range gets(cnt.take()) {
		if !strings.Contains(r, "delimiter=%2F") {
			t.Fatalf("git status in a clone the mount made read from the store: %q", r)
		}
		listings++
	}
	if listings > folders {
		t.Fatalf("git status listed %d times, more than the clone's %d folders", listings, folders)
	}
}

// TestChmodElsewhereShows: a chmod made through another door makes no
// event (no new version), yet a mount whose folder knows the file shows
// it once the mode it holds is older than it trusts (MetadataTTL, a
// minute unless set), and not before. The metadata's age is read on the
// mount's clock (Options.Now), which the test moves.
func TestChmodElsewhereShows(t *testing.T) {
	w := newWorld(t)
	const ttl = time.Hour
	var clock atomic.Int64 // nanoseconds added to the real time
	now := func() time.Time { return time.Now().Add(time.Duration(clock.Load())) }
	// The kernel keeps nothing: each stat asks the mount.
	dir, _ := mounted(t, w.client(t), mount.Options{Prefix: "ch", MetadataTTL: ttl, KernelCacheTimeout: -1, Now: now})
	local := filepath.Join(dir, "x.sh")
	if err := os.WriteFile(local, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, f := stored(t, w.client(t), "ch/x.sh")
	if f == nil {
		t.Fatal("not stored")
	}
	mode := 0o755
	if _, err := w.client(t).SetMetadata(context.Background(), f.ID, client.MetaOptions{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	// The mount's folder still trusts the mode it holds.
	if st, err := os.Stat(local); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("before the mode is %v old the mount shows %v (%v), want the 0644 it holds", ttl, st.Mode().Perm(), err)
	}
	clock.Store(int64(ttl + time.Second))
	eventually(t, "the mount shows a chmod made elsewhere", func() bool {
		st, err := os.Stat(local)
		return err == nil && st.Mode().Perm() == 0o755
	})
}

// TestRemoveListedFolder: rm -rf of a folder the mount listed (its files
// stored elsewhere, no marker) leaves no entry behind in what its parent
// knows.
func TestRemoveListedFolder(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.client(t)
	for _, p := range []string{"r/d/a.txt", "r/d/sub/b.txt", "r/keep.txt"} {
		if _, err := c.PutFile(ctx, p, bytesReader(p), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ := mounted(t, c, mount.Options{Prefix: "r"})
	if got := sh(t, dir, "ls | tr '\\n' ' '"); got != "d keep.txt" {
		t.Fatalf("ls: %q", got)
	}
	sh(t, dir, "rm -rf d")
	if got := sh(t, dir, "ls | tr '\\n' ' '; test ! -e d && echo gone"); got != "keep.txt gone" {
		t.Fatalf("after rm -rf d: %q", got)
	}
	if page, err := c.ListFiles(ctx, client.ListOptions{Prefix: "r/d/"}); err != nil || len(page.Data) != 0 {
		t.Fatalf("stored under r/d/: %+v %v", page, err)
	}
}
