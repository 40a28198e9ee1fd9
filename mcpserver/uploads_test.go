package mcpserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/mcpserver"
)

// openSession creates an upload session of size bytes at path for run
// through the REST API (one part: the sessions are small), sends that
// part when sendPart, and returns the session's id.
func openSession(t *testing.T, b *bundle, run, path, body string, sendPart bool) string {
	t.Helper()
	c := b.srv.Client(t, "up")
	var u api.Upload
	c.Do("POST", "/v1/uploads", `{"path":"`+path+`","size_bytes":`+strconv.Itoa(len(body))+`}`, "Content-Type", "application/json",
		"X-Run-ID", run).Expect(t, http.StatusCreated).JSON(t, &u)
	if sendPart {
		c.Do("PUT", "/v1/uploads/"+u.ID+"/parts/1", body, "X-Run-ID", run).Expect(t, http.StatusOK)
	}
	return u.ID
}

// TestUploadToolsFinishARunsSessions: run_recovery names complete_upload
// for a session whose parts are all in, and write_file (under a key named
// after the session) then abort_upload for one missing parts; following
// those calls, each twice, leaves each intended file written once and no
// session open; a token scoped to a folder can neither complete nor abort
// a session outside it (NOT_FOUND, the session untouched).
func TestUploadToolsFinishARunsSessions(t *testing.T) {
	b := setup(t, config{subject: "up", agentID: "agent-b", runID: "run-up"})
	full := openSession(t, b, "run-up", "in/full.txt", "all of it", true)
	partial := openSession(t, b, "run-up", "in/partial.txt", "partial text", false)
	outside := openSession(t, b, "run-up", "out/other.txt", "outside", true)

	var r mcpserver.RunRecovery
	res := b.ok(t, "run_recovery", map[string]any{}, &r)
	t.Logf("run_recovery text:\n%s", text(res))
	for _, want := range []string{
		`complete_upload {upload_id: "` + full + `"}: every part of in/full.txt is in (1 of 1)`,
		`write_file {path: "in/partial.txt", content: the whole file (12 bytes) as it was to be uploaded, idempotency_key: "rewrite-` + partial + `"}`,
		`abort_upload {upload_id: "` + partial + `"}: ends the session`,
	} {
		if !strings.Contains(text(res), want) {
			t.Fatalf("text lacks %q:\n%s", want, text(res))
		}
	}
	if strings.Contains(text(res), "no tool does this") {
		t.Fatalf("a step names no tool:\n%s", text(res))
	}

	scoped := connect(t, b.srv, config{subject: "up", runID: "run-up", prefixes: []string{"in/"}})
	scoped.fail(t, "complete_upload", map[string]any{"upload_id": outside}, "NOT_FOUND")
	scoped.fail(t, "abort_upload", map[string]any{"upload_id": outside}, "NOT_FOUND")
	var still api.Upload
	b.srv.Client(t, "up").Do("GET", "/v1/uploads/"+outside, nil).Expect(t, http.StatusOK).JSON(t, &still)
	if still.Status != "pending" {
		t.Fatalf("the scoped token's calls changed the session outside its folder: %s", still.Status)
	}

	var f1, f2 mcpserver.File
	scoped.ok(t, "complete_upload", map[string]any{"upload_id": full}, &f1)
	scoped.ok(t, "complete_upload", map[string]any{"upload_id": full}, &f2)
	if f1.Path != "in/full.txt" || f1.SizeBytes != 9 || f2.ID != f1.ID || f2.Version != f1.Version {
		t.Fatalf("complete twice: %+v then %+v", f1, f2)
	}
	write := map[string]any{"path": "in/partial.txt", "content": "partial text", "idempotency_key": "rewrite-" + partial}
	scoped.ok(t, "write_file", write, &f1)
	scoped.ok(t, "write_file", write, &f2)
	if f1.ID != f2.ID || f1.Version != 1 || f2.Version != 1 {
		t.Fatalf("write_file twice under the session's key: %+v then %+v", f1, f2)
	}
	var u1, u2 mcpserver.Upload
	scoped.ok(t, "abort_upload", map[string]any{"upload_id": partial}, &u1)
	scoped.ok(t, "abort_upload", map[string]any{"upload_id": partial}, &u2)
	if u1.Status != "aborted" || u2.Status != "aborted" {
		t.Fatalf("abort twice: %s then %s", u1.Status, u2.Status)
	}
	b.fail(t, "complete_upload", map[string]any{"upload_id": partial}, "UPLOAD_ABORTED")

	b.ok(t, "run_recovery", map[string]any{}, &r)
	if len(r.InFlight.Uploads) != 1 || r.InFlight.Uploads[0].ID != outside || r.Confirmed.Counts.Created != 2 || r.Confirmed.LiveFiles != 2 {
		t.Fatalf("after the steps: %s", mustJSON(r))
	}
}
