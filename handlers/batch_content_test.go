package handlers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestBatchContentOfEveryShape stores put items whose content takes every
// shape JSON gives it (plain, escaped, base64 with escapes and line
// breaks): each file holds exactly the bytes encoding/json decodes from the
// request, though the server keeps them encoded until the item runs.
func TestBatchContentOfEveryShape(t *testing.T) {
	c, _ := setup(t)
	shapes := []struct{ content, encoding string }{
		{`"plain text"`, ""},
		{`""`, "utf8"},
		{`"line\nnext\t\"quoted\" back\\slash \/ caf\u00e9 \ud83d\ude00 \u0000"`, "utf8"},
		{"\"raw caf\u00e9 \u2028 \"", "utf8"},
		{`"` + base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xfe, 0xff, '/', '?'}) + `"`, "base64"},
		{`"AAEC\/v7\/\nLz8="`, "base64"},
		{`"\u0041\u0041\u0041\u0041"`, "base64"},
		{`""`, "base64"},
	}
	ops := make([]string, len(shapes))
	want := make([][]byte, len(shapes))
	for i, s := range shapes {
		var text string
		if err := json.Unmarshal([]byte(s.content), &text); err != nil {
			t.Fatal(err)
		}
		want[i] = []byte(text)
		op := `{"op":"put","path":"shape-` + string(rune('a'+i)) + `","content":` + s.content
		if s.encoding != "" {
			op += `,"encoding":"` + s.encoding + `"`
		}
		if s.encoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(text)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = b
		}
		ops[i] = op + "}"
	}
	body := `{"operations":[` + strings.Join(ops, ",") + `]}`
	var b batchResult
	c.Do("POST", "/v1/batch?wait=20", body, "Content-Type", "application/json", "Idempotency-Key", "shapes").
		Expect(t, http.StatusAccepted).JSON(t, &b)
	if b.Status != "succeeded" {
		t.Fatalf("batch %s: %+v", b.Status, b.Items)
	}
	for i, it := range b.Items {
		got := c.Do("GET", "/v1/files/"+it.File.ID+"/content", nil).Expect(t, http.StatusOK).Body
		if !bytes.Equal(got, want[i]) || it.File.SizeBytes != int64(len(want[i])) {
			t.Errorf("item %d (%s): stored %q (%d bytes), want %q", i, shapes[i].content, got, it.File.SizeBytes, want[i])
		}
	}
	// The same batch written otherwise (key order, white space, escapes
	// for the same characters) is the same request.
	again := strings.ReplaceAll(strings.ReplaceAll(body, `"plain text"`, `"pl\u0061in text"`), `{"op":"put",`, `{ "op" : "put" ,`)
	res := c.Do("POST", "/v1/batch", again, "Content-Type", "application/json", "Idempotency-Key", "shapes").Expect(t, http.StatusOK)
	if res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same batch written otherwise did not replay: %s", res.Body)
	}
	other := strings.Replace(body, `"plain text"`, `"plain text!"`, 1)
	c.Do("POST", "/v1/batch", other, "Content-Type", "application/json", "Idempotency-Key", "shapes").
		ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
}

// TestBatchItemLimitCountsDecodedBytes: the per-item limit is on the bytes
// a content stands for, whatever the JSON text they take.
func TestBatchItemLimitCountsDecodedBytes(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Limits: handlers.Limits{MaxUploadBytes: 1 << 20, BatchMaxItemBytes: 16}})
	c := srv.Client(t, "alice")
	post := func(key, content, encoding string) *apitest.Response {
		op := `{"op":"put","path":"` + key + `","content":"` + content + `"`
		if encoding != "" {
			op += `,"encoding":"` + encoding + `"`
		}
		return c.Do("POST", "/v1/batch", `{"operations":[`+op+`}]}`, "Content-Type", "application/json", "Idempotency-Key", key)
	}
	post("escaped-16", strings.Repeat(`\u0041`, 16), "").Expect(t, http.StatusAccepted)
	post("base64-16", base64.StdEncoding.EncodeToString(make([]byte, 16)), "base64").Expect(t, http.StatusAccepted)
	for key, tc := range map[string][2]string{
		"escaped-17": {strings.Repeat(`\u0041`, 17), ""},
		"plain-17":   {strings.Repeat("x", 17), "utf8"},
		"base64-17":  {base64.StdEncoding.EncodeToString(make([]byte, 17)), "base64"},
	} {
		p := post(key, tc[0], tc[1]).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		if len(p.Errors) != 1 || p.Errors[0].Field != "operations[0].content" || p.Errors[0].Message != "is larger than 16 bytes" {
			t.Fatalf("%s: %+v", key, p.Errors)
		}
	}
}
