package client_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// readAll reads and closes a content stream.
func readAll(t *testing.T, c *client.Content) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read content: %v", err)
	}
	return string(b)
}

// TestVersions lists, reads and reverts a file's versions.
func TestVersions(t *testing.T) {
	t.Parallel()
	c, b := setup(t, client.WithRunID("run-v"))
	ctx := context.Background()
	f := mustPut(t, c, "notes/v.txt", "one", client.PutOptions{ContentType: "text/plain"})
	mustPut(t, c, "notes/v.txt", "two!", client.PutOptions{Replace: true, ContentType: "text/plain"})

	l, err := c.ListVersions(ctx, f.ID, client.VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 2 || l.HasMore || l.NextCursor != nil {
		t.Fatalf("versions %+v", l)
	}
	v2, v1 := l.Data[0], l.Data[1]
	if v2.Version != 2 || !v2.Current || v2.SHA256 != sha("two!") || v2.SizeBytes != 4 || v2.FileID != f.ID ||
		v1.Version != 1 || v1.Current || v1.SHA256 != sha("one") || v1.ETag != `"`+sha("one")+`"` ||
		v1.RunID == nil || *v1.RunID != "run-v" || v1.Object != "file_version" || !strings.HasSuffix(v1.URL, "/versions/1/content") {
		t.Fatalf("versions %+v", l.Data)
	}

	t.Run("PagesOneByOne", func(t *testing.T) {
		before := len(b.proxy.requests("GET", "/v1/files/"+f.ID+"/versions"))
		var got []int64
		for v, err := range c.AllVersions(ctx, f.ID, client.VersionListOptions{Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v.Version)
		}
		if len(got) != 2 || got[0] != 2 || got[1] != 1 {
			t.Fatalf("versions %v, want 2 then 1", got)
		}
		if n := len(b.proxy.requests("GET", "/v1/files/"+f.ID+"/versions")) - before; n != 2 {
			t.Fatalf("%d pages asked for, want 2", n)
		}
	})
	t.Run("OneVersion", func(t *testing.T) {
		v, err := c.Version(ctx, f.ID, 1)
		if err != nil || v.SHA256 != sha("one") || v.Current || v.ContentType != "text/plain" {
			t.Fatalf("version 1: %+v, %v", v, err)
		}
		_, err = c.Version(ctx, f.ID, 9)
		expectProblem(t, err, 404, "NOT_FOUND")
	})
	t.Run("Content", func(t *testing.T) {
		content, err := c.VersionContent(ctx, f.ID, 1, client.ContentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, content); got != "one" || content.Status != 200 || content.SHA256 != sha("one") ||
			content.ETag != v1.ETag || content.Filename != "v.txt" || content.ContentType != "text/plain" {
			t.Fatalf("version 1 content %q %+v", got, content)
		}
		part, err := c.VersionContent(ctx, f.ID, 1, client.ContentOptions{Range: "bytes=1-"})
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, part); got != "ne" || part.Status != 206 || part.ContentRange != "bytes 1-2/3" {
			t.Fatalf("range of version 1 %q %+v", got, part)
		}
		_, err = c.VersionContent(ctx, f.ID, 1, client.ContentOptions{Range: "bytes=9-"})
		expectProblem(t, err, 416, "RANGE_NOT_SATISFIABLE")
	})
	t.Run("Revert", func(t *testing.T) {
		_, err := c.Revert(ctx, f.ID, 1, client.RevertOptions{IfMatch: v1.ETag})
		expectProblem(t, err, 412, "PRECONDITION_FAILED")
		r, err := c.Revert(ctx, f.ID, 1, client.RevertOptions{IfMatch: v2.ETag})
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != f.ID || r.Version != 3 || r.SHA256 != sha("one") || r.URL != f.URL {
			t.Fatalf("reverted %+v", r)
		}
		same, err := c.Revert(ctx, f.ID, 1, client.RevertOptions{})
		if err != nil || same.Version != 3 {
			t.Fatalf("revert to the current content: %+v, %v, want version 3 unchanged", same, err)
		}
		_, err = c.Revert(ctx, f.ID, 42, client.RevertOptions{})
		expectProblem(t, err, 404, "NOT_FOUND")
		_, err = c.Revert(ctx, f.ID, 0, client.RevertOptions{})
		expectProblem(t, err, 422, "VALIDATION_FAILED")
	})
}

// TestMove moves a file, refuses a taken path, and replaces with Replace.
func TestMove(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	f := mustPut(t, c, "notes/draft.txt", "draft", client.PutOptions{})
	m, err := c.Move(ctx, f.ID, "notes/final.txt", client.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != f.ID || m.Path != "notes/final.txt" || m.Version != f.Version || m.URL != f.URL {
		t.Fatalf("moved %+v", m)
	}
	if files := b.filesAt(t, "notes/draft.txt"); len(files) != 0 {
		t.Fatalf("the old path still holds %+v", files)
	}
	other := mustPut(t, c, "notes/other.txt", "other", client.PutOptions{})
	_, err = c.Move(ctx, f.ID, "notes/other.txt", client.MoveOptions{})
	if p := expectProblem(t, err, 409, "PATH_EXISTS"); p.ExistingFileID != other.ID {
		t.Fatalf("PATH_EXISTS names %s, want %s", p.ExistingFileID, other.ID)
	}
	_, err = c.Move(ctx, f.ID, "notes/other.txt", client.MoveOptions{Replace: true, IfMatch: other.ETag})
	expectProblem(t, err, 412, "PRECONDITION_FAILED")
	r, err := c.Move(ctx, f.ID, "notes/other.txt", client.MoveOptions{Replace: true, IfMatch: f.ETag})
	if err != nil || r.Path != "notes/other.txt" || r.ID != f.ID {
		t.Fatalf("move with replace: %+v, %v", r, err)
	}
	gone, err := c.File(ctx, other.ID)
	if err != nil || gone.DeletedAt == nil {
		t.Fatalf("the replaced file: %+v, %v, want it deleted", gone, err)
	}
	_, err = c.Move(ctx, f.ID, "/abs", client.MoveOptions{})
	expectProblem(t, err, 422, "INVALID_PATH")
}

// TestExpiry sets and clears expires_at, at upload and later.
func TestExpiry(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	near := func(at *time.Time, want time.Time) bool {
		return at != nil && at.After(want.Add(-time.Minute)) && at.Before(want.Add(time.Minute))
	}
	start := time.Now()
	f := mustPut(t, c, "notes/tmp.txt", "scratch", client.PutOptions{ExpiresIn: 2 * time.Hour})
	if !near(f.ExpiresAt, start.Add(2*time.Hour)) {
		t.Fatalf("expires_at %v, want about 2h from now", f.ExpiresAt)
	}
	r, err := c.PutFile(ctx, "notes/tmp.txt", strings.NewReader("scratch 2"), client.PutOptions{Replace: true})
	if err != nil || r.ExpiresAt == nil || !r.ExpiresAt.Equal(*f.ExpiresAt) {
		t.Fatalf("a replace without ExpiresIn: %+v, %v, want expires_at kept", r, err)
	}
	at := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	s, err := c.SetExpiry(ctx, f.ID, &at, client.ExpiryOptions{})
	if err != nil || s.ExpiresAt == nil || !s.ExpiresAt.Equal(at) {
		t.Fatalf("SetExpiry: %+v, %v, want %v", s, err, at)
	}
	n, err := c.SetExpiry(ctx, f.ID, nil, client.ExpiryOptions{IfMatch: r.ETag})
	if err != nil || n.ExpiresAt != nil {
		t.Fatalf("SetExpiry(nil): %+v, %v", n, err)
	}
	soon := time.Now().Add(5 * time.Second)
	_, err = c.SetExpiry(ctx, f.ID, &soon, client.ExpiryOptions{})
	expectProblem(t, err, 422, "VALIDATION_FAILED")
	_, err = c.SetExpiry(ctx, f.ID, &at, client.ExpiryOptions{IfMatch: f.ETag})
	expectProblem(t, err, 412, "PRECONDITION_FAILED")

	_, err = c.PutFile(ctx, "notes/short.txt", strings.NewReader("x"), client.PutOptions{ExpiresIn: time.Second})
	expectProblem(t, err, 422, "VALIDATION_FAILED")
	if _, err := c.PutFile(ctx, "notes/neg.txt", strings.NewReader("x"), client.PutOptions{ExpiresIn: -time.Hour}); err == nil {
		t.Fatal("a negative ExpiresIn was sent")
	}

	t.Run("ThroughASession", func(t *testing.T) {
		content := "through a session"
		u, err := c.UploadReaderAt(ctx, strings.NewReader(content), int64(len(content)), "notes/session.txt",
			client.UploadOptions{ExpiresIn: 3 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if !near(u.ExpiresAt, start.Add(3*time.Hour)) {
			t.Fatalf("expires_at %v, want about 3h from now", u.ExpiresAt)
		}
	})
	t.Run("InABatch", func(t *testing.T) {
		op := client.BatchPut("notes/batch.txt", []byte("b"))
		op.ExpiresIn = 4 * 3600
		bt, err := c.CreateBatch(ctx, []client.BatchOp{op}, client.BatchOptions{Wait: 20 * time.Second})
		if err == nil && !bt.Terminal() {
			bt, err = c.WaitBatch(ctx, bt.ID)
		}
		if err != nil || bt.Status != client.BatchSucceeded {
			t.Fatalf("batch %+v, %v", bt, err)
		}
		if it := bt.Items[0]; it.File == nil || !near(it.File.ExpiresAt, start.Add(4*time.Hour)) {
			t.Fatalf("item %+v, want expires_at about 4h from now", it)
		}
	})
}

// TestLinks shares a file, the current content and one version, lists
// the links and revokes one.
func TestLinks(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	f := mustPut(t, c, "notes/shared.txt", "first", client.PutOptions{ContentType: "text/plain"})
	mustPut(t, c, "notes/shared.txt", "second", client.PutOptions{Replace: true})
	fetch := func(u string) (int, string) {
		t.Helper()
		res, err := http.Get(u) // no token: the link is the authority
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	start := time.Now()
	current, err := c.CreateLink(ctx, f.ID, client.LinkOptions{ExpiresIn: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(current.ID, "lnk_") || current.FileID != f.ID || current.Version != nil || current.URL == nil ||
		!strings.Contains(*current.URL, "/s/") || current.RevokedAt != nil ||
		current.ExpiresAt.Before(start.Add(9*time.Minute)) || current.ExpiresAt.After(start.Add(11*time.Minute)) {
		t.Fatalf("link %+v", current)
	}
	if status, body := fetch(*current.URL); status != 200 || body != "second" {
		t.Fatalf("the link served %d %q", status, body)
	}
	pinned, err := c.CreateLink(ctx, f.ID, client.LinkOptions{Version: 1})
	if err != nil || pinned.Version == nil || *pinned.Version != 1 || pinned.URL == nil {
		t.Fatalf("pinned link %+v, %v", pinned, err)
	}
	if d := pinned.ExpiresAt.Sub(start); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("a link without ExpiresIn lasts %v, want the default hour", d)
	}
	if status, body := fetch(*pinned.URL); status != 200 || body != "first" {
		t.Fatalf("the pinned link served %d %q", status, body)
	}

	links, err := c.Links(ctx, f.ID)
	if err != nil || len(links) != 2 {
		t.Fatalf("links %+v, %v", links, err)
	}
	for _, l := range links {
		if l.URL != nil {
			t.Fatalf("a listed link shows its url: %+v", l)
		}
	}
	revoked, err := c.RevokeLink(ctx, current.ID, client.RevokeLinkOptions{})
	if err != nil || revoked.RevokedAt == nil || revoked.ID != current.ID {
		t.Fatalf("revoked %+v, %v", revoked, err)
	}
	if status, _ := fetch(*current.URL); status != 404 {
		t.Fatalf("a revoked link answered %d", status)
	}
	again, err := c.RevokeLink(ctx, current.ID, client.RevokeLinkOptions{})
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Fatalf("revoking again: %+v, %v", again, err)
	}

	_, err = c.CreateLink(ctx, f.ID, client.LinkOptions{ExpiresIn: 8 * 24 * time.Hour})
	expectProblem(t, err, 422, "VALIDATION_FAILED")
	_, err = c.CreateLink(ctx, f.ID, client.LinkOptions{Version: 7})
	expectProblem(t, err, 404, "NOT_FOUND")
	_, err = c.RevokeLink(ctx, "lnk_nope", client.RevokeLinkOptions{})
	expectProblem(t, err, 404, "NOT_FOUND")
}

// TestHistoryWritesReplayAfterLostResponse: every history and lifecycle
// write carries one generated key on all its attempts, so a response lost
// after the server committed is answered by a replay, and the effect
// happens once.
func TestHistoryWritesReplayAfterLostResponse(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	f := mustPut(t, c, "notes/keyed.txt", "v1", client.PutOptions{})
	mustPut(t, c, "notes/keyed.txt", "v2", client.PutOptions{Replace: true})
	var link *client.Link
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, tc := range []struct {
		name, method, path string
		write              func() error
		check              func(t *testing.T)
	}{
		{"Revert", "POST", "/v1/files/" + f.ID + "/revert",
			func() error { _, err := c.Revert(ctx, f.ID, 1, client.RevertOptions{}); return err },
			func(t *testing.T) {
				if l, err := b.direct.ListVersions(ctx, f.ID, client.VersionListOptions{}); err != nil || len(l.Data) != 3 {
					t.Fatalf("versions after one revert: %+v, %v", l, err)
				}
			}},
		{"Move", "POST", "/v1/files/" + f.ID + "/move",
			func() error { _, err := c.Move(ctx, f.ID, "notes/moved.txt", client.MoveOptions{}); return err },
			func(t *testing.T) { b.expectOneFile(t, "notes/moved.txt", f.ID) }},
		{"SetExpiry", "PATCH", "/v1/files/" + f.ID,
			func() error { _, err := c.SetExpiry(ctx, f.ID, &at, client.ExpiryOptions{}); return err },
			func(t *testing.T) {
				if got, err := b.direct.File(ctx, f.ID); err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(at) {
					t.Fatalf("file %+v, %v", got, err)
				}
			}},
		{"CreateLink", "POST", "/v1/files/" + f.ID + "/links",
			func() error { var err error; link, err = c.CreateLink(ctx, f.ID, client.LinkOptions{}); return err },
			func(t *testing.T) {
				if links, err := b.direct.Links(ctx, f.ID); err != nil || len(links) != 1 || link.URL == nil || links[0].ID != link.ID {
					t.Fatalf("links %+v, %v; created %+v", links, err, link)
				}
			}},
		{"RevokeLink", "DELETE", "/v1/links/*",
			func() error { _, err := c.RevokeLink(ctx, link.ID, client.RevokeLinkOptions{}); return err },
			func(t *testing.T) {
				if links, err := b.direct.Links(ctx, f.ID); err != nil || len(links) != 1 || links[0].RevokedAt == nil {
					t.Fatalf("links %+v, %v", links, err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.proxy.inject(tc.method, tc.path, 1, dropAfterCommit)
			match := func(s seenRequest) bool {
				if p, ok := strings.CutSuffix(tc.path, "*"); ok {
					return s.Method == tc.method && strings.HasPrefix(s.Path, p)
				}
				return s.Method == tc.method && s.Path == tc.path
			}
			before := len(b.proxy.where(match))
			if err := tc.write(); err != nil {
				t.Fatal(err)
			}
			seen := b.proxy.where(match)[before:]
			if len(seen) != 2 || !keyPattern.MatchString(seen[0].Key) || seen[1].Key != seen[0].Key ||
				seen[0].Status != 0 || seen[0].ServerStatus >= 300 || !seen[1].Replayed {
				t.Fatalf("requests %+v, want a dropped one and its replay under one key", seen)
			}
			tc.check(t)
		})
	}
}

// TestCreateLinkLearnsItsURLAfterAPoll: the server made the link, but the
// client was told OPERATION_IN_PROGRESS (as it is when its first attempt
// is still running). The key's record, read through /v1/operations, shows
// the url null; the client sends the request again with the same key, and
// the replay to its own token answers the url. One link is made.
func TestCreateLinkLearnsItsURLAfterAPoll(t *testing.T) {
	t.Parallel()
	c, b := setup(t)
	ctx := context.Background()
	f := mustPut(t, c, "notes/polled.txt", "polled", client.PutOptions{})
	path := "/v1/files/" + f.ID + "/links"
	b.proxy.inject("POST", path, 1, func(p *faultProxy, w http.ResponseWriter, r *http.Request, rec *seenRequest) {
		if _, _, err := p.forward(r, rec); err != nil {
			panic(err)
		}
		w.Header().Set("Link", "</v1/operations/"+r.Header.Get("Idempotency-Key")+`>; rel="monitor"`)
		answerProblem(http.StatusConflict, "OPERATION_IN_PROGRESS", "1")(p, w, r, rec)
	})
	l, err := c.CreateLink(ctx, f.ID, client.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.URL == nil || !strings.Contains(*l.URL, "/s/") {
		t.Fatalf("the link came back without its url: %+v", l)
	}
	posts := b.proxy.requests("POST", path)
	if len(posts) != 2 || posts[1].Key != posts[0].Key || !posts[1].Replayed || posts[0].Status != http.StatusConflict {
		t.Fatalf("requests %+v, want the first answered 409, then its replay under one key", posts)
	}
	if polls := b.proxy.requests("GET", "/v1/operations/"+posts[0].Key); len(polls) != 1 || polls[0].ServerStatus != 200 {
		t.Fatalf("polls %+v", polls)
	}
	links, err := b.direct.Links(ctx, f.ID)
	if err != nil || len(links) != 1 || links[0].ID != l.ID {
		t.Fatalf("links %+v, %v", links, err)
	}
	res, err := http.Get(*l.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("the link answered %d", res.StatusCode)
	}
}
