package handlers_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/idempotency"
)

// keyedLink makes a share link under an Idempotency-Key and returns the
// answer and its secret.
func keyedLink(t *testing.T, c *apitest.Client, fileID, key string) (*apitest.Response, string) {
	t.Helper()
	res := send(c, "POST", "/v1/files/"+fileID+"/links", `{"expires_in":600}`, "Idempotency-Key", key).Expect(t, http.StatusCreated)
	var l api.Link
	res.JSON(t, &l)
	if l.URL == nil {
		t.Fatalf("a new link has no url: %s", res.Body)
	}
	return res, (*l.URL)[strings.LastIndex(*l.URL, "/s/")+len("/s/"):]
}

// recordLeaks counts the idempotency records that hold secret, in plain
// text or as the hex of its bytes, in any column.
func recordLeaks(t *testing.T, b *testBundle, secret string) int {
	t.Helper()
	var n int
	err := b.srv.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys k
		WHERE strpos(k::text, $1) > 0 OR strpos(k::text, $2) > 0`, secret, hex.EncodeToString([]byte(secret))).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestShareLinkSecretInRecords: a keyed share link's url is kept only
// sealed in its key's record. A retry by the token that made it still
// learns the url; another token of the subject, /v1/operations, and a
// server that no longer holds the key that sealed it see the link with
// its url null, and are told so.
func TestShareLinkSecretInRecords(t *testing.T) {
	t.Run("ReplayToTheSameTokenShowsTheURL", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		first, _ := keyedLink(t, c, f.ID, "link-1")
		again := send(c, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		if again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Idempotent-Redacted") != "" ||
			!bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replay %v %s, want %s", again.Header, again.Body, first.Body)
		}
		if n := len(linkList(t, c, f.ID)); n != 1 {
			t.Fatalf("%d links after a replay", n)
		}
	})

	t.Run("ReplayToAnotherTokenShowsItNull", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		first, secret := keyedLink(t, c, f.ID, "link-1")
		var made api.Link
		first.JSON(t, &made)
		other := b.srv.Client(t, "alice") // the same subject, another token
		res := send(other, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		var l api.Link
		res.JSON(t, &l)
		if res.Header.Get("Idempotent-Replayed") != "true" || res.Header.Get("Idempotent-Redacted") != "url" ||
			l.URL != nil || l.ID != made.ID || !l.ExpiresAt.Equal(made.ExpiresAt) || bytes.Contains(res.Body, []byte(secret)) {
			t.Fatalf("replay to another token: %v %s", res.Header, res.Body)
		}
		if n := len(linkList(t, c, f.ID)); n != 1 {
			t.Fatalf("%d links after a replay", n)
		}
		// The token that made it still gets it.
		mine := send(c, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		if !bytes.Equal(mine.Body, first.Body) {
			t.Fatalf("replay to the token that made it: %s", mine.Body)
		}
	})

	t.Run("TheRecordHoldsNoPlainSecret", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		_, secret := keyedLink(t, c, f.ID, "link-1")
		if n := recordLeaks(t, b, secret); n != 0 {
			t.Fatalf("%d idempotency records hold the secret", n)
		}
		var body []byte
		var secrets []string
		var sealed []byte
		var sealedFor string
		err := b.srv.Store.Pool().QueryRow(context.Background(), `SELECT response_body, response_secrets, sealed_secrets, sealed_for
			FROM idempotency_keys WHERE key = 'link-1'`).Scan(&body, &secrets, &sealed, &sealedFor)
		if err != nil {
			t.Fatal(err)
		}
		var recorded map[string]json.RawMessage
		if err := json.Unmarshal(body, &recorded); err != nil || string(recorded["url"]) != "null" ||
			len(secrets) != 1 || secrets[0] != "url" || len(sealed) < 32 || !strings.HasPrefix(sealedFor, "tok_") {
			t.Fatalf("record: body %s, secrets %v, %d sealed bytes for %q (%v)", body, secrets, len(sealed), sealedFor, err)
		}
	})

	t.Run("OperationsShowItRedacted", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		_, secret := keyedLink(t, c, f.ID, "link-1")
		for name, reader := range map[string]*apitest.Client{
			"TheTokenThatMadeIt": c, "ReadOnly": b.srv.Client(t, "alice", "read"),
		} {
			res := reader.Do("GET", "/v1/operations/link-1", nil).Expect(t, 200)
			var op struct {
				api.Operation
				Response api.Link `json:"response"`
			}
			res.JSON(t, &op)
			if bytes.Contains(res.Body, []byte(secret)) || op.Response.URL != nil || op.Response.ID == "" ||
				len(op.Redacted) != 1 || op.Redacted[0] != "url" || *op.ResponseStatus != 201 {
				t.Fatalf("%s: /v1/operations shows %s", name, res.Body)
			}
		}
		// Keys whose answer has no secret name none.
		upload(t, c, "k.txt", "k", "Idempotency-Key", "put-1").Expect(t, 201)
		var op api.Operation
		c.Do("GET", "/v1/operations/put-1", nil).Expect(t, 200).JSON(t, &op)
		if op.Redacted == nil || len(op.Redacted) != 0 {
			t.Fatalf("redacted %v for a put", op.Redacted)
		}
	})

	t.Run("ARotatedKeyStillOpensAndALostOneRedacts", func(t *testing.T) {
		t.Parallel()
		oldKey, newKey := apitest.NewRecordKey(t), apitest.NewRecordKey(t)
		first := apitest.NewServer(t, apitest.Options{RecordKeys: recordKeys(t, oldKey)})
		token := first.Token(t, "alice")
		c := apitest.NewClient(t, first.URL, token)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		made, secret := keyedLink(t, c, f.ID, "link-1")
		replay := func(keys *idempotency.RecordKeys) (*apitest.Response, *apitest.Server) {
			cfg := first.Config
			srv := apitest.NewServer(t, apitest.Options{Config: &cfg, RecordKeys: keys})
			return send(apitest.NewClient(t, srv.URL, token), "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`,
				"Idempotency-Key", "link-1"), srv
		}
		lost, srv := replay(recordKeys(t, newKey))
		lost.Expect(t, http.StatusCreated)
		var l api.Link
		lost.JSON(t, &l)
		if l.URL != nil || lost.Header.Get("Idempotent-Redacted") != "url" || bytes.Contains(lost.Body, []byte(secret)) {
			t.Fatalf("a replay under a key that did not seal it: %v %s", lost.Header, lost.Body)
		}
		if !strings.Contains(srv.Logs.String(), "recorded secret cannot be opened") {
			t.Fatalf("the unopenable secret was not logged:\n%s", srv.Logs)
		}
		rotated, _ := replay(recordKeys(t, newKey+","+oldKey))
		rotated.Expect(t, http.StatusCreated)
		if !strings.Contains(string(rotated.Body), "/s/"+secret) || rotated.Header.Get("Idempotent-Redacted") != "" {
			t.Fatalf("a replay with the old key still listed: %v %s, want %s", rotated.Header, rotated.Body, made.Body)
		}
	})

	t.Run("AnAlteredRecordRedacts", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "s.txt", "s").Expect(t, 201).File(t)
		keyedLink(t, c, f.ID, "link-1")
		other := b.srv.Client(t, "alice")
		// Someone with the database hands the record to another token:
		// the seal no longer opens, and nothing answers 500.
		var otherID string
		if err := b.srv.Store.Pool().QueryRow(context.Background(),
			`SELECT id FROM tokens ORDER BY created_at DESC, id DESC LIMIT 1`).Scan(&otherID); err != nil {
			t.Fatal(err)
		}
		exec(t, b, `UPDATE idempotency_keys SET sealed_for = $1 WHERE key = 'link-1'`, otherID)
		res := send(other, "POST", "/v1/files/"+f.ID+"/links", `{"expires_in":600}`, "Idempotency-Key", "link-1").Expect(t, 201)
		var l api.Link
		res.JSON(t, &l)
		if l.URL != nil || res.Header.Get("Idempotent-Redacted") != "url" {
			t.Fatalf("an altered record replayed %v %s", res.Header, res.Body)
		}
	})
}

// recordKeys reads AGENTFS_RECORD_KEY's value.
func recordKeys(t *testing.T, value string) *idempotency.RecordKeys {
	t.Helper()
	keys, err := idempotency.ParseRecordKeys(value)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
