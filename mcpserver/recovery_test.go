package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/storage"
)

// TestRunRecoveryTool: run_recovery of the session's run (and of a run by
// id) answers the REST recovery as structured content and as text a model
// acts on: each key's status, the session missing parts, and the next
// actions in order with their exact requests; a token scoped to a folder
// sees only the keys whose writes lie inside it.
func TestRunRecoveryTool(t *testing.T) {
	b := setup(t, config{subject: "rec", agentID: "agent-r", runID: "run-rec"})
	b.ok(t, "write_file", map[string]any{"path": "in/done.txt", "content": "done", "idempotency_key": "w-done"}, nil)
	b.ok(t, "write_file", map[string]any{"path": "out/done.txt", "content": "done", "idempotency_key": "w-out"}, nil)
	ctx := context.Background()
	claim, _, err := b.srv.Store.BeginKey(ctx, "rec", "w-dead", "POST", "/v1/files", []byte("the dead request"),
		storage.KeyOrigin{RunID: "run-rec", Paths: []string{"in/dead.txt"}, RequestURI: "/v1/files?path=in%2Fdead.txt"})
	if err != nil {
		t.Fatal(err)
	}
	claim.Close()
	if _, err := b.srv.Store.Pool().Exec(ctx, `UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE key = 'w-dead'`); err != nil {
		t.Fatal(err)
	}
	c := b.srv.Client(t, "rec")
	c.Do("POST", "/v1/uploads", `{"path":"in/big.bin","size_bytes":12582912}`, "Content-Type", "application/json",
		"X-Run-ID", "run-rec").Expect(t, http.StatusCreated)

	var r mcpserver.RunRecovery
	res := b.ok(t, "run_recovery", map[string]any{}, &r)
	if r.Object != "run_recovery" || r.RunID != "run-rec" || len(r.Operations) != 3 || len(r.InFlight.Uploads) != 1 || len(r.NextActions) != 5 {
		t.Fatalf("structured content %s", mustJSON(r))
	}
	t.Logf("run_recovery text:\n%s", text(res))
	for _, want := range []string{"Run run-rec, as of event cursor ", "Confirmed: 2 events (2 created",
		"- w-dead abandoned: POST /v1/files. send POST /v1/files?path=in%2Fdead.txt again with Idempotency-Key w-dead",
		"- w-done completed: POST /v1/files. nothing to redo", "0 of 3 parts received, missing 1–3.", "Next actions, in order:\n1. PUT /v1/uploads/",
		"4. POST /v1/uploads/", "5. POST /v1/files?path=in%2Fdead.txt with Idempotency-Key w-dead: send",
		"With these tools:\n1. write_file {path: \"in/big.bin\", content: the whole file (12582912 bytes) as it was to be uploaded, idempotency_key: \"rewrite-upl_",
		"2. abort_upload {upload_id: \"upl_",
		"3. write_file {path: \"in/dead.txt\", idempotency_key: \"w-dead\"} with the content"} {
		if !strings.Contains(text(res), want) {
			t.Fatalf("text lacks %q:\n%s", want, text(res))
		}
	}
	other := connect(t, b.srv, config{subject: "rec", runID: "run-other"})
	other.ok(t, "run_recovery", map[string]any{"run_id": "run-rec"}, &r)
	if len(r.Operations) != 3 {
		t.Fatalf("by run id: %s", mustJSON(r))
	}
	other.fail(t, "run_recovery", map[string]any{}, "NOT_FOUND")

	scoped := connect(t, b.srv, config{subject: "rec", runID: "run-rec", prefixes: []string{"in/"}})
	scoped.ok(t, "run_recovery", map[string]any{}, &r)
	var keys []string
	for _, o := range r.Operations {
		keys = append(keys, o.IdempotencyKey)
	}
	if strings.Join(keys, ",") != "w-dead,w-done" || len(r.InFlight.Uploads) != 1 || r.Confirmed.Events != 1 {
		t.Fatalf("the token scoped to in/ sees keys %v, %d sessions, %d events; want w-dead and w-done, 1, 1",
			keys, len(r.InFlight.Uploads), r.Confirmed.Events)
	}
}
