package handlers_test

import (
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestDiffPatchAppliesWithGit: the patch between two points, applied by the
// real git apply to a checkout of the from state, gives the to state;
// adds, deletes, moves (with and without new bytes), edits, empty files,
// a missing final newline and a quoted path included.
func TestDiffPatchAppliesWithGit(t *testing.T) {
	t.Parallel()
	git, err := osexec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed to apply the patch: install git")
	}
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	put := func(path, body string) api.File {
		var f api.File
		c.Do("POST", "/v1/files?if_exists=replace&path="+url.QueryEscape(path), body).JSON(t, &f)
		if f.ID == "" {
			t.Fatalf("upload of %s", path)
		}
		return f
	}
	long := strings.Repeat("line\n", 40)
	put("w/edit.txt", long)
	gone := put("w/gone.md", "to be deleted\n")
	mv := put("w/old/name.txt", "moved as is\n")
	mvEdit := put("w/mv-edit.txt", "one\ntwo\nthree\n")
	put("w/no-newline.txt", "a\nb")
	put("w/empty-gone.txt", "")
	put("w/ünïcode \"q\".txt", "quoted\n")
	put("outside.txt", "not under the prefix\n")
	cp := createCheckpointREST(t, c, `{"name":"patch-from"}`)

	put("w/edit.txt", strings.Replace(long, "line\n", "changed\n", 3)+"tail\n")
	c.Do("DELETE", "/v1/files/"+gone.ID, nil).Expect(t, http.StatusOK)
	move(c, mv.ID, "w/new/name.txt", "").Expect(t, http.StatusOK)
	move(c, mvEdit.ID, "w/moved-edit.txt", "").Expect(t, http.StatusOK)
	put("w/moved-edit.txt", "one\n2\nthree\n")
	put("w/no-newline.txt", "a\nc")
	put("w/added.txt", "brand new\n")
	put("w/added-empty.txt", "")
	put("w/ünïcode \"q\".txt", "quoted, changed\n")
	put("outside.txt", "changed outside\n")

	dir := t.TempDir()
	from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
	checkout(t, c, cp.ID, "w/", from)
	checkout(t, c, "now", "w/", to)
	res := c.Do("GET", "/v1/diff?format=patch&prefix=w/&from="+cp.ID, nil).Expect(t, http.StatusOK)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/x-diff") {
		t.Fatalf("content type %q", ct)
	}
	patch := string(res.Body)
	for _, want := range []string{"rename from w/old/name.txt\nrename to w/new/name.txt\n", "new file mode 100644\n",
		"deleted file mode 100644\n", `"a/w/\303\274n\303\257code \"q\".txt"`} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	if strings.Contains(patch, "outside.txt") {
		t.Errorf("patch reaches outside the prefix:\n%s", patch)
	}
	runIn(t, from, git, "init", "-q")
	cmd := osexec.Command(git, "apply", "--whitespace=nowarn", "-")
	cmd.Dir, cmd.Stdin = from, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, patch)
	}
	if err := os.RemoveAll(filepath.Join(from, ".git")); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command("diff", "-r", from, to).CombinedOutput(); err != nil {
		t.Fatalf("the patched from state differs from the to state: %v\n%s\npatch:\n%s", err, out, patch)
	}
}

// TestDiffPatchBinary: a file that is not text is one "Binary files
// differ" line, and the patch's page continues in a Link header.
func TestDiffPatchBinary(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	cp := createCheckpointREST(t, c, `{}`)
	c.Do("POST", "/v1/files?path=b/blob.bin", "\x00\x01\x02").Expect(t, http.StatusCreated)
	c.Do("POST", "/v1/files?path=b/text.txt", "text\n").Expect(t, http.StatusCreated)
	res := c.Do("GET", "/v1/diff?format=patch&limit=1&from="+cp.ID, nil).Expect(t, http.StatusOK)
	want := "diff --git a/b/blob.bin b/b/blob.bin\nnew file mode 100644\nBinary files /dev/null and b/b/blob.bin differ\n"
	if string(res.Body) != want {
		t.Fatalf("patch:\n%s\nwant:\n%s", res.Body, want)
	}
	link := res.Header.Get("Link")
	if !strings.Contains(link, `rel="next"`) || !strings.Contains(link, "cursor=") {
		t.Fatalf("Link %q", link)
	}
	next := strings.TrimPrefix(strings.SplitN(link, ">", 2)[0], "<")
	res = c.Do("GET", next, nil).Expect(t, http.StatusOK)
	if !strings.Contains(string(res.Body), "+++ b/b/text.txt\n@@ -0,0 +1 @@\n+text\n") || res.Header.Get("Link") != "" {
		t.Fatalf("second page %q (Link %q)", res.Body, res.Header.Get("Link"))
	}
	c.Do("GET", "/v1/diff?format=yaml&from="+cp.ID, nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// checkout writes the files under prefix as of point into dir.
func checkout(t *testing.T, c *apitest.Client, point, prefix, dir string) {
	t.Helper()
	var list api.FileList
	c.Do("GET", "/v1/files?limit=1000&prefix="+prefix+"&as_of="+point, nil).Expect(t, http.StatusOK).JSON(t, &list)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range list.Data {
		body := c.Do("GET", "/v1/files/"+f.ID+"/content?as_of="+point, nil).Expect(t, http.StatusOK).Body
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runIn(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := osexec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
