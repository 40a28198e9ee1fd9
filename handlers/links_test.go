package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// createLink makes a share link to file id and returns it with its secret.
func createLink(t *testing.T, c *apitest.Client, id, body string, headers ...string) (api.Link, string) {
	t.Helper()
	l := created[api.Link](t, c, "/v1/files/"+id+"/links", body, headers...)
	if l.URL == nil {
		t.Fatalf("a new link has no url: %+v", l)
	}
	i := strings.LastIndex(*l.URL, "/s/")
	return l, (*l.URL)[i+len("/s/"):]
}

func linkList(t *testing.T, c *apitest.Client, id string) []api.Link {
	t.Helper()
	return apitest.GetJSON[api.LinkList](t, c, "/v1/files/"+id+"/links").Data
}

// anonymous is a client without a token.
func anonymous(t *testing.T, b *testBundle) *apitest.Client {
	return apitest.NewClient(t, b.srv.URL, "")
}

// linkDownloads reads agentfs_link_downloads_total by outcome.
func linkDownloads(t *testing.T, anon *apitest.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	body := anon.Do("GET", "/metrics", nil).Expect(t, 200).Body
	for _, m := range regexp.MustCompile(`(?m)^agentfs_link_downloads_total\{outcome="([a-z]+)"\} ([0-9]+)$`).FindAllSubmatch(body, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		out[string(m[1])] = n
	}
	return out
}

func TestShareLinks(t *testing.T) {
	t.Run("CreateShowsTheSecretOnce", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "docs/report.pdf", "%PDF", "Content-Type", "application/pdf").Expect(t, 201).File(t)
		res := send(c, "POST", "/v1/files/"+f.ID+"/links", ``).Expect(t, http.StatusCreated)
		var l api.Link
		res.JSON(t, &l)
		if l.Object != "link" || l.FileID != f.ID || l.Version != nil || l.RevokedAt != nil || l.URL == nil ||
			!l.ExpiresAt.Equal(l.CreatedAt.Add(time.Hour)) || res.Header.Get("Location") != "/v1/files/"+f.ID+"/links" {
			t.Fatalf("link: %+v %v", l, res.Header)
		}
		secret := strings.TrimPrefix(*l.URL, b.srv.URL+"/s/")
		raw, err := base64.RawURLEncoding.DecodeString(secret)
		if err != nil || len(raw) < 16 {
			t.Fatalf("secret %q holds %d bytes (%v), want at least 128 bits", secret, len(raw), err)
		}
		var stored []byte
		var leaks int
		ctx := context.Background()
		pool := b.srv.Store.Pool()
		if err := pool.QueryRow(ctx, `SELECT secret_hash FROM links WHERE id = $1`, l.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256([]byte(secret)); !bytes.Equal(stored, sum[:]) {
			t.Fatalf("stored %x, want the secret's SHA-256", stored)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM links WHERE strpos(links::text, $1) > 0`, secret).Scan(&leaks); err != nil || leaks != 0 {
			t.Fatalf("the links table holds the secret (%d rows, %v)", leaks, err)
		}
		for _, listed := range linkList(t, c, f.ID) {
			if listed.URL != nil {
				t.Fatalf("a listed link shows its url: %+v", listed)
			}
		}
		_, other := createLink(t, c, f.ID, `{}`)
		if other == secret {
			t.Fatal("two links share a secret")
		}
		short, _ := createLink(t, c, f.ID, `{"expires_in":60,"version":1}`)
		long, _ := createLink(t, c, f.ID, `{"expires_in":604800,"version":null}`)
		if !short.ExpiresAt.Equal(short.CreatedAt.Add(time.Minute)) || short.Version == nil || *short.Version != 1 ||
			!long.ExpiresAt.Equal(long.CreatedAt.Add(7*24*time.Hour)) || long.Version != nil {
			t.Fatalf("short %+v, long %+v", short, long)
		}
		if got := linkList(t, c, f.ID); len(got) != 4 || got[0].ID != long.ID || got[3].ID != l.ID {
			t.Fatalf("links are not listed newest first: %+v", got)
		}
	})

	t.Run("CreateValidates", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "v.txt", "v").Expect(t, 201).File(t)
		path := "/v1/files/" + f.ID + "/links"
		for body, code := range map[string]string{
			`{"expires_in":59}`: "VALIDATION_FAILED", `{"expires_in":604801}`: "VALIDATION_FAILED",
			`{"expires_in":"60"}`: "VALIDATION_FAILED", `{"expires_in":1e99}`: "VALIDATION_FAILED",
			`{"version":0}`: "VALIDATION_FAILED", `{"version":-1}`: "VALIDATION_FAILED", `{"secret":"mine"}`: "VALIDATION_FAILED",
			`{"version":2}`: "NOT_FOUND", `{"expires_in":`: "INVALID_REQUEST", `[]`: "VALIDATION_FAILED",
		} {
			res := send(c, "POST", path, body)
			if p := res.Problem(t); p.Code != code {
				t.Fatalf("%s: %d %s, want %s", body, res.Status, p.Code, code)
			}
		}
		send(c, "POST", "/v1/files/file_nope/links", `{}`).ExpectProblem(t, 404, "NOT_FOUND")
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		send(c, "POST", path, `{}`).ExpectProblem(t, 404, "NOT_FOUND")
		if got := linkList(t, c, f.ID); len(got) != 0 {
			t.Fatalf("refused links were made: %+v", got)
		}
	})

	t.Run("KeyedCreateReplaysTheSameLink", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "k.txt", "k").Expect(t, 201).File(t)
		first := send(c, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		again := send(c, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("replay: %s vs %s", again.Body, first.Body)
		}
		if n := len(linkList(t, c, f.ID)); n != 1 {
			t.Fatalf("%d links after a replay", n)
		}
		send(c, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":601}`, "Idempotency-Key", "link-1").ExpectProblem(t, 409, "IDEMPOTENCY_CONFLICT")
	})

	t.Run("ServesWithoutAToken", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "dir/notes.txt", "0123456789", "Content-Type", "text/plain").Expect(t, 201).File(t)
		_, secret := createLink(t, c, f.ID, `{}`)
		anon := anonymous(t, b)
		whole := anon.Do("GET", "/s/"+secret, nil).Expect(t, http.StatusOK)
		if string(whole.Body) != "0123456789" || whole.Header.Get("ETag") != f.ETag || whole.Header.Get("Content-Type") != "text/plain" ||
			whole.Header.Get("Content-Disposition") != "attachment; filename=notes.txt" ||
			whole.Header.Get("Repr-Digest") != digestHeader("0123456789") {
			t.Fatalf("shared: %q %v", whole.Body, whole.Header)
		}
		part := anon.Do("GET", "/s/"+secret, nil, "Range", "bytes=-3").Expect(t, http.StatusPartialContent)
		if string(part.Body) != "789" || part.Header.Get("Content-Range") != "bytes 7-9/10" {
			t.Fatalf("range: %q %v", part.Body, part.Header)
		}
		anon.Do("GET", "/s/"+secret, nil, "Range", "bytes=10-").ExpectProblem(t, 416, "RANGE_NOT_SATISFIABLE")
		anon.Do("GET", "/s/"+secret, nil, "If-None-Match", f.ETag).Expect(t, http.StatusNotModified)
		head := anon.Do("HEAD", "/s/"+secret, nil).Expect(t, http.StatusOK)
		if head.Header.Get("Content-Length") != "10" || head.Header.Get("ETag") != f.ETag || len(head.Body) != 0 {
			t.Fatalf("HEAD: %v", head.Header)
		}
		// A token, even a bad one, is neither needed nor looked at.
		anon.Do("GET", "/s/"+secret, nil, "Authorization", "Bearer not-a-token").Expect(t, http.StatusOK)
		if p := anon.Do("GET", "/s/"+secret+"x", nil).ExpectProblem(t, 404, "NOT_FOUND"); p.Instance != "/s/{secret}" {
			t.Fatalf("the 404 names the path it was asked for: %+v", p)
		}
	})

	t.Run("FollowsOrPinsTheContent", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "pin.txt", "v1").Expect(t, 201).File(t)
		_, follows := createLink(t, c, f.ID, `{}`)
		_, pinned := createLink(t, c, f.ID, `{"version":1}`)
		c.Do("POST", "/v1/files?path=pin.txt&if_exists=replace", "v2").Expect(t, 200)
		c.Do("POST", "/v1/files?path=pin.txt&if_exists=replace", "v3").Expect(t, 200)
		anon := anonymous(t, b)
		if got := anon.Do("GET", "/s/"+follows, nil).Expect(t, 200); string(got.Body) != "v3" {
			t.Fatalf("a following link serves %q", got.Body)
		}
		if got := anon.Do("GET", "/s/"+pinned, nil).Expect(t, 200); string(got.Body) != "v1" || got.Header.Get("ETag") != f.ETag {
			t.Fatalf("a pinned link serves %q", got.Body)
		}
		// The sweeper keeps a version a live link pins.
		if n, err := b.srv.Store.SweepVersions(context.Background(), 0, 1); err != nil || n != 1 {
			t.Fatalf("swept %d versions: %v", n, err)
		}
		if got := versionNumbers(versionList(t, c, f.ID, "")); len(got) != 2 || got[0] != 3 || got[1] != 1 {
			t.Fatalf("versions after the sweep: %v", got)
		}
		if got := anon.Do("GET", "/s/"+pinned, nil).Expect(t, 200); string(got.Body) != "v1" {
			t.Fatalf("a pinned link after the sweep serves %q", got.Body)
		}
		// A version the sweeper removed while its link was not live (an
		// expired link made live again here) is gone.
		exec(t, b, `UPDATE links SET expires_at = now() - interval '1 minute' WHERE version = 1`)
		if n, err := b.srv.Store.SweepVersions(context.Background(), 0, 1); err != nil || n != 1 {
			t.Fatalf("swept %d versions: %v", n, err)
		}
		exec(t, b, `UPDATE links SET expires_at = now() + interval '1 hour' WHERE version = 1`)
		anon.Do("GET", "/s/"+pinned, nil).ExpectProblem(t, 404, "NOT_FOUND")
		anon.Do("GET", "/s/"+follows, nil).Expect(t, 200)
	})

	t.Run("GoneLinksAreOneNotFound", func(t *testing.T) {
		c, b := setup(t)
		anon := anonymous(t, b)
		secretOf := func(path string) (api.Link, string, apitest.File) {
			f := upload(t, c, path, path).Expect(t, 201).File(t)
			l, s := createLink(t, c, f.ID, `{}`)
			return l, s, f
		}
		expiredLink, expired, _ := secretOf("expired.txt")
		exec(t, b, `UPDATE links SET expires_at = now() - interval '1 second' WHERE id = $1`, expiredLink.ID)
		revokedLink, revoked, _ := secretOf("revoked.txt")
		c.Do("DELETE", "/v1/links/"+revokedLink.ID, nil).Expect(t, 200)
		_, deleted, df := secretOf("deleted.txt")
		c.Do("DELETE", "/v1/files/"+df.ID, nil).Expect(t, 200)
		_, expiredFile, ef := secretOf("expired-file.txt")
		expireNow(t, b, ef.ID)
		_, live, _ := secretOf("live.txt")
		random := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
		for name, s := range map[string]string{
			"expired": expired, "revoked": revoked, "file deleted": deleted, "file expired": expiredFile,
			"unknown": random, "malformed": "!!not*a*secret", "short": live[:10], "one more": live + "A",
			"one less": live[:len(live)-1], "dot": ".", "encoded slash": "a%2Fb", "huge": strings.Repeat("A", 4000),
		} {
			for _, method := range []string{"GET", "HEAD"} {
				res := anon.Do(method, "/s/"+s, nil)
				res.Expect(t, http.StatusNotFound)
				if method == "GET" {
					if p := res.Problem(t); p.Code != "NOT_FOUND" || p.Instance != "/s/{secret}" {
						t.Fatalf("%s: %+v", name, p)
					}
				}
			}
		}
		anon.Do("GET", "/s/"+live, nil).Expect(t, 200)
		anon.Do("GET", "/s/", nil).Expect(t, 404)
	})

	t.Run("BlockedFilesAre451", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "blocked.txt", "b").Expect(t, 201).File(t)
		_, secret := createLink(t, c, f.ID, `{}`)
		if _, err := b.srv.Store.BlockFile(context.Background(), f.ID, true, "court order"); err != nil {
			t.Fatal(err)
		}
		anonymous(t, b).Do("GET", "/s/"+secret, nil).ExpectProblem(t, 451, "CONTENT_BLOCKED")
		anonymous(t, b).Do("HEAD", "/s/"+secret, nil).Expect(t, 451)
	})

	t.Run("ListAndRevoke", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "r.txt", "r").Expect(t, 201).File(t)
		l, secret := createLink(t, c, f.ID, `{}`)
		keep, kept := createLink(t, c, f.ID, `{}`)
		var first api.Link
		c.Do("DELETE", "/v1/links/"+l.ID, nil).Expect(t, 200).JSON(t, &first)
		if first.RevokedAt == nil || first.URL != nil || first.ID != l.ID {
			t.Fatalf("revoked: %+v", first)
		}
		var again api.Link
		c.Do("DELETE", "/v1/links/"+l.ID, nil).Expect(t, 200).JSON(t, &again)
		if !again.RevokedAt.Equal(*first.RevokedAt) {
			t.Fatalf("a repeated revoke changed revoked_at: %v -> %v", first.RevokedAt, again.RevokedAt)
		}
		listed := linkList(t, c, f.ID)
		if len(listed) != 2 || listed[0].ID != keep.ID || listed[0].RevokedAt != nil || listed[1].RevokedAt == nil {
			t.Fatalf("listed: %+v", listed)
		}
		anon := anonymous(t, b)
		anon.Do("GET", "/s/"+secret, nil).ExpectProblem(t, 404, "NOT_FOUND")
		anon.Do("GET", "/s/"+kept, nil).Expect(t, 200)
		bob := b.srv.Client(t, "bob")
		bob.Do("DELETE", "/v1/links/"+keep.ID, nil).ExpectProblem(t, 404, "NOT_FOUND")
		bob.Do("GET", "/v1/files/"+f.ID+"/links", nil).ExpectProblem(t, 404, "NOT_FOUND")
		anon.Do("GET", "/s/"+kept, nil).Expect(t, 200)
		c.Do("DELETE", "/v1/links/lnk_nope", nil).ExpectProblem(t, 404, "NOT_FOUND")
		c.Do("DELETE", "/v1/links/"+keep.ID, nil, "Idempotency-Key", "rev-1").Expect(t, 200)
		if r := c.Do("DELETE", "/v1/links/"+keep.ID, nil, "Idempotency-Key", "rev-1").Expect(t, 200); r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("a keyed revoke did not replay")
		}
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		if got := linkList(t, c, f.ID); len(got) != 2 {
			t.Fatalf("links of a deleted file: %+v", got)
		}
	})

	t.Run("TheSecretIsNeverLoggedAndDownloadsAreCounted", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "log.txt", "logged").Expect(t, 201).File(t)
		_, secret := createLink(t, c, f.ID, `{}`)
		g := upload(t, c, "blocked.txt", "b").Expect(t, 201).File(t)
		_, blocked := createLink(t, c, g.ID, `{}`)
		if _, err := b.srv.Store.BlockFile(context.Background(), g.ID, true, "legal"); err != nil {
			t.Fatal(err)
		}
		h := upload(t, c, "broken.txt", "broken").Expect(t, 201).File(t)
		_, broken := createLink(t, c, h.ID, `{}`)
		stored, err := b.srv.Store.File(context.Background(), "alice", h.ID)
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.srv.Config
		if err := storagetest.S3(t, cfg).RemoveObject(context.Background(), cfg.S3Bucket, stored.BlobKey, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		anon := anonymous(t, b)
		anon.Do("GET", "/s/"+secret, nil).Expect(t, 200)
		anon.Do("HEAD", "/s/"+secret, nil).Expect(t, 200)
		anon.Do("GET", "/s/"+secret, nil, "If-None-Match", f.ETag).Expect(t, 304)
		anon.Do("GET", "/s/"+secret, nil, "Range", "bytes=100-").Expect(t, 416)
		anon.Do("GET", "/s/"+secret+"A", nil).Expect(t, 404)
		problems := []*apitest.Response{anon.Do("GET", "/s/"+blocked, nil).Expect(t, 451)}
		problems = append(problems, anon.Do("GET", "/s/"+broken, nil))
		if problems[1].Status < 500 {
			t.Fatalf("a link whose bytes are gone answered %d", problems[1].Status)
		}
		// The file's own content route says the same: storage failed, the
		// file is not unknown.
		unavailable(t, c.Do("GET", "/v1/files/"+h.ID+"/content", nil))
		for _, res := range problems {
			if p := res.Problem(t); p.Instance != "/s/{secret}" {
				t.Fatalf("a problem shows the path it was asked for: %+v", p)
			}
		}
		logs := b.srv.Logs.String()
		for name, s := range map[string]string{"served": secret, "blocked": blocked, "failed": broken} {
			if strings.Contains(logs, s) {
				t.Fatalf("the server log holds the secret of the %s link", name)
			}
		}
		if !strings.Contains(logs, "request failed") {
			t.Fatal("the failed download was not logged") // it was, without its secret
		}
		got := linkDownloads(t, anon)
		if got["served"] != 3 || got["gone"] != 1 || got["blocked"] != 1 || got["refused"] != 1 || got["failed"] != 1 {
			t.Fatalf("link downloads by outcome: %v", got)
		}
	})

	t.Run("ADownloadDuringReplacesIsOneVersionWhole", func(t *testing.T) {
		c, b := setup(t)
		contents := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
		f := c.Do("POST", "/v1/files?path=hot.bin", contents[0]).Expect(t, 201).File(t)
		_, secret := createLink(t, c, f.ID, `{}`)
		anon := anonymous(t, b)
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for r := 0; r < 2; r++ {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					res := anon.Do("GET", "/s/"+secret, nil)
					if res.Status != 200 || len(res.Body) != 1<<20 {
						t.Errorf("download: %d, %d bytes", res.Status, len(res.Body))
						return
					}
					want := byte('a')
					if res.Header.Get("ETag") == `"`+sha(string(contents[1]))+`"` {
						want = 'b'
					}
					if strings.Trim(string(res.Body), string(want)) != "" {
						t.Error("a download mixed two versions or disagrees with its ETag")
						return
					}
				}
			}()
		}
		for i := 1; i <= 8; i++ {
			c.Do("POST", "/v1/files?path=hot.bin&if_exists=replace", contents[i%2]).Expect(t, http.StatusOK)
		}
		close(stop)
		readers.Wait()
	})
}

// TestDeletingAFileRevokesItsLinks: however a file stops being live (a
// delete, a batch delete, a move that replaces it, its expiry, recorded by
// the sweeper or not yet), its live links are revoked then, and restoring
// the file does not bring them back: a link shared before a delete never
// serves again. A link made after the restore serves, and the links of
// other files, and links that had already expired, are left as they were.
func TestDeletingAFileRevokesItsLinks(t *testing.T) {
	c, b := setup(t)
	anon := anonymous(t, b)
	restore := func(id string) { c.Do("POST", "/v1/files/"+id+"/restore", nil).Expect(t, 200) }
	for _, tc := range []struct {
		name string
		gone func(f apitest.File)
	}{
		{"Delete", func(f apitest.File) { c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200) }},
		{"BatchDelete", func(f apitest.File) {
			if bt, _ := runBatch(t, c, "del-"+f.ID, []map[string]any{{"op": "delete", "file_id": f.ID}}, http.StatusAccepted); bt.Status != "succeeded" {
				t.Fatalf("batch: %+v", bt)
			}
		}},
		{"MoveReplacesIt", func(f apitest.File) {
			g := upload(t, c, "movers/"+f.ID, "other").Expect(t, 201).File(t)
			move(c, g.ID, f.Path, "replace").Expect(t, 200)
			move(c, g.ID, "movers/away-"+f.ID, "").Expect(t, 200) // frees the path for the restore
		}},
		{"ExpiresUnrecorded", func(f apitest.File) { expireNow(t, b, f.ID) }},
		{"ExpiresRecorded", func(f apitest.File) {
			expireNow(t, b, f.ID)
			if n, err := b.srv.Store.ExpireFiles(context.Background()); err != nil || n != 1 {
				t.Fatalf("ExpireFiles: %d, %v", n, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := upload(t, c, "gone/"+tc.name+".txt", tc.name).Expect(t, 201).File(t)
			l, secret := createLink(t, c, f.ID, `{}`)
			pinned, pinnedSecret := createLink(t, c, f.ID, `{"version":1}`)
			old, _ := createLink(t, c, f.ID, `{}`)
			exec(t, b, `UPDATE links SET expires_at = now() - interval '1 minute' WHERE id = $1`, old.ID)
			other := upload(t, c, "kept/"+tc.name+".txt", "kept").Expect(t, 201).File(t)
			_, otherSecret := createLink(t, c, other.ID, `{}`)
			anon.Do("GET", "/s/"+secret, nil).Expect(t, 200)

			tc.gone(f)
			anon.Do("GET", "/s/"+secret, nil).ExpectProblem(t, 404, "NOT_FOUND")
			restore(f.ID)
			anon.Do("GET", "/s/"+secret, nil).ExpectProblem(t, 404, "NOT_FOUND")
			anon.Do("GET", "/s/"+pinnedSecret, nil).ExpectProblem(t, 404, "NOT_FOUND")
			anon.Do("GET", "/s/"+otherSecret, nil).Expect(t, 200)
			revoked := map[string]bool{}
			for _, listed := range linkList(t, c, f.ID) {
				revoked[listed.ID] = listed.RevokedAt != nil
			}
			if !revoked[l.ID] || !revoked[pinned.ID] || revoked[old.ID] || len(revoked) != 3 {
				t.Fatalf("links after %s and a restore, revoked: %v (made %s, pinned %s, expired %s)", tc.name, revoked, l.ID, pinned.ID, old.ID)
			}
			_, fresh := createLink(t, c, f.ID, `{}`)
			if got := anon.Do("GET", "/s/"+fresh, nil).Expect(t, 200); string(got.Body) != tc.name {
				t.Fatalf("a link made after the restore serves %q", got.Body)
			}
		})
	}
}

// TestMakingALinkNeedsReadAndShare: a link serves a file's bytes to anyone
// who has it, so making one needs read (a write-only token never reads
// content) and share; a token made without a grant has share when it has
// read and write, as it could make links before share was a scope.
func TestMakingALinkNeedsReadAndShare(t *testing.T) {
	c, b := setup(t)
	f := upload(t, c, "shared.txt", "content").Expect(t, 201).File(t)
	for _, tc := range []struct {
		scope, missing string
	}{{"write", "read"}, {"read", "share"}} {
		limited := apitest.NewClient(t, b.srv.URL, b.srv.Token(t, "alice", tc.scope))
		p := send(limited, "POST", "/v1/files/"+f.ID+"/links", `{}`, "Idempotency-Key", "link-"+tc.scope).
			ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
		if p.MissingScope != tc.missing || !strings.Contains(p.Detail, "lacks the "+tc.missing+" scope") {
			t.Fatalf("a %s token: %+v", tc.scope, p)
		}
	}
	if links := linkList(t, c, f.ID); len(links) != 0 {
		t.Fatalf("a token without read and share made links: %+v", links)
	}
	createLink(t, c, f.ID, `{}`)
}
