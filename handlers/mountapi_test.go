package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestFileMeta: mode, mtime and kind are set on create, kept by a replace
// that names none, changed by PATCH without a new version, and refused
// when malformed.
func TestFileMeta(t *testing.T) {
	c, _ := setup(t)
	d := upload(t, c, "plain.txt", "x").Expect(t, 201).File(t)
	if d.Mode != 0o644 || d.Kind != "file" || !d.MTime.Equal(d.UpdatedAt) {
		t.Fatalf("defaults: mode %o kind %q mtime %v updated %v", d.Mode, d.Kind, d.MTime, d.UpdatedAt)
	}
	at := time.Date(2020, 1, 2, 3, 4, 5, 600000000, time.UTC)
	q := "/v1/files?path=bin/run.sh&mode=0755&mtime=" + url.QueryEscape(at.Format(time.RFC3339Nano))
	f := c.Do("POST", q, "#!/bin/sh").Expect(t, 201).File(t)
	if f.Mode != 0o755 || !f.MTime.Equal(at) || f.Kind != "file" {
		t.Fatalf("created: mode %o mtime %v kind %q", f.Mode, f.MTime, f.Kind)
	}
	r := c.Do("POST", "/v1/files?path=bin/run.sh&if_exists=replace", "#!/bin/sh\necho").Expect(t, 200).File(t)
	if r.Mode != 0o755 || !r.MTime.Equal(r.UpdatedAt) || r.Version != 2 {
		t.Fatalf("a replace naming no mode keeps it, and its mtime follows the write: %+v", r)
	}
	l := c.Do("POST", "/v1/files?path=link&kind=symlink", "bin/run.sh").Expect(t, 201).File(t)
	m := c.Do("POST", "/v1/files?path=empty-dir&kind=directory", "").Expect(t, 201).File(t)
	if l.Kind != "symlink" || m.Kind != "directory" || m.SizeBytes != 0 {
		t.Fatalf("kinds: %q %q", l.Kind, m.Kind)
	}
	for _, bad := range []string{"mode=888", "mode=10000", "mode=-1", "mode=abc", "kind=pipe", "mtime=yesterday"} {
		c.Do("POST", "/v1/files?path=bad&"+bad, "x").ExpectProblem(t, 422, "VALIDATION_FAILED")
	}
	c.Do("POST", "/v1/files?path=bad&kind=directory", "x").ExpectProblem(t, 422, "VALIDATION_FAILED")

	later := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	body := map[string]any{"mode": 0o700, "mtime": later.Format(time.RFC3339)}
	p := send(c, "PATCH", "/v1/files/"+f.ID, body, "Idempotency-Key", "chmod-1").Expect(t, 200).File(t)
	if p.Mode != 0o700 || !p.MTime.Equal(later) || p.Version != 2 || p.ETag != r.ETag || p.ExpiresAt != nil {
		t.Fatalf("patched: %+v", p)
	}
	if again := send(c, "PATCH", "/v1/files/"+f.ID, body, "Idempotency-Key", "chmod-1").Expect(t, 200); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeated PATCH is not a replay: %v", again.Header)
	}
	send(c, "PATCH", "/v1/files/"+f.ID, map[string]any{"mode": 0o600}, "Idempotency-Key", "chmod-1").
		ExpectProblem(t, 409, "IDEMPOTENCY_CONFLICT")
	if got := versionNumbers(versionList(t, c, f.ID, "")); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("a PATCH made a version: %v", got)
	}
	for _, bad := range []any{map[string]any{"mode": 4096}, map[string]any{"mode": 1.5}, map[string]any{"mode": "755"},
		map[string]any{"mtime": "soon"}, map[string]any{}, map[string]any{"kind": "file"}} {
		send(c, "PATCH", "/v1/files/"+f.ID, bad).ExpectProblem(t, 422, "VALIDATION_FAILED")
	}
	// The same bytes with another mode make no version but keep the mode.
	s := c.Do("POST", "/v1/files?path=bin/run.sh&if_exists=replace&mode=0711", "#!/bin/sh\necho").Expect(t, 200).File(t)
	if s.Version != 2 || s.Mode != 0o711 {
		t.Fatalf("identical bytes with a mode: %+v", s)
	}
}

// TestListByDelimiter: delimiter=/ answers the files directly under the
// prefix and the folders under it, in byte order, paged without repeats or
// holes, held to a scoped token's grant.
func TestListByDelimiter(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice", "read", "write", "delegate")
	for _, p := range []string{"top.txt", "a/x.txt", "a/b/c.txt", "a/b/d/e.txt", "a/b.txt", "a/b0", "a/e/f.txt", "a/z.txt",
		"a/zz/1", "a/zz/2", "ab/q.txt", "a/deleted.txt"} {
		upload(t, c, p, p).Expect(t, 201)
	}
	gone := list(t, c, "path=a/deleted.txt").Data[0]
	c.Do("DELETE", "/v1/files/"+gone.ID, nil).Expect(t, 200)

	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "/v1/files?delimiter=/&prefix=a/&limit=2" + cursor
		page := apitest.GetJSON[api.FileList](t, c, q)
		if len(page.Data)+len(page.Prefixes) > 2 || pages > 10 {
			t.Fatalf("page %d too long: %+v", pages, page)
		}
		for _, f := range page.Data {
			names = append(names, f.Path)
		}
		names = append(names, page.Prefixes...)
		if !page.HasMore {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	slices.Sort(names)
	want := []string{"a/b.txt", "a/b/", "a/b0", "a/e/", "a/x.txt", "a/z.txt", "a/zz/"}
	if !slices.Equal(names, want) {
		t.Fatalf("a/ lists %q, want %q", names, want)
	}
	root := apitest.GetJSON[api.FileList](t, c, "/v1/files?delimiter=/")
	if fmt.Sprint(pathsOf(root.Data), root.Prefixes) != "[top.txt] [a/ ab/]" {
		t.Fatalf("root lists %v %v", pathsOf(root.Data), root.Prefixes)
	}
	for _, bad := range []string{"delimiter=,", "delimiter=/&run_id=r", "delimiter=/&as_of=now", "delimiter=/&include_deleted=true"} {
		c.Do("GET", "/v1/files?"+bad, nil).ExpectProblem(t, 422, "VALIDATION_FAILED")
	}
	c.Do("GET", "/v1/files?delimiter=/&cursor=bm9wZQ", nil).ExpectProblem(t, 400, "INVALID_REQUEST")

	tok := mint(t, c, map[string]any{"scopes": []string{"read"}, "prefixes": []string{"a/b/"}, "expires_in": 3600})
	child := apitest.NewClient(t, srv.URL, *tok.Token)
	g := apitest.GetJSON[api.FileList](t, child, "/v1/files?delimiter=/")
	if len(g.Data) != 0 || !slices.Equal(g.Prefixes, []string{"a/"}) {
		t.Fatalf("a token scoped to a/b/ sees at the root %v %v", pathsOf(g.Data), g.Prefixes)
	}
	g = apitest.GetJSON[api.FileList](t, child, "/v1/files?delimiter=/&prefix=a/")
	if len(g.Data) != 0 || !slices.Equal(g.Prefixes, []string{"a/b/"}) {
		t.Fatalf("a token scoped to a/b/ sees in a/ %v %v", pathsOf(g.Data), g.Prefixes)
	}
}

// TestMoveOverwrite: a move over a live file makes the source's bytes the
// destination's next version (one history), deletes the source
// restorably, and is refused over a blocked file or with a stale If-Match.
func TestMoveOverwrite(t *testing.T) {
	c, _ := setup(t)
	dest := upload(t, c, "doc.txt", "v1").Expect(t, 201).File(t)
	tmp := c.Do("POST", "/v1/files?path=.doc.txt.swp&mode=0600", "v2").Expect(t, 201).File(t)
	m := move(c, tmp.ID, "doc.txt", "overwrite", "Idempotency-Key", "save-1").Expect(t, 200).File(t)
	if m.ID != dest.ID || m.Version != 2 || m.SHA256 != sha("v2") || m.Mode != 0o600 || m.Path != "doc.txt" {
		t.Fatalf("overwritten: %+v", m)
	}
	if again := move(c, tmp.ID, "doc.txt", "overwrite", "Idempotency-Key", "save-1").Expect(t, 200); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeated overwrite is not a replay: %v", again.Header)
	}
	if got := versionNumbers(versionList(t, c, dest.ID, "")); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("history of the destination: %v", got)
	}
	if got := c.Do("GET", "/v1/files/"+dest.ID+"/content", nil).Expect(t, 200); string(got.Body) != "v2" {
		t.Fatalf("content %q", got.Body)
	}
	if s := c.Do("GET", "/v1/files/"+tmp.ID, nil).Expect(t, 200).File(t); s.DeletedAt == nil {
		t.Fatalf("the source stays live: %+v", s)
	}
	if l := list(t, c, "prefix=.doc"); len(l.Data) != 0 {
		t.Fatalf("the source still lists: %v", paths(l.Data))
	}
	// Identical bytes make no version; a free destination is a plain move.
	same := upload(t, c, "same.txt", "v2").Expect(t, 201).File(t)
	if o := move(c, same.ID, "doc.txt", "overwrite").Expect(t, 200).File(t); o.Version != 2 || o.ID != dest.ID {
		t.Fatalf("identical overwrite: %+v", o)
	}
	free := upload(t, c, "n.txt", "n").Expect(t, 201).File(t)
	if o := move(c, free.ID, "new.txt", "overwrite").Expect(t, 200).File(t); o.ID != free.ID || o.Path != "new.txt" {
		t.Fatalf("overwrite onto a free path: %+v", o)
	}
	x := upload(t, c, "x.txt", "x").Expect(t, 201).File(t)
	move(c, x.ID, "doc.txt", "overwrite", "If-Match", `"nope"`).ExpectProblem(t, http.StatusPreconditionFailed, "PRECONDITION_FAILED")
	move(c, x.ID, "doc.txt", "sideways").ExpectProblem(t, 422, "VALIDATION_FAILED")
}
