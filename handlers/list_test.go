package handlers_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/agentfs/agentfs/handlers/apitest"
)

func list(t *testing.T, c *apitest.Client, query string) apitest.FileList {
	t.Helper()
	return apitest.GetJSON[apitest.FileList](t, c, "/v1/files?"+query)
}

// pluck is field of each of xs, in order: the ids or paths of a page, to
// compare with what a test expects.
func pluck[T, V any](xs []T, field func(T) V) []V {
	out := make([]V, len(xs))
	for i, x := range xs {
		out[i] = field(x)
	}
	return out
}

func paths(files []apitest.File) []string {
	return pluck(files, func(f apitest.File) string { return f.Path })
}

func TestListFiles(t *testing.T) {
	t.Run("FiltersByRunAgentPrefixAndPath", func(t *testing.T) {
		c, b := setup(t)
		upload(t, c, "a/1", "1", "X-Run-ID", "run-a", "X-Agent-ID", "ag-1").Expect(t, 201)
		upload(t, c, "a/2", "2", "X-Run-ID", "run-a", "X-Agent-ID", "ag-2").Expect(t, 201)
		upload(t, c, "b/1", "3", "X-Run-ID", "run-b", "X-Agent-ID", "ag-1").Expect(t, 201)
		upload(t, c, "a_%/x", "4").Expect(t, 201)
		// Another run replacing a file does not move it to that run.
		c.Do("POST", "/v1/files?path=a/1&if_exists=replace", "1b", "X-Run-ID", "run-b").Expect(t, 200)
		other := b.srv.Client(t, "bob")
		upload(t, other, "a/9", "x", "X-Run-ID", "run-a").Expect(t, 201)

		for _, tc := range []struct {
			query string
			want  string
		}{
			{"run_id=run-a", "[a/2 a/1]"},
			{"run_id=run-b", "[b/1]"},
			{"agent_id=ag-1", "[b/1 a/1]"},
			{"prefix=a/", "[a/2 a/1]"},
			{"prefix=" + url.QueryEscape("a_%"), "[a_%/x]"},
			{"path=b/1", "[b/1]"},
			{"run_id=run-a&agent_id=ag-2", "[a/2]"},
			{"", "[a_%/x b/1 a/2 a/1]"},
		} {
			if got := fmt.Sprint(paths(list(t, c, tc.query).Data)); got != tc.want {
				t.Errorf("%q: got %s, want %s", tc.query, got, tc.want)
			}
		}
	})

	t.Run("PagesWithCursor", func(t *testing.T) {
		c, _ := setup(t)
		for i := 0; i < 7; i++ {
			upload(t, c, fmt.Sprintf("f/%d", i), "x", "X-Run-ID", "r").Expect(t, 201)
		}
		var seen []string
		query := "run_id=r&limit=3"
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			l := list(t, c, query)
			seen = append(seen, paths(l.Data)...)
			if !l.HasMore {
				if l.NextCursor != nil {
					t.Fatal("last page has a next_cursor")
				}
				break
			}
			query = "run_id=r&limit=3&cursor=" + url.QueryEscape(*l.NextCursor)
		}
		if got := fmt.Sprint(seen); got != "[f/6 f/5 f/4 f/3 f/2 f/1 f/0]" {
			t.Fatalf("pages gave %s", got)
		}
	})

	t.Run("IncludesDeletedOnRequest", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "d.txt", "old").Expect(t, 201).File(t)
		c.Do("DELETE", "/v1/files/"+f.ID, nil).Expect(t, 200)
		upload(t, c, "d.txt", "new").Expect(t, 201)
		if got := len(list(t, c, "path=d.txt").Data); got != 1 {
			t.Fatalf("live files at d.txt: %d", got)
		}
		if got := len(list(t, c, "path=d.txt&include_deleted=true").Data); got != 2 {
			t.Fatalf("files that ever held d.txt: %d", got)
		}
	})

	t.Run("RejectsBadParameters", func(t *testing.T) {
		c, _ := setup(t)
		for _, tc := range []struct {
			query  string
			status int
			code   string
		}{
			{"limit=abc", 400, "INVALID_REQUEST"},
			{"limit=0", 422, "VALIDATION_FAILED"},
			{"limit=100000", 422, "VALIDATION_FAILED"},
			{"cursor=not-a-cursor", 400, "INVALID_REQUEST"},
			{"include_deleted=maybe", 400, "INVALID_REQUEST"},
			{"path=../x", 422, "INVALID_PATH"},
			{"run_id=" + url.QueryEscape("bad run"), 422, "VALIDATION_FAILED"},
		} {
			c.Do("GET", "/v1/files?"+tc.query, nil).ExpectProblem(t, tc.status, tc.code)
		}
	})
}
