package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestWebhookSurvivesSIGKILL: the server delivering to a webhook is killed
// while the receiver holds one of its requests; two servers started after
// it continue the delivery from the webhook's cursor, in feed order, the
// event in flight sent again (at least once) and nothing lost, and never
// two requests to the receiver at once.
func TestWebhookSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin, cfg := buildBinary(t), storagetest.Config(t)
	env := []string{"AGENTFS_WEBHOOK_ALLOW_PRIVATE=true", "AGENTFS_WEBHOOK_RESCUE_AFTER=4s",
		"AGENTFS_WEBHOOK_TIMEOUT=1s", "AGENTFS_WEBHOOK_RETRY_SCHEDULE=100ms,200ms,400ms"}
	var (
		mu       sync.Mutex
		acked    []string
		inFlight atomic.Int32
		most     atomic.Int32
		held     = make(chan struct{})
		release  = make(chan struct{})
		requests atomic.Int32
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if requests.Add(1) == 5 { // the fifth request is held while its sender dies
			close(held)
			<-release
		}
		mu.Lock()
		acked = append(acked, r.Header.Get("webhook-id"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer rcv.Close()
	a := startServe(t, bin, cfg, env...)
	a.waitReady(t)
	out, err := runBinary(t, bin, cfg, "token", "create", "--subject", "agent")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	ca := apitest.NewClient(t, a.url, token)
	var hook api.Webhook
	ca.Do("POST", "/v1/webhooks", `{"url":"`+rcv.URL+`"}`, "Content-Type", "application/json").Expect(t, http.StatusCreated).JSON(t, &hook)
	for i := range 20 {
		ca.Do("POST", fmt.Sprintf("/v1/files?path=k/%02d.txt", i), "x").Expect(t, http.StatusCreated)
	}
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the fifth delivery never came")
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	close(release) // its answer goes to a dead connection: never recorded
	b := startServe(t, bin, cfg, env...)
	c := startServe(t, bin, cfg, env...)
	b.waitReady(t)
	c.waitReady(t)
	cb := apitest.NewClient(t, b.url, token)
	for i := 20; i < 30; i++ {
		apitest.NewClient(t, c.url, token).Do("POST", fmt.Sprintf("/v1/files?path=k/%02d.txt", i), "x").Expect(t, http.StatusCreated)
	}
	var want []string
	for _, e := range apitest.GetJSON[api.EventList](t, cb, "/v1/events?limit=100").Data {
		want = append(want, e.ID)
	}
	storagetest.Eventually(t, 3*time.Minute, "every event delivered after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(slices.Compact(slices.Clone(acked))) >= len(want)
	})
	mu.Lock()
	got := slices.Clone(acked)
	mu.Unlock()
	if dedup := slices.Compact(slices.Clone(got)); !slices.Equal(dedup, want) {
		t.Fatalf("delivered\n%v\nwant, in feed order\n%v", got, want)
	}
	if len(got) > len(want)+1 || got[4] != want[4] {
		t.Fatalf("delivered %d requests for %d events; only the one in flight at the kill may repeat: %v", len(got), len(want), got)
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("the receiver had %d requests at once", m)
	}
	final := apitest.GetJSON[api.Webhook](t, cb, "/v1/webhooks/"+hook.ID)
	if final.Status != "active" || final.FailedAttempts != 0 {
		t.Fatalf("after the restart: %+v", final)
	}
}
