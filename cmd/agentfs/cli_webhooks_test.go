package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/webhook"
)

// TestCLIWebhooks: webhook create (its secret printed once), ls,
// deliveries, replay, rotate and rm, against a receiver.
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Webhook: webhook.Config{AllowPrivate: true, Retries: webhook.Schedule{50 * time.Millisecond}}})
	var got atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	env := newCLIEnv(t, srv, "cli-webhooks")
	stdout, stderr, err := env.run("webhook", "create", rcv.URL, "--type", "file.created,file.replaced", "--prefix", "w/")
	var w client.Webhook
	if err != nil || json.Unmarshal([]byte(stdout), &w) != nil || w.Secret == nil || len(w.Types) != 2 || w.Prefix != "w/" {
		t.Fatalf("webhook create: %q %v\n%s", stdout, err, stderr)
	}
	env.expectFailure(t, "VALIDATION_FAILED", "webhook", "create", rcv.URL, "--type", "file.sneezed")
	env.file(t, "put", writeLocal(t, "a.txt", "alpha\n"), "w/a.txt")
	storagetest.Eventually(t, 30*time.Second, "the delivery", func() bool { return got.Load() == 1 })
	var list []client.Webhook
	if stdout, _, err := env.run("webhook", "ls"); err != nil || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 1 || list[0].Secret != nil {
		t.Fatalf("webhook ls: %q %v", stdout, err)
	}
	var log []client.WebhookDelivery
	storagetest.Eventually(t, 30*time.Second, "the delivery logged", func() bool {
		stdout, _, err := env.run("webhook", "deliveries", w.ID)
		return err == nil && json.Unmarshal([]byte(stdout), &log) == nil && len(log) == 1
	})
	if log[0].Status != "succeeded" || log[0].StatusCode == nil || *log[0].StatusCode != 204 {
		t.Fatalf("deliveries: %+v", log)
	}
	if _, stderr, err := env.run("webhook", "replay", w.ID, "--after", "start"); err != nil {
		t.Fatalf("webhook replay: %v\n%s", err, stderr)
	}
	storagetest.Eventually(t, 30*time.Second, "the replayed delivery", func() bool { return got.Load() == 2 })
	var rotated client.Webhook
	if stdout, _, err := env.run("webhook", "rotate", w.ID); err != nil || json.Unmarshal([]byte(stdout), &rotated) != nil ||
		rotated.Secret == nil || *rotated.Secret == *w.Secret {
		t.Fatalf("webhook rotate: %q %v", stdout, err)
	}
	if _, _, err := env.run("webhook", "rm", w.ID); err != nil {
		t.Fatal(err)
	}
	env.expectFailure(t, "NOT_FOUND", "webhook", "deliveries", w.ID)
	if _, stderr, err := env.run("webhook", "replay", w.ID); err == nil || !strings.Contains(stderr, "--after") {
		t.Fatalf("replay without --after: %v %s", err, stderr)
	}
}
