package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// recorder notes, per host, the requests sent and whether any carried an
// Authorization header.
type recorder struct {
	mu     sync.Mutex
	hosts  map[string]int
	authTo map[string]int
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts[req.URL.Host]++
	if req.Header.Get("Authorization") != "" {
		r.authTo[req.URL.Host]++
	}
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) counts(host string) (sent, withAuth int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[host], r.authTo[host]
}

// TestContentRedirect: with Redirect, the bytes come from S3 through the
// presigned URL, with no Authorization header sent there (S3 and AgentFS
// share a host name here, where Go's own redirect policy would forward
// it); ranges, versions and DownloadFile work the same; a server with no
// public endpoint streams and the client takes the bytes.
func TestContentRedirect(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.S3PublicEndpoint = "http://" + cfg.S3Endpoint
	if cfg.S3UseSSL {
		cfg.S3PublicEndpoint = "https://" + cfg.S3Endpoint
	}
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	rec := &recorder{hosts: map[string]int{}, authTo: map[string]int{}}
	c, err := client.New(srv.URL, srv.Token(t, "alice"), client.WithHTTPClient(&http.Client{Transport: rec}),
		client.WithRetryPolicy(fast))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v1 := mustPut(t, c, "r/report.txt", "version one", client.PutOptions{})
	f := mustPut(t, c, "r/report.txt", "version two, longer", client.PutOptions{Replace: true})

	read := func(t *testing.T, get func() (*client.Content, error)) (*client.Content, string) {
		t.Helper()
		before, _ := rec.counts(cfg.S3Endpoint)
		ct, err := get()
		b := testkit.ReadAll(t, ct, err)
		after, auth := rec.counts(cfg.S3Endpoint)
		if after != before+1 || auth != 0 {
			t.Fatalf("requests to S3 %d → %d, %d with Authorization; want one more and none", before, after, auth)
		}
		return ct, string(b)
	}
	ct, body := read(t, func() (*client.Content, error) {
		return c.FileContent(ctx, f.ID, client.ContentOptions{Redirect: true})
	})
	if body != "version two, longer" || ct.Status != 200 || ct.ETag != f.ETag || ct.SHA256 != f.SHA256 || ct.Filename != "report.txt" || ct.Length != int64(len(body)) {
		t.Fatalf("redirected content %q: %+v", body, ct)
	}
	ct, body = read(t, func() (*client.Content, error) {
		return c.FileContent(ctx, f.ID, client.ContentOptions{Redirect: true, Range: "bytes=8-10", IfRange: f.ETag})
	})
	if body != "two" || ct.Status != 206 || ct.ContentRange != "bytes 8-10/19" {
		t.Fatalf("redirected range %q: %+v", body, ct)
	}
	// A stale If-Range: the whole content, as the server would answer.
	ct, body = read(t, func() (*client.Content, error) {
		return c.FileContent(ctx, f.ID, client.ContentOptions{Redirect: true, Range: "bytes=8-10", IfRange: v1.ETag})
	})
	if body != "version two, longer" || ct.Status != 200 {
		t.Fatalf("redirected range with a stale If-Range %q: %+v", body, ct)
	}
	_, body = read(t, func() (*client.Content, error) {
		return c.VersionContent(ctx, f.ID, 1, client.ContentOptions{Redirect: true})
	})
	if body != "version one" {
		t.Fatalf("version 1 redirected: %q", body)
	}

	dest := filepath.Join(t.TempDir(), "report.txt")
	before, _ := rec.counts(cfg.S3Endpoint)
	d, err := c.DownloadFile(ctx, f, dest, client.DownloadOptions{Redirect: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dest)
	after, auth := rec.counts(cfg.S3Endpoint)
	if string(got) != "version two, longer" || d.SHA256 != f.SHA256 || after != before+1 || auth != 0 {
		t.Fatalf("DownloadFile with Redirect: %q %+v, S3 requests %d → %d (%d with Authorization)", got, d, before, after, auth)
	}

	// Without Redirect nothing goes to S3 from here.
	before, _ = rec.counts(cfg.S3Endpoint)
	plain, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(plain)
	plain.Close()
	if after, _ := rec.counts(cfg.S3Endpoint); string(b) != "version two, longer" || after != before {
		t.Fatalf("plain content %q went to S3 (%d → %d)", b, before, after)
	}
}

// TestContentRedirectFallsBackToStreaming: a server without a public
// endpoint answers redirect=true with the bytes, and the client takes them.
func TestContentRedirectFallsBackToStreaming(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	f := mustPut(t, c, "a.txt", "streamed", client.PutOptions{})
	ct, err := b.direct.FileContent(context.Background(), f.ID, client.ContentOptions{Redirect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	body, _ := io.ReadAll(ct)
	if string(body) != "streamed" || ct.ETag != f.ETag || ct.Status != 200 {
		t.Fatalf("redirect without a public endpoint: %q %+v", body, ct)
	}
}

// TestContentRedirectExpired: a presigned URL S3 refuses is a
// RedirectError naming S3's answer.
func TestContentRedirectExpired(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.S3PublicEndpoint = "http://" + cfg.S3Endpoint
	cfg.PresignTTL = time.Second
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg})
	// A transport that holds each request to S3 until its URL expired.
	slow := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Host == cfg.S3Endpoint {
			time.Sleep(3 * time.Second)
		}
		return http.DefaultTransport.RoundTrip(req)
	})
	c, err := client.New(srv.URL, srv.Token(t, "alice"), client.WithHTTPClient(&http.Client{Transport: slow}))
	if err != nil {
		t.Fatal(err)
	}
	f := mustPut(t, c, "late.txt", "too late", client.PutOptions{})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err = c.FileContent(context.Background(), f.ID, client.ContentOptions{Redirect: true})
		var re *client.RedirectError
		if errors.As(err, &re) {
			if re.Status != http.StatusForbidden || !strings.Contains(err.Error(), "403") {
				t.Fatalf("an expired presigned URL: %v %+v", err, re)
			}
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("an expired presigned URL: %v, want a RedirectError", err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
