package mount_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
