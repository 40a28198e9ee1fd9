package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// webhookBudget is DESIGN §11's bound on the p50 from an event's commit
// to its webhook's receiver.
const webhookBudget = 100 * time.Millisecond

// webhookReceiver notes when each event's first delivery arrives.
type webhookReceiver struct {
	mu      sync.Mutex
	arrived map[string]time.Time // by file id
	wake    chan struct{}
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	var e struct {
		FileID string `json:"file_id"`
	}
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if json.Unmarshal(body, &e) == nil && e.FileID != "" {
		r.mu.Lock()
		if _, seen := r.arrived[e.FileID]; !seen {
			r.arrived[e.FileID] = at
		}
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *webhookReceiver) await(ctx context.Context, fileID string) (time.Time, error) {
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		at, ok := r.arrived[fileID]
		r.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		case <-deadline:
			return time.Time{}, fmt.Errorf("webhook delivery: the event of file %s never came", fileID)
		case <-r.wake:
		}
	}
}

// webhooks: a webhook of this run's folder, its receiver on loopback in
// this program; -events uploads of 4 KiB one after another, each waited
// for at the receiver; the time from each upload's commit to its
// delivery's arrival. The server must allow receivers on loopback
// (AGENTFS_WEBHOOK_ALLOW_PRIVATE=true, which scripts/bench.sh sets).
func (b *bench) webhooks(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("webhook delivery, commit → receiver, %d events", c.events)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rcv := &webhookReceiver{arrived: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	hs := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	var hook struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"url":"http://%s/hook","prefix":%q}`, ln.Addr(), b.path("webhooks/"))
	hdr := http.Header{"Content-Type": {"application/json"}}
	_, err = b.api.call(ctx, http.MethodPost, "/v1/webhooks", strings.NewReader(body), int64(len(body)), hdr, &hook, http.StatusCreated)
	var se *statusError
	if errors.As(err, &se) && (se.status == http.StatusNotFound || se.status == http.StatusUnprocessableEntity) {
		return []row{{name: name, agentfs: fmt.Sprintf("skipped: POST /v1/webhooks answered %d (a server without webhooks, or one refusing loopback receivers: AGENTFS_WEBHOOK_ALLOW_PRIVATE=true)", se.status), budget: "p50 ≤ 100 ms"}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		_, _ = b.api.call(context.WithoutCancel(ctx), http.MethodDelete, "/v1/webhooks/"+hook.ID, nil, 0, nil, nil, http.StatusOK)
	}()
	return b.timeWebhook(ctx, name, rcv)
}

// timeWebhook makes the uploads and reads the times of the webhooks row.
func (b *bench) timeWebhook(ctx context.Context, name string, rcv *webhookReceiver) ([]row, error) {
	data := b.data.bytes(0, 4096)
	eventOf := map[string]string{} // file id → event id
	arrived := map[string]time.Time{}
	var answered []time.Duration
	for i := range b.cfg.events {
		f, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("webhooks/%d", i)), bytesReader(data), int64(len(data)), nil)
		if err != nil {
			return nil, err
		}
		done := time.Now()
		at, err := rcv.await(ctx, f.ID)
		if err != nil {
			return nil, err
		}
		arrived[f.ID] = at
		answered = append(answered, max(0, at.Sub(done)))
		eventOf[f.ID] = ""
	}
	page, err := b.api.events(ctx, "limit=1000&prefix="+b.path("webhooks/"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range page.Data {
		if _, ok := eventOf[e.FileID]; ok {
			eventOf[e.FileID] = e.ID
			ids = append(ids, e.ID)
		}
	}
	commits, source, err := b.commitTimes(ctx, ids)
	if err != nil {
		return nil, err
	}
	var fromCommit []time.Duration
	for fileID, at := range arrived {
		if t, ok := commits[eventOf[fileID]]; ok && len(commits) == len(arrived) {
			fromCommit = append(fromCommit, at.Sub(t))
		}
	}
	lat, what, verdict := fromCommit, "commit → receiver", "meets"
	if len(fromCommit) == 0 {
		lat, what = answered, "writer's answer → receiver (a lower bound: "+source+")"
	}
	p50, p90 := percentile(lat, 50), percentile(lat, 90)
	if p50 > webhookBudget {
		verdict = "misses"
	}
	if len(fromCommit) == 0 {
		verdict += " (lower bound)"
	}
	logf("  %d webhook deliveries: %s p50 %s, p90 %s", len(lat), what, fmtMS(p50), fmtMS(p90))
	b.notes = append(b.notes, fmt.Sprintf("webhook delivery: %s over %d uploads of 4 KiB, one at a time, each waited for at a receiver on loopback; p50 %s, p90 %s, max %s.",
		what, len(lat), fmtMS(p50), fmtMS(p90), fmtMS(percentile(lat, 100))))
	return []row{{name: name, agentfs: fmt.Sprintf("p50 %s, p90 %s", fmtMS(p50), fmtMS(p90)), budget: "p50 ≤ 100 ms", verdict: verdict}}, nil
}
