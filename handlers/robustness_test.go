package handlers_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/internal/testkit"
)

// missingFileID is a well-formed id no file has.
var missingFileID = "file_" + strings.Repeat("0", 26)

// TestBadInputIsNeverA500 covers inputs that once reached Postgres or the
// body reader unchecked.
func TestBadInputIsNeverA500(t *testing.T) {
	c, b := setup(t)
	for _, path := range []string{"/v1/files/file_%00", "/v1/files/file_%00/content", "/v1/uploads/upl_%00", "/v1/batch/batch_%00"} {
		c.Do("GET", path, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	}
	c.Do("DELETE", "/v1/files/%00", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	c.Do("GET", "/v1/files?prefix=%00", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	c.Do("POST", "/v1/batch", `{"operations":[{"op":"delete","file_id":"\u0000"}]}`, "Content-Type", "application/json",
		"Idempotency-Key", "nul-batch").ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")

	// A malformed chunked body is the client's fault: 400, nothing stored.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/files?path=chunked.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n", b.srv.Token(t, "alice"))
	status, body := testkit.RawAnswer(t, conn)
	if status != http.StatusBadRequest || !strings.Contains(body, "INVALID_REQUEST") {
		t.Fatalf("malformed chunked body: %d %s", status, body)
	}
	if n := len(list(t, c, "include_deleted=true").Data); n != 0 {
		t.Fatalf("%d files after a malformed body", n)
	}

	u := createUpload(t, c, map[string]any{"path": "im.bin", "size_bytes": 3}, http.StatusCreated)
	putPart(t, c, u.ID, 1, []byte("abc")).Expect(t, 200)
	complete(t, c, u.ID, "", "If-Match", `"abc"`).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	complete(t, c, u.ID, "").Expect(t, http.StatusCreated)
}
