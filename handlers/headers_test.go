package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestRepeatedHeadersAreRefused sends, for each header whose value changes
// what a request means, two lines of it (in both orders, and with names
// that differ only in case): 400 INVALID_HEADER naming the header, before
// anything else is looked at, whatever the route. Taking the first line
// would silently ignore the other (two Content-Type lines took the first;
// two Content-Digest lines were accepted or refused depending on their
// order).
func TestRepeatedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	c := srv.Client(t, "alice")
	f := upload(t, c, "h.txt", "0123456789").Expect(t, http.StatusCreated).File(t)
	link := c.Do("POST", "/v1/files/"+f.ID+"/links", nil).Expect(t, http.StatusCreated)
	var shared struct{ URL string }
	link.JSON(t, &shared)
	secretPath := shared.URL[strings.Index(shared.URL, "/s/"):]
	zero, ten := digestHeader(""), digestHeader("0123456789")
	for _, tc := range []struct {
		header, method, target string
		values                 [2]string
	}{
		{"Content-Type", "POST", "/v1/files?path=ct.txt", [2]string{"text/plain", "text/html"}},
		{"Content-Digest", "POST", "/v1/files?path=cd.txt", [2]string{ten, zero}},
		{"Content-Digest", "POST", "/v1/files?path=cd.txt", [2]string{zero, ten}},
		{"If-Match", "DELETE", "/v1/files/" + f.ID, [2]string{f.ETag, `"other"`}},
		{"If-None-Match", "GET", "/v1/files/" + f.ID + "/content", [2]string{`"other"`, f.ETag}},
		{"Range", "GET", "/v1/files/" + f.ID + "/content", [2]string{"bytes=0-1", "bytes=2-3"}},
		{"If-Range", "GET", "/v1/files/" + f.ID + "/content", [2]string{f.ETag, `"other"`}},
		{"Range", "GET", secretPath, [2]string{"bytes=0-1", "bytes=2-3"}},
		{"If-None-Match", "GET", secretPath, [2]string{`"other"`, f.ETag}},
		{"X-Agent-ID", "POST", "/v1/files?path=a.txt", [2]string{"agent-1", "agent-2"}},
		{"X-Run-ID", "GET", "/v1/files", [2]string{"run-1", "run-1"}},
		{"Idempotency-Key", "POST", "/v1/files?path=k.txt", [2]string{"k-1", "k-2"}},
		{"MCP-Protocol-Version", "POST", "/mcp", [2]string{"2025-06-18", "2024-11-05"}},
		{"Mcp-Session-Id", "POST", "/mcp", [2]string{"a", "b"}},
	} {
		t.Run(tc.header+"/"+tc.method+tc.target[:min(len(tc.target), 12)], func(t *testing.T) {
			for _, names := range [][2]string{{tc.header, tc.header}, {tc.header, strings.ToLower(tc.header)}} {
				req, err := http.NewRequestWithContext(context.Background(), tc.method, srv.URL+tc.target, strings.NewReader("0123456789"))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+srv.Token(t, "alice"))
				req.Header[http.CanonicalHeaderKey(names[0])] = append(req.Header[http.CanonicalHeaderKey(names[0])], tc.values[0])
				req.Header[http.CanonicalHeaderKey(names[1])] = append(req.Header[http.CanonicalHeaderKey(names[1])], tc.values[1])
				res := c.Send(req)
				p := res.ExpectProblem(t, http.StatusBadRequest, "INVALID_HEADER")
				if len(p.Errors) != 1 || !strings.EqualFold(p.Errors[0].Field, tc.header) {
					t.Fatalf("errors %+v, want one naming %s", p.Errors, tc.header)
				}
				if strings.Contains(string(res.Body), secretPath) {
					t.Fatalf("the problem shows the link's secret: %s", res.Body)
				}
			}
		})
	}
	if l := list(t, c, "include_deleted=true"); len(l.Data) != 1 || l.Data[0].ID != f.ID || l.Data[0].DeletedAt != nil {
		t.Fatalf("refused requests changed the files: %+v", l.Data)
	}
	// One line of each is fine, and so is a list in one line.
	c.Do("GET", "/v1/files/"+f.ID+"/content", nil, "If-None-Match", `"other", `+f.ETag).Expect(t, http.StatusNotModified)
	c.Do("GET", "/v1/files/"+f.ID+"/content", nil, "Range", "bytes=0-1").Expect(t, http.StatusPartialContent)
}
