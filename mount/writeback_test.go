package mount_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/mount"
)

// quickTree is the tree the bench's quick mount line untars: Go's src/net.
func quickTree(t *testing.T) string {
	t.Helper()
	tree := filepath.Join(runtime.GOROOT(), "src", "net")
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		t.Fatalf("no Go source tree at %s (%v): the write-back tests untar it", tree, err)
	}
	return tree
}

// settle waits for a write-back mount's pending stores.
func settle(t *testing.T, m *mount.Mount) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Settle(ctx); err != nil {
		t.Fatalf("settle: %v (%d pending)", err, m.Pending())
	}
}

// TestWriteBackUntar: tar -x of the quick tree into a write-back mount,
// then Settle: every file's bytes, mode and mtime through the API are the
// originals', each in exactly one version.
func TestWriteBackUntar(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	dir, m := mounted(t, c, mount.Options{Prefix: "wb", WriteBack: true, CacheDir: t.TempDir()})
	tree := quickTree(t)
	tarball := filepath.Join(t.TempDir(), "net.tar")
	sh(t, filepath.Dir(tree), "tar -cf "+tarball+" net")
	orig := t.TempDir()
	sh(t, orig, "tar -xf "+tarball)
	sh(t, dir, "tar -xf "+tarball)
	// Before the stores finish, the mount shows the tree as on disk.
	sh(t, dir, "diff -r "+orig+" .")
	settle(t, m)
	if n := m.Pending(); n != 0 {
		t.Fatalf("%d pending after Settle", n)
	}

	ctx := context.Background()
	storedFiles := map[string]client.File{}
	for f, err := range c.AllFiles(ctx, client.ListOptions{Prefix: "wb/", Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == "file" {
			storedFiles[strings.TrimPrefix(f.Path, "wb/")] = *f
		}
	}
	count := 0
	err := filepath.WalkDir(orig, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		count++
		rel, _ := filepath.Rel(orig, p)
		f, ok := storedFiles[rel]
		if !ok {
			t.Errorf("%s was not stored", rel)
			return nil
		}
		delete(storedFiles, rel)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if f.Version != 1 {
			t.Errorf("%s: version %d, want exactly one", rel, f.Version)
		}
		if f.Mode != int32(st.Mode().Perm()) || !f.MTime.Equal(st.ModTime()) {
			t.Errorf("%s: mode %o mtime %v, on disk %o %v", rel, f.Mode, f.MTime, st.Mode().Perm(), st.ModTime())
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		body, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
		if got := testkit.ReadAll(t, body, err); string(got) != string(want) {
			t.Errorf("%s: stored %d bytes differ from the original's %d", rel, len(got), len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count < 400 {
		t.Fatalf("only %d files in the tree", count)
	}
	if len(storedFiles) != 0 {
		t.Fatalf("stored files that are not in the tree: %d", len(storedFiles))
	}
}

// holdingProxy forwards every request to the real server at target, but
// holds the stores (POST /v1/files): the first is forwarded and its answer
// held (it commits, the mount does not hear it), the others wait before
// they are forwarded, until release is closed; a held store whose caller
// went away is never forwarded.
type holdingProxy struct {
	*httptest.Server
	release   chan struct{}
	committed chan struct{} // closed once the first store's answer came back
	held      atomic.Int64
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{release: make(chan struct{}), committed: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	var first sync.Once
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/files" {
			rp.ServeHTTP(w, r)
			return
		}
		isFirst := false
		first.Do(func() { isFirst = true })
		if isFirst {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
			close(p.committed)
			<-p.release
			http.Error(w, "held", http.StatusBadGateway)
			return
		}
		// The body read whole, so the server notices the caller's
		// connection closing (and cancels the request's context).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.held.Add(1)
		defer p.held.Add(-1)
		select {
		case <-p.release:
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			return // the mount is gone: never forwarded
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		select {
		case <-p.release:
		default:
			close(p.release)
		}
		p.Close()
	})
	return p
}

// TestWriteBackSIGKILLSendsPendingOnRemount: a write-back mount killed
// while its stores are held in front of the server (one of them already
// committed, its answer not heard) leaves them in its cache dir; a new
// write-back mount on it sends them: every file stored, each in exactly
// one version, with its content.
func TestWriteBackSIGKILLSendsPendingOnRemount(t *testing.T) {
	w := newWorld(t)
	proxy := newHoldingProxy(t, w.srv.URL)
	dir, cache := t.TempDir(), t.TempDir()
	kill := mountChild(t, dir, "AGENTFS_MOUNT_CHILD_CACHE="+cache, "AGENTFS_URL="+proxy.URL, "AGENTFS_TOKEN="+w.tok)
	const files = 20
	for i := 1; i <= files; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("closed %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-proxy.committed:
	case <-time.After(20 * time.Second):
		t.Fatal("no store reached the server")
	}
	eventually(t, "the other workers' stores are held", func() bool { return proxy.held.Load() >= 3 })
	kill()
	if out, err := exec.Command("fusermount3", "-uz", dir).CombinedOutput(); err != nil {
		t.Fatalf("unmount after the kill: %v %s", err, out)
	}
	eventually(t, "the held stores see their caller gone", func() bool { return proxy.held.Load() == 0 })
	close(proxy.release)

	// The remount carries the killed mount's attribution (its --run), as
	// the same command run again does: a replayed key's request is the
	// same request.
	c := w.client(t, client.WithRunID("killed"))
	ctx := context.Background()
	before, err := c.ListFiles(ctx, client.ListOptions{Prefix: "k/", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Data) != 1 {
		t.Fatalf("before the remount the server holds %d files, want the one store that committed", len(before.Data))
	}
	if n := mount.CountPending(cache); n != files {
		t.Fatalf("the cache dir holds %d pending stores, want %d (the committed one's answer was never heard)", n, files)
	}

	again, m := mounted(t, c, mount.Options{Prefix: "k", WriteBack: true, CacheDir: cache})
	if n := m.Pending(); n != 0 {
		t.Fatalf("%d stores pending after the remount's start", n)
	}
	if n := mount.CountPending(cache); n != 0 {
		t.Fatalf("the cache dir still holds %d pending stores", n)
	}
	seen := livePaths(t, c, "k/")
	for _, f := range seen {
		if f.Version != 1 {
			t.Errorf("%s has %d versions, want one", f.Path, f.Version)
		}
		var i int
		if _, err := fmt.Sscanf(f.Path, "k/f%d.txt", &i); err != nil {
			t.Fatalf("unexpected file %s", f.Path)
		}
		if body, _ := stored(t, c, f.Path); body != fmt.Sprintf("closed %d\n", i) {
			t.Errorf("%s holds %q", f.Path, body)
		}
	}
	if len(seen) != files {
		t.Fatalf("%d files stored, want %d: %v", len(seen), files, seen)
	}
	if got := sh(t, again, "cat f7.txt && ls | grep -c '^f'"); got != "closed 7\n20" {
		t.Fatalf("the remount shows %q", got)
	}
}

// slowStores is a reverse proxy to the real server at target that delays
// every store (POST /v1/files) by delay, so a write-back mount's closes
// stay pending a while.
func slowStores(t *testing.T, target string, delay time.Duration) string {
	return storeProxy(t, target, func(*http.Request) bool { time.Sleep(delay); return true })
}

// storeProxy is a reverse proxy to the real server at target that calls
// wait before it forwards a store (POST /v1/files); a store wait answers
// false for is dropped (its caller went away).
func storeProxy(t *testing.T, target string, wait func(*http.Request) bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/files" && !wait(r) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// slowWriteBack is a write-back mount of p/ whose stores each take 300 ms
// longer (slowStores), and a client of the same world without the delay.
func slowWriteBack(t *testing.T) (*client.Client, string, *mount.Mount) {
	t.Helper()
	w := newWorld(t)
	slow, err := client.New(slowStores(t, w.srv.URL, 300*time.Millisecond), w.tok)
	if err != nil {
		t.Fatal(err)
	}
	dir, m := mounted(t, slow, mount.Options{Prefix: "p", WriteBack: true, CacheDir: t.TempDir()})
	return w.client(t), dir, m
}

// TestWriteBackPendingFile: while a closed file's store is pending, stat
// and readdir show its content's size and mode, a read in the same mount
// returns the new bytes, and a rename, an unlink, a reopen-and-append and
// a chmod of it right after its close end in the right state on the
// server, in order.
func TestWriteBackPendingFile(t *testing.T) {
	c, dir, m := slowWriteBack(t)
	at := func(p string) string { return filepath.Join(dir, p) }
	for _, name := range []string{"read.txt", "moved.txt", "gone.txt", "append.txt", "chmod.txt"} {
		if err := os.WriteFile(at(name), []byte("first "+name), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if m.Pending() == 0 {
		t.Fatal("nothing pending right after the closes: the stores are not written back")
	}
	// A shell redirect closes the new file (empty) before it writes, then
	// closes it again: the second store queues behind the first and is
	// conditional on the version the first makes.
	sh(t, dir, "echo redirected > redirect.txt")
	st, err := os.Stat(at("chmod.txt"))
	if err != nil || st.Size() != int64(len("first chmod.txt")) || st.Mode().Perm() != 0o640 {
		t.Fatalf("stat of a pending file: %v %v", st, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 6 {
		t.Fatalf("readdir with stores pending: %v %v", ents, err)
	}
	if got, err := os.ReadFile(at("read.txt")); err != nil || string(got) != "first read.txt" {
		t.Fatalf("read after close: %q %v", got, err)
	}
	if err := os.Rename(at("moved.txt"), at("renamed.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(at("gone.txt")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(at("append.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(" then more"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(at("chmod.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A close of one descriptor of an open file records what it holds;
	// a write through the other one after it must not change that record
	// (the second store waits behind the first, still being sent).
	twice, err := os.Create(at("twice.txt"))
	if err != nil {
		t.Fatal(err)
	}
	closeDup := func() {
		dup, err := syscall.Dup(int(twice.Fd()))
		if err == nil {
			err = syscall.Close(dup)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	closeDup()
	for _, s := range []string{"one", " two"} {
		if _, err := twice.WriteString(s); err != nil {
			t.Fatal(err)
		}
		closeDup()
	}
	if err := twice.Close(); err != nil {
		t.Fatal(err)
	}
	settle(t, m)

	ctx := context.Background()
	versions := func(f *client.File) int {
		l, err := c.ListVersions(ctx, f.ID, client.VersionListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Data)
	}
	if body, f := stored(t, c, "p/read.txt"); body != "first read.txt" || versions(f) != 1 {
		t.Fatalf("read.txt: %q", body)
	}
	if _, f := stored(t, c, "p/moved.txt"); f != nil {
		t.Fatalf("moved.txt is still there: %+v", f)
	}
	if body, f := stored(t, c, "p/renamed.txt"); body != "first moved.txt" || versions(f) != 1 {
		t.Fatalf("renamed.txt: %q", body)
	}
	if _, f := stored(t, c, "p/gone.txt"); f != nil {
		t.Fatalf("gone.txt is still live: %+v", f)
	}
	if body, f := stored(t, c, "p/append.txt"); body != "first append.txt then more" || versions(f) != 2 {
		t.Fatalf("append.txt: %q in %d versions", body, versions(f))
	}
	if body, f := stored(t, c, "p/chmod.txt"); body != "first chmod.txt" || f.Mode != 0o600 {
		t.Fatalf("chmod.txt: %q mode %o", body, f.Mode)
	}
	if body, f := stored(t, c, "p/redirect.txt"); body != "redirected\n" || versions(f) != 2 {
		t.Fatalf("redirect.txt: %q in %d versions", body, versions(f))
	}
	body, tf := stored(t, c, "p/twice.txt")
	if body != "one two" || versions(tf) != 3 {
		t.Fatalf("twice.txt: %q in %d versions", body, versions(tf))
	}
	r, err := c.VersionContent(ctx, tf.ID, 2, client.ContentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(first) != "one" {
		t.Fatalf("twice.txt's first version: %q %v", first, err)
	}
}

// TestWriteBackRefusedStore: a write-back mount with a token scoped to P/
// stores nothing outside it: the close returns, the store is refused, its
// record and content land in failed/ with the problem, the file answers
// EIO, and what lies inside the grant is stored.
func TestWriteBackRefusedStore(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.client(t)
	if _, err := c.PutFile(ctx, "P/in.txt", bytesReader("in"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, client.TokenOptions{Scopes: []string{"read", "write"}, Prefixes: []string{"P/"}, ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	dir, m := mounted(t, w.clientWith(t, *tok.Token), mount.Options{WriteBack: true, CacheDir: cache})
	if err := os.WriteFile(filepath.Join(dir, "outside.txt"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the close of a file outside the grant: %v (write-back reports the refusal after it)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "P", "inside.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	settle(t, m)
	if n := m.Refused(); n != 1 {
		t.Fatalf("%d stores refused, want 1", n)
	}
	if _, f := stored(t, c, "outside.txt"); f != nil {
		t.Fatalf("a write outside the grant was stored: %+v", f)
	}
	if got, _ := stored(t, c, "P/inside.txt"); got != "inside" {
		t.Fatalf("inside the grant: %q", got)
	}
	records, _ := filepath.Glob(filepath.Join(cache, "failed", "*.json"))
	if len(records) != 1 {
		t.Fatalf("failed/ holds %v", records)
	}
	b, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Path, Problem string }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Path != "outside.txt" || !strings.Contains(rec.Problem, "403") {
		t.Fatalf("the failed record: %s (%v)", b, err)
	}
	if data, err := os.ReadFile(strings.TrimSuffix(records[0], ".json") + ".data"); err != nil || string(data) != "x" {
		t.Fatalf("the refused content in failed/: %q %v", data, err)
	}
	if mount.CountPending(cache) != 0 {
		t.Fatal("the refused store is still pending")
	}
	if _, err := os.ReadFile(filepath.Join(dir, "outside.txt")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("open of the refused file: %v, want EIO", err)
	}
	if err := os.Remove(filepath.Join(dir, "outside.txt")); err != nil {
		t.Fatalf("rm of the refused file: %v", err)
	}
}

// TestWriteBackCacheDir: write-back needs a cache dir, and one write-back
// mount holds it at a time.
func TestWriteBackCacheDir(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	if _, err := mount.New(c, t.TempDir(), mount.Options{WriteBack: true}); err == nil || !strings.Contains(err.Error(), "cache dir") {
		t.Fatalf("write-back without a cache dir: %v", err)
	}
	cache := t.TempDir()
	mounted(t, c, mount.Options{WriteBack: true, CacheDir: cache})
	if _, err := mount.New(c, t.TempDir(), mount.Options{WriteBack: true, CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "in use by another write-back mount") {
		t.Fatalf("a second write-back mount on the cache dir: %v", err)
	}
}

// TestWriteBackReplaySetsAsideLostContent: a record left pending whose
// content is not the one it records (the machine crashed before the
// content reached the disk, the record after it) is moved to failed/ and
// never sent; a whole one beside it is stored.
func TestWriteBackReplaySetsAsideLostContent(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	cache := t.TempDir()
	pending := filepath.Join(cache, "pending")
	if err := os.MkdirAll(pending, 0o700); err != nil {
		t.Fatal(err)
	}
	leave := func(name, path, content, recorded string) {
		sum := sha256.Sum256([]byte(recorded))
		rec := fmt.Sprintf(`{"key":"replay-%s","path":%q,"create":true,"mode":420,"mtime":"2026-12-01T10:00:00Z","kind":"file","size":%d,"sha256":%q}`,
			name, path, len(recorded), hex.EncodeToString(sum[:]))
		if err := os.WriteFile(filepath.Join(pending, name+".data"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pending, name+".json"), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leave("00000000000000000001-aaaa", "whole.txt", "hello", "hello")
	leave("00000000000000000002-bbbb", "empty.txt", "", "world")                      // the content never reached the disk
	leave("00000000000000000003-cccc", "zeroed.txt", "\x00\x00\x00\x00\x00", "words") // its blocks did not
	mounted(t, c, mount.Options{WriteBack: true, CacheDir: cache})
	if got, f := stored(t, c, "whole.txt"); f == nil || got != "hello" || f.Version != 1 {
		t.Fatalf("the whole record: %q %v", got, f)
	}
	for _, p := range []string{"empty.txt", "zeroed.txt"} {
		if _, f := stored(t, c, p); f != nil {
			t.Fatalf("%s was sent from content its record does not describe", p)
		}
	}
	failed, _ := filepath.Glob(filepath.Join(cache, "failed", "*.json"))
	if left, _ := filepath.Glob(filepath.Join(pending, "*")); len(failed) != 2 || len(left) != 0 {
		t.Fatalf("failed/ holds %v and pending/ %v; want the two records set aside, nothing pending", failed, left)
	}
}

// TestWriteBackFolders: in write-back a mkdir returns before its folder's
// marker is stored, as a close does; the folder is there in the mount at
// once, and once settled an empty one is kept on the server (its marker)
// and seen by a new mount; rmdir of a pending folder waits and removes it.
func TestWriteBackFolders(t *testing.T) {
	c, dir, m := slowWriteBack(t)
	start := time.Now()
	sh(t, dir, "mkdir -p a/b/empty a/gone")
	if m.Pending() == 0 {
		t.Fatalf("nothing pending after mkdir -p (%s): the markers were stored before mkdir returned", time.Since(start))
	}
	sh(t, dir, "echo x > a/b/f.txt")
	if got := sh(t, dir, "ls a/b; ls a"); got != "empty\nf.txt\nb\ngone" {
		t.Fatalf("the new folders in the mount: %q", got)
	}
	sh(t, dir, "rmdir a/gone")
	settle(t, m)
	for p, want := range map[string]bool{"p/a/b/empty": true, "p/a/gone": false} {
		page, err := c.ListFiles(context.Background(), client.ListOptions{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		if has := len(page.Data) == 1 && page.Data[0].Kind == "directory"; has != want {
			t.Fatalf("%s's marker on the server: %v, want %v", p, page.Data, want)
		}
	}
	again, _ := mounted(t, c, mount.Options{Prefix: "p"})
	if got := sh(t, again, "ls a/b"); got != "empty\nf.txt" {
		t.Fatalf("a new mount's a/b: %q", got)
	}
}

// TestWriteBackTimesHold: a file written in write-back shows the same
// size, mtime and ctime while it is written, while its store is pending
// and after it arrived, to the nanosecond, so git, which compares them
// with what its index recorded at checkout, finds a clone clean without
// reading any file again (git diff-files, which does not refresh the
// index, names none). The stores of the clone's working files are held
// until git has checked them out (git's own files pass: its renames wait
// for their stores).
func TestWriteBackTimesHold(t *testing.T) {
	w := newWorld(t)
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	held := storeProxy(t, w.srv.URL, func(r *http.Request) bool {
		if strings.Contains(r.URL.Query().Get("path"), "/.git") {
			return true
		}
		select {
		case <-gate:
			return true
		case <-r.Context().Done():
			return false
		}
	})
	c, err := client.New(held, w.tok)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel keeps nothing: each stat asks the mount.
	dir, m := mounted(t, c, mount.Options{Prefix: "times", WriteBack: true, CacheDir: t.TempDir(), KernelCacheTimeout: -1})
	t.Cleanup(open) // before the unmount, which stores what is pending
	src := t.TempDir()
	sh(t, src, "git init -q && mkdir -p a/b && for i in 1 2 3 4 5; do echo \"line $i\" > a/f$i.txt; echo $i > a/b/g$i.go; done && git add -A && git commit -qm one")
	sh(t, dir, "git clone -q "+src+" clone")
	clone := filepath.Join(dir, "clone")
	if m.Pending() < 10 {
		t.Fatalf("%d stores pending after the clone, want the 10 working files' (and their folders')", m.Pending())
	}
	if d := indexStatDiffs(t, clone); len(d) > 0 {
		t.Fatalf("while their stores are pending, files show other times than git recorded at checkout:\n%s", strings.Join(d, "\n"))
	}
	open()
	settle(t, m)
	if d := indexStatDiffs(t, clone); len(d) > 0 {
		t.Fatalf("once stored, files show other times than git recorded at checkout:\n%s", strings.Join(d, "\n"))
	}
	if dirty := sh(t, clone, "git diff-files --name-only"); dirty != "" {
		t.Fatalf("git finds the stat data of files it checked out changed: %s", dirty)
	}
	if st := sh(t, clone, "git status --porcelain"); st != "" {
		t.Fatalf("git status: %q", st)
	}
}

// indexStatDiffs compares, for each file in the git index of the work
// tree at dir, the ctime, mtime (to the nanosecond) and size git recorded
// (git ls-files --debug) with what lstat shows now, and says where they
// differ.
func indexStatDiffs(t *testing.T, dir string) []string {
	t.Helper()
	recorded := map[string]string{}
	var path string
	for _, line := range strings.Split(sh(t, dir, "git ls-files --debug"), "\n") {
		f := strings.Fields(line)
		switch {
		case !strings.HasPrefix(line, " ") && line != "":
			path = line
		case len(f) >= 2 && (f[0] == "ctime:" || f[0] == "mtime:" || f[0] == "size:"):
			recorded[path] += f[0] + f[1] + " "
		}
	}
	if len(recorded) == 0 {
		t.Fatal("git ls-files --debug listed no file")
	}
	var diffs []string
	for p, want := range recorded {
		st, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		got := fmt.Sprintf("ctime:%d:%d mtime:%d:%d size:%d ", sys.Ctim.Sec, sys.Ctim.Nsec, sys.Mtim.Sec, sys.Mtim.Nsec, st.Size())
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s: git recorded %s; lstat %s", p, want, got))
		}
	}
	return diffs
}
