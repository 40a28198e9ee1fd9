package handlers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/webhook"
)

// receipt is one request a receiver got.
type receipt struct {
	id, timestamp, signature string
	body                     []byte
	status                   int // what the receiver answered
}

// receiver is a webhook receiver whose answer the test sets: 200 while
// up, another status while down.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	answer int
	got    []receipt
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{answer: http.StatusOK}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := r.answer
		r.got = append(r.got, receipt{id: req.Header.Get("webhook-id"), timestamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), body: body, status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) set(status int) {
	r.mu.Lock()
	r.answer = status
	r.mu.Unlock()
}

func (r *receiver) receipts() []receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// acked are the event ids the receiver answered 2xx, in order.
func (r *receiver) acked() []string {
	var out []string
	for _, g := range r.receipts() {
		if g.status < 300 {
			out = append(out, g.id)
		}
	}
	return out
}

// verifySignature checks a delivery the way the Standard Webhooks
// specification tells a receiver to, written here from the specification
// and not from the server's code: the secret's base64 after "whsec_" is
// the key; the signed content is "msg_id.timestamp.body"; the header is a
// space-separated list of "v1,<base64 signature>", one of which must
// match; the timestamp must be within five minutes of now.
func verifySignature(t *testing.T, secret string, g receipt) error {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	ts, err := strconv.ParseInt(g.timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", g.timestamp, err)
	}
	if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %d is too far from now", ts)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", g.id, g.timestamp, g.body)
	want := mac.Sum(nil)
	for _, part := range strings.Fields(g.signature) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok || version != "v1" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(raw, want) {
			return nil
		}
	}
	return fmt.Errorf("no v1 signature in %q matches", g.signature)
}

// fastWebhooks delivers to receivers on loopback, retrying on a schedule
// of fractions of a second, so an outage of a few seconds stands for one
// of hours.
var fastWebhooks = webhook.Config{AllowPrivate: true, Timeout: 2 * time.Second, RescueAfter: 6 * time.Second,
	Retries: webhook.Schedule{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond,
		400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}}

func webhookServer(t *testing.T, cfg webhook.Config) (*apitest.Server, *apitest.Client) {
	t.Helper()
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Webhook: cfg})
	return srv, srv.Client(t, "alice", "read", "write", "share", "delegate")
}

func createWebhook(t *testing.T, c *apitest.Client, body map[string]any) api.Webhook {
	t.Helper()
	w := created[api.Webhook](t, c, "/v1/webhooks", body)
	if w.Secret == nil || !strings.HasPrefix(*w.Secret, "whsec_") || w.Status != "active" {
		t.Fatalf("a new webhook: %+v", w)
	}
	return w
}

// eventIDs are the subject's events in feed order.
func eventIDs(t *testing.T, c *apitest.Client) []string {
	t.Helper()
	list := apitest.GetJSON[api.EventList](t, c, "/v1/events?limit=1000")
	var out []string
	for _, e := range list.Data {
		out = append(out, e.ID)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	storagetest.Eventually(t, 60*time.Second, what, cond)
}

func deliveries(t *testing.T, c *apitest.Client, id string) []api.WebhookDelivery {
	t.Helper()
	return apitest.GetJSON[api.WebhookDeliveryList](t, c, "/v1/webhooks/"+id+"/deliveries?limit=1000").Data
}

// TestWebhookSurvivesReceiverOutage: a receiver that is down (503) while
// events commit, and whose retries fail for a while, gets every event once
// it is up again, in feed order, none lost and none skipped, each signed
// so that a Standard Webhooks verifier accepts it; the delivery log shows
// the failed attempts and the successes.
func TestWebhookSurvivesReceiverOutage(t *testing.T) {
	_, c := webhookServer(t, fastWebhooks)
	rcv := newReceiver(t)
	hook := createWebhook(t, c, map[string]any{"url": rcv.URL + "/hook", "description": "outage"})
	rcv.set(http.StatusServiceUnavailable)
	for i := range 10 {
		upload(t, c, fmt.Sprintf("out/%02d.txt", i), "v"+strconv.Itoa(i)).Expect(t, http.StatusCreated)
	}
	waitFor(t, "four failed attempts", func() bool { return len(rcv.receipts()) >= 4 })
	for i := 10; i < 15; i++ { // more events while it is down
		upload(t, c, fmt.Sprintf("out/%02d.txt", i), "v"+strconv.Itoa(i)).Expect(t, http.StatusCreated)
	}
	rcv.set(http.StatusOK)
	want := eventIDs(t, c)
	if len(want) != 15 {
		t.Fatalf("%d events, want 15", len(want))
	}
	waitFor(t, "every event acknowledged", func() bool { return len(rcv.acked()) >= len(want) })
	if got := rcv.acked(); !slices.Equal(got, want) {
		t.Fatalf("acknowledged\n%v\nwant, in feed order\n%v", got, want)
	}
	for _, g := range rcv.receipts() {
		if err := verifySignature(t, *hook.Secret, g); err != nil {
			t.Fatalf("event %s: %v", g.id, err)
		}
		var e api.Event
		if err := json.Unmarshal(g.body, &e); err != nil || e.ID != g.id || e.Object != "event" {
			t.Fatalf("body of %s is not its event: %s", g.id, g.body)
		}
	}
	// The receiver has answered the last event before the worker records
	// that answer: wait for the log to hold it.
	var log []api.WebhookDelivery
	failed, succeeded := 0, 0
	waitFor(t, "every success in the delivery log", func() bool {
		log, failed, succeeded = deliveries(t, c, hook.ID), 0, 0
		for _, d := range log {
			switch {
			case d.Status == "failed" && d.StatusCode != nil && *d.StatusCode == 503:
				failed++
			case d.Status == "succeeded":
				succeeded++
			}
		}
		return succeeded >= 15
	})
	if failed < 4 || succeeded != 15 {
		t.Fatalf("delivery log: %d failed (503), %d succeeded; want ≥ 4 and 15", failed, succeeded)
	}
	var first api.WebhookDelivery // the first event's last failed attempt counts its attempts
	for _, d := range log {
		if d.EventID == want[0] && d.Status == "succeeded" {
			first = d
		}
	}
	if first.Attempt < 5 {
		t.Fatalf("the first event succeeded at attempt %d, want after ≥ 4 failures", first.Attempt)
	}
	got := apitest.GetJSON[api.Webhook](t, c, "/v1/webhooks/"+hook.ID)
	if got.Secret != nil || got.Status != "active" || got.FailedAttempts != 0 {
		t.Fatalf("after the outage: %+v", got)
	}
	for i := len(log) - 1; i >= 0; i-- {
		d := log[i]
		code := "-"
		if d.StatusCode != nil {
			code = strconv.FormatInt(*d.StatusCode, 10)
		}
		t.Logf("%s %s attempt %d %s %s %dms", d.At.Format("15:04:05.000"), d.EventID, d.Attempt, d.Status, code, d.LatencyMS)
	}
}

// disabledByReceiver makes a webhook whose receiver answers status, writes
// a file, waits for the webhook to be disabled and checks the reason it
// gives holds reason.
func disabledByReceiver(t *testing.T, cfg webhook.Config, status int, reason string) (*apitest.Client, *receiver, api.Webhook) {
	t.Helper()
	_, c := webhookServer(t, cfg)
	rcv := newReceiver(t)
	rcv.set(status)
	hook := createWebhook(t, c, map[string]any{"url": rcv.URL})
	upload(t, c, "a.txt", "a").Expect(t, http.StatusCreated)
	waitFor(t, "the webhook disabled", func() bool {
		return apitest.GetJSON[api.Webhook](t, c, "/v1/webhooks/"+hook.ID).Status == "disabled"
	})
	got := apitest.GetJSON[api.Webhook](t, c, "/v1/webhooks/"+hook.ID)
	if got.DisabledReason == nil || !strings.Contains(*got.DisabledReason, reason) {
		t.Fatalf("disabled webhook: %+v", got)
	}
	return c, rcv, hook
}

// TestWebhookGoneDisables: a 410 disables the webhook at once, with the
// reason; nothing more is sent.
func TestWebhookGoneDisables(t *testing.T) {
	c, rcv, hook := disabledByReceiver(t, fastWebhooks, http.StatusGone, "410")
	upload(t, c, "b.txt", "b").Expect(t, http.StatusCreated)
	time.Sleep(300 * time.Millisecond) // what a live worker would have taken to send it
	if n := len(rcv.receipts()); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1 (the 410)", n)
	}
	if log := deliveries(t, c, hook.ID); len(log) != 1 || *log[0].StatusCode != 410 {
		t.Fatalf("delivery log: %+v", log)
	}
	// Made active again, it resumes after its cursor: both events.
	rcv.set(http.StatusOK)
	send(c, "PATCH", "/v1/webhooks/"+hook.ID, map[string]any{"status": "active"}).Expect(t, http.StatusOK)
	waitFor(t, "both events after resuming", func() bool { return len(rcv.acked()) == 2 })
	if got, want := rcv.acked(), eventIDs(t, c); !slices.Equal(got, want) {
		t.Fatalf("after resuming: %v, want %v", got, want)
	}
}

// TestWebhookRetriesSpentDisable: a receiver that keeps failing gets one
// attempt more than the schedule has waits, then the webhook is disabled.
func TestWebhookRetriesSpentDisable(t *testing.T) {
	cfg := fastWebhooks
	cfg.Retries = webhook.Schedule{10 * time.Millisecond, 20 * time.Millisecond}
	_, rcv, _ := disabledByReceiver(t, cfg, http.StatusInternalServerError, "no 2xx after 3 attempts")
	if n := len(rcv.receipts()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

// TestWebhookRotateSecret: after a rotation, deliveries are signed with
// the new secret and no longer with the old one; GET never shows a secret.
func TestWebhookRotateSecret(t *testing.T) {
	_, c := webhookServer(t, fastWebhooks)
	rcv := newReceiver(t)
	hook := createWebhook(t, c, map[string]any{"url": rcv.URL})
	upload(t, c, "a.txt", "a").Expect(t, http.StatusCreated)
	waitFor(t, "the first event", func() bool { return len(rcv.acked()) == 1 })
	var rotated api.Webhook
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/rotate-secret", nil, "Idempotency-Key", "rot-1").Expect(t, http.StatusOK).JSON(t, &rotated)
	if rotated.Secret == nil || *rotated.Secret == *hook.Secret {
		t.Fatalf("rotated: %+v", rotated)
	}
	var again api.Webhook // a replay to the same token shows the same new secret
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/rotate-secret", nil, "Idempotency-Key", "rot-1").Expect(t, http.StatusOK).JSON(t, &again)
	if again.Secret == nil || *again.Secret != *rotated.Secret {
		t.Fatalf("replayed rotation: %+v, want the secret %s", again, *rotated.Secret)
	}
	upload(t, c, "b.txt", "b").Expect(t, http.StatusCreated)
	waitFor(t, "the second event", func() bool { return len(rcv.acked()) == 2 })
	got := rcv.receipts()
	if err := verifySignature(t, *hook.Secret, got[0]); err != nil {
		t.Fatalf("before rotating: %v", err)
	}
	if err := verifySignature(t, *rotated.Secret, got[1]); err != nil {
		t.Fatalf("after rotating: %v", err)
	}
	if err := verifySignature(t, *hook.Secret, got[1]); err == nil {
		t.Fatal("the old secret still verifies a delivery made after the rotation")
	}
	if g := apitest.GetJSON[api.Webhook](t, c, "/v1/webhooks/"+hook.ID); g.Secret != nil {
		t.Fatalf("GET shows the secret: %+v", g)
	}
}

// TestWebhookReplay: replaying from a cursor delivers every event after
// it again, in order; start and now are cursors too.
func TestWebhookReplay(t *testing.T) {
	_, c := webhookServer(t, fastWebhooks)
	rcv := newReceiver(t)
	hook := createWebhook(t, c, map[string]any{"url": rcv.URL})
	for i := range 4 {
		upload(t, c, fmt.Sprintf("r/%d.txt", i), "x").Expect(t, http.StatusCreated)
	}
	waitFor(t, "four events", func() bool { return len(rcv.acked()) == 4 })
	page := apitest.GetJSON[api.EventList](t, c, "/v1/events?limit=1")
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/replay", map[string]any{"after": page.NextCursor}).Expect(t, http.StatusOK)
	want := eventIDs(t, c)
	waitFor(t, "three events again", func() bool { return len(rcv.acked()) == 7 })
	if got := rcv.acked(); !slices.Equal(got[4:], want[1:]) {
		t.Fatalf("replayed %v, want %v", got[4:], want[1:])
	}
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/replay", map[string]any{"after": "start"}).Expect(t, http.StatusOK)
	waitFor(t, "all four again", func() bool { return len(rcv.acked()) == 11 })
	if got := rcv.acked(); !slices.Equal(got[7:], want) {
		t.Fatalf("replayed from the start %v, want %v", got[7:], want)
	}
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/replay", map[string]any{"after": "bogus"}).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	send(c, "POST", "/v1/webhooks/"+hook.ID+"/replay", map[string]any{}).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// TestWebhookFilters: types, prefix and run_id choose what is delivered.
func TestWebhookFilters(t *testing.T) {
	_, c := webhookServer(t, fastWebhooks)
	rcv := newReceiver(t)
	createWebhook(t, c, map[string]any{"url": rcv.URL, "types": []string{"file.deleted"}, "prefix": "keep/", "run_id": "run-7"})
	a := upload(t, c, "keep/a.txt", "a", "X-Run-ID", "run-7").Expect(t, http.StatusCreated).File(t)
	b := upload(t, c, "other/b.txt", "b", "X-Run-ID", "run-7").Expect(t, http.StatusCreated).File(t)
	d := upload(t, c, "keep/d.txt", "d", "X-Run-ID", "run-8").Expect(t, http.StatusCreated).File(t)
	for _, id := range []string{b.ID, d.ID, a.ID} {
		c.Do("DELETE", "/v1/files/"+id, nil, "X-Run-ID", map[string]string{a.ID: "run-7", b.ID: "run-7", d.ID: "run-8"}[id]).Expect(t, http.StatusOK)
	}
	waitFor(t, "the one matching event", func() bool { return len(rcv.acked()) >= 1 })
	time.Sleep(300 * time.Millisecond) // room for a wrong second one to arrive
	got := rcv.receipts()
	var e api.Event
	if len(got) != 1 || json.Unmarshal(got[0].body, &e) != nil || e.Type != "file.deleted" || e.FileID != a.ID {
		t.Fatalf("delivered %d: %s", len(got), got[0].body)
	}
}

// TestWebhookGrant: a token scoped to P/ cannot make a webhook of Q/, and
// its webhook hears only of files inside P/, whoever writes them; it sees
// only the webhooks it made.
func TestWebhookGrant(t *testing.T) {
	srv, root := webhookServer(t, fastWebhooks)
	tok := mint(t, root, map[string]any{"scopes": []string{"read", "write"}, "prefixes": []string{"P"}, "expires_in": 3600})
	child := apitest.NewClient(t, srv.URL, *tok.Token)
	rcv := newReceiver(t)
	send(child, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "prefix": "Q/"}).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	mine := createWebhook(t, child, map[string]any{"url": rcv.URL})
	rootHook := createWebhook(t, root, map[string]any{"url": rcv.URL + "/root"})
	upload(t, root, "Q/out.txt", "outside").Expect(t, http.StatusCreated)
	in := upload(t, root, "P/in.txt", "inside").Expect(t, http.StatusCreated).File(t)
	waitFor(t, "the root's two and the child's one", func() bool { return len(rcv.acked()) == 3 })
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.receipts()); n != 3 {
		t.Fatalf("%d deliveries, want 3 (2 for the root's webhook, 1 for the child's)", n)
	}
	var childLog []api.WebhookDelivery
	waitFor(t, "the child's delivery in its log", func() bool {
		childLog = deliveries(t, child, mine.ID)
		return len(childLog) >= 1
	})
	if len(childLog) != 1 || childLog[0].EventID == "" {
		t.Fatalf("the child's webhook log: %+v", childLog)
	}
	events := apitest.GetJSON[api.EventList](t, child, "/v1/events")
	if len(events.Data) != 1 || events.Data[0].FileID != in.ID || childLog[0].EventID != events.Data[0].ID {
		t.Fatalf("the child's webhook delivered %s, want the event of P/in.txt (%+v)", childLog[0].EventID, events.Data)
	}
	list := apitest.GetJSON[api.WebhookList](t, child, "/v1/webhooks")
	if len(list.Data) != 1 || list.Data[0].ID != mine.ID {
		t.Fatalf("the child lists %+v, want only its own", list.Data)
	}
	child.Do("GET", "/v1/webhooks/"+rootHook.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	send(child, "DELETE", "/v1/webhooks/"+rootHook.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	if all := apitest.GetJSON[api.WebhookList](t, root, "/v1/webhooks"); len(all.Data) != 2 {
		t.Fatalf("the root lists %d webhooks, want 2", len(all.Data))
	}
	reader := srv.Client(t, "alice", "read")
	send(reader, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL}).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
	reader.Do("GET", "/v1/webhooks", nil).ExpectProblem(t, http.StatusForbidden, "FORBIDDEN")
}

// TestWebhookStopsWhenItsTokenIsRevoked: a webhook hands out what the
// token that made it may read, so revoking that token disables it (with
// the reason): nothing written after the revocation reaches the receiver.
func TestWebhookStopsWhenItsTokenIsRevoked(t *testing.T) {
	srv, root := webhookServer(t, fastWebhooks)
	tok := mint(t, root, map[string]any{"scopes": []string{"read", "write"}, "prefixes": []string{"P"}, "expires_in": 3600})
	child := apitest.NewClient(t, srv.URL, *tok.Token)
	rcv := newReceiver(t)
	hook := createWebhook(t, child, map[string]any{"url": rcv.URL})
	upload(t, root, "P/before.txt", "before").Expect(t, http.StatusCreated)
	waitFor(t, "the event written before the revocation", func() bool { return len(rcv.acked()) == 1 })
	root.Do("DELETE", "/v1/tokens/"+tok.ID, nil).Expect(t, http.StatusOK)
	upload(t, root, "P/after.txt", "after").Expect(t, http.StatusCreated)
	waitFor(t, "the webhook disabled", func() bool {
		return apitest.GetJSON[api.Webhook](t, root, "/v1/webhooks/"+hook.ID).Status == "disabled"
	})
	got := apitest.GetJSON[api.Webhook](t, root, "/v1/webhooks/"+hook.ID)
	if got.DisabledReason == nil || !strings.Contains(*got.DisabledReason, "revoked") {
		t.Fatalf("disabled webhook: %+v", got)
	}
	time.Sleep(300 * time.Millisecond) // what a live worker would have taken to send it
	if n := len(rcv.receipts()); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1 (nothing after the revocation)", n)
	}
}

// TestWebhookSecretKeptSealed: the row keeps the secret only sealed; a
// replay of the create to the same token shows it, GET never does, and a
// delete ends the webhook and its log.
func TestWebhookSecretKeptSealed(t *testing.T) {
	srv, c := webhookServer(t, fastWebhooks)
	rcv := newReceiver(t)
	var first, replay api.Webhook
	body := map[string]any{"url": rcv.URL, "description": "sealed"}
	send(c, "POST", "/v1/webhooks", body, "Idempotency-Key", "wh-1").Expect(t, http.StatusCreated).JSON(t, &first)
	res := send(c, "POST", "/v1/webhooks", body, "Idempotency-Key", "wh-1").Expect(t, http.StatusCreated)
	res.JSON(t, &replay)
	if res.Header.Get("Idempotent-Replayed") != "true" || replay.Secret == nil || *replay.Secret != *first.Secret || replay.ID != first.ID {
		t.Fatalf("replay %+v of %+v", replay, first)
	}
	var sealed []byte
	if err := srv.Store.Pool().QueryRow(t.Context(), `SELECT secret_sealed FROM webhooks WHERE id = $1`, first.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(*first.Secret, "whsec_"))
	if strings.Contains(string(sealed), *first.Secret) || strings.Contains(string(sealed), string(key)) {
		t.Fatal("the row holds the secret in the clear")
	}
	send(c, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "description": "other"}, "Idempotency-Key", "wh-1").
		ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	send(c, "DELETE", "/v1/webhooks/"+first.ID, nil).Expect(t, http.StatusOK)
	c.Do("GET", "/v1/webhooks/"+first.ID, nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	c.Do("GET", "/v1/webhooks/"+first.ID+"/deliveries", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
}

// TestWebhookBodies: what a webhook may be made or changed with.
func TestWebhookBodies(t *testing.T) {
	_, c := webhookServer(t, webhook.Config{}) // private receivers refused
	for _, tc := range []struct {
		name string
		body any
		code int
	}{
		{"no url", map[string]any{}, 422},
		{"http", map[string]any{"url": "http://example.com/hook"}, 422},
		{"loopback literal", map[string]any{"url": "https://127.0.0.1/hook"}, 422},
		{"private literal", map[string]any{"url": "https://10.1.2.3/hook"}, 422},
		{"ipv6 loopback", map[string]any{"url": "https://[::1]:8443/hook"}, 422},
		{"metadata address", map[string]any{"url": "https://169.254.169.254/latest"}, 422},
		{"localhost", map[string]any{"url": "https://localhost/hook"}, 422},
		{"user info", map[string]any{"url": "https://u:p@example.com/hook"}, 422},
		{"relative", map[string]any{"url": "/hook"}, 422},
		{"ftp", map[string]any{"url": "ftp://example.com/hook"}, 422},
		{"unknown type", map[string]any{"url": "https://example.com/hook", "types": []string{"file.exploded"}}, 422},
		{"bad run id", map[string]any{"url": "https://example.com/hook", "run_id": " x"}, 422},
		{"long description", map[string]any{"url": "https://example.com/hook", "description": strings.Repeat("d", 1025)}, 422},
		{"unknown member", map[string]any{"url": "https://example.com/hook", "color": "red"}, 422},
		{"not json", "{", 400},
		{"public https", map[string]any{"url": "https://example.com/hook", "types": []string{"file.created", "file.created"}}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := send(c, "POST", "/v1/webhooks", tc.body)
			if res.Status != tc.code {
				t.Fatalf("%d %s, want %d", res.Status, res.Body, tc.code)
			}
			if tc.code == 201 {
				var w api.Webhook
				res.JSON(t, &w)
				if !slices.Equal(w.Types, []string{"file.created"}) {
					t.Fatalf("types %v", w.Types)
				}
				send(c, "PATCH", "/v1/webhooks/"+w.ID, map[string]any{}).ExpectProblem(t, 422, "VALIDATION_FAILED")
				send(c, "PATCH", "/v1/webhooks/"+w.ID, map[string]any{"status": "paused"}).ExpectProblem(t, 422, "VALIDATION_FAILED")
				send(c, "PATCH", "/v1/webhooks/"+w.ID, map[string]any{"url": "https://10.0.0.1/"}).ExpectProblem(t, 422, "VALIDATION_FAILED")
				var p api.Webhook
				send(c, "PATCH", "/v1/webhooks/"+w.ID, map[string]any{"status": "disabled", "types": []string{}}).Expect(t, 200).JSON(t, &p)
				if p.Status != "disabled" || len(p.Types) != 0 {
					t.Fatalf("patched: %+v", p)
				}
			}
		})
	}
	c.Do("GET", "/v1/webhooks/wh_nope", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	c.Do("GET", "/v1/webhooks/wh_nope/deliveries?cursor=x", nil).ExpectProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
}
