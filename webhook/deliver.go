package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/jobqueue"
	"github.com/agentfs/agentfs/render"
	"github.com/agentfs/agentfs/storage"
)

// queue is the River queue of webhook jobs, apart from the batches'.
const queue = "agentfs_webhook"

// Args is the queued job of one webhook: only its id; its cursor and
// state stay in its row.
type Args struct {
	WebhookID string `json:"webhook_id"`
}

// Kind names the job kind in the queue.
func (Args) Kind() string { return "agentfs_webhook" }

// InsertOpts keeps one job per webhook in any state but finished (so a
// webhook made active again gets a new one), never discarded however
// often the store fails under it.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue, MaxAttempts: 1_000_000, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// maxBatch is how many events one look at the feed hands out.
const maxBatch = 100

// idleLook is how long a caught-up worker waits for events before it reads
// its webhook's row again (a replay, a patch, a delete).
const idleLook = 2 * time.Second

// Deliverer runs the webhooks' jobs on this instance, and queues them
// (admission.Deliveries).
type Deliverer struct {
	store  *storage.Store
	keys   *idempotency.RecordKeys
	cfg    Config
	http   *http.Client
	client *river.Client[pgx.Tx]
	now    func() time.Time
}

// New returns a deliverer on store; keys open the webhooks' sealed
// secrets. Start runs it.
func New(store *storage.Store, keys *idempotency.RecordKeys, cfg Config) (*Deliverer, error) {
	if store == nil || keys == nil || cfg.Log == nil {
		return nil, errors.New("webhook: store, record keys and Log are required")
	}
	cfg = cfg.withDefaults()
	d := &Deliverer{store: store, keys: keys, cfg: cfg, http: NewHTTPClient(cfg.Timeout, cfg.AllowPrivate), now: time.Now}
	client, err := jobqueue.New(store.QueuePool(), jobqueue.Config{Name: "webhook", Queue: queue, Workers: cfg.Workers,
		Own:        func(w *river.Workers) error { return river.AddWorkerSafely(w, &worker{d: d}) },
		Others:     cfg.OtherKinds,
		JobTimeout: cfg.jobTimeout(), RescueAfter: cfg.RescueAfter, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	d.client = client
	return d, nil
}

// AddKind registers the webhook job kind with another River client's
// workers, for its maintenance only (it never fetches the webhooks'
// queue): a webhook whose instance died is then rescued whichever client
// leads.
func AddKind(workers *river.Workers) error { return river.AddWorkerSafely(workers, &worker{}) }

// Start runs the workers until Stop, and, at once and every RescueAfter,
// queues a job for each active webhook that has none (one lost to an
// operator's cleanup of the queue, or discarded by a River client that did
// not know its kind): a webhook is never left without its job.
func (d *Deliverer) Start(ctx context.Context) error {
	if err := d.client.Start(ctx); err != nil {
		return err
	}
	d.ensureJobs(ctx)
	go func() {
		t := time.NewTicker(d.cfg.RescueAfter)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.client.Stopped():
				return
			case <-t.C:
				d.ensureJobs(ctx)
			}
		}
	}()
	return nil
}

// ensureJobs wakes every active webhook (Wake: a job queued where none is).
func (d *Deliverer) ensureJobs(ctx context.Context) {
	ids, err := d.store.ActiveWebhooks(ctx)
	if err != nil {
		d.cfg.Log.Warn("webhooks: list active", "err", err)
		return
	}
	for _, id := range ids {
		d.Wake(ctx, id)
	}
}

// Stop lets running attempts end and stops the workers.
func (d *Deliverer) Stop(ctx context.Context) error { return d.client.Stop(ctx) }

// Enqueue queues the webhook's job in tx, unless it has one.
func (d *Deliverer) Enqueue(ctx context.Context, tx pgx.Tx, webhookID string) error {
	if _, err := d.client.InsertTx(ctx, tx, Args{WebhookID: webhookID}, nil); err != nil {
		return storage.Translate(fmt.Errorf("queue webhook: %w", err))
	}
	return nil
}

// Wake makes the webhook's job run now: queued if it has none, moved
// forward if it waits for a retry. A running job reads its row again
// within idleLook.
func (d *Deliverer) Wake(ctx context.Context, webhookID string) {
	res, err := d.client.Insert(ctx, Args{WebhookID: webhookID}, nil)
	if err != nil {
		d.cfg.Log.Warn("webhooks: wake", "webhook_id", webhookID, "err", err)
		return
	}
	if res.UniqueSkippedAsDuplicate && res.Job.State == rivertype.JobStateScheduled {
		if _, err := d.client.JobRetry(ctx, res.Job.ID); err != nil {
			d.cfg.Log.Warn("webhooks: wake", "webhook_id", webhookID, "err", err)
		}
	}
}

// worker runs webhook jobs.
type worker struct {
	river.WorkerDefaults[Args]
	d *Deliverer
}

// NextRetry backs off a job that met a failure of the store: a second,
// doubling to 30 s.
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(min(30*time.Second, time.Second<<min(job.Attempt, 5)))
}

// Work delivers the webhook's events for one slice, then hands the job
// back to the queue (JobSnooze(0): available at once, to any instance),
// or snoozes it until its next retry is due; a webhook deleted or
// disabled ends its job.
func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	d := w.d
	end := d.now().Add(d.cfg.slice())
	for d.now().Before(end) {
		hook, _, err := d.store.DeliveryState(ctx, job.Args.WebhookID)
		if errors.Is(err, agentfs.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if hook.Status != agentfs.WebhookActive {
			return nil
		}
		if due := hook.NextAttemptAt; due != nil && due.After(d.now()) {
			if wait := due.Sub(d.now()); d.now().Add(wait).After(end) {
				return river.JobSnooze(wait)
			} else if err := sleep(ctx, wait); err != nil {
				return river.JobSnooze(0)
			}
			continue
		}
		if err := d.round(ctx, hook, end); err != nil {
			if ctx.Err() != nil {
				return river.JobSnooze(0)
			}
			return err
		}
	}
	return river.JobSnooze(0)
}

// round looks at the feed after the webhook's cursor (waiting up to
// idleLook for events) and delivers what it finds, in order, until an
// attempt fails.
func (d *Deliverer) round(ctx context.Context, hook *agentfs.Webhook, end time.Time) error {
	events, err := d.next(ctx, hook, min(idleLook, time.Until(end)))
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	// Read again what the wait may have outlived: a rotated secret, a new
	// URL, a replay or a disable.
	now, sealed, err := d.store.DeliveryState(ctx, hook.ID)
	if err != nil || now.Status != agentfs.WebhookActive || now.Cursor.Position != hook.Cursor.Position {
		return ignoreGone(err)
	}
	hook = now
	secret, err := d.keys.Open(sealed, agentfs.WebhookSecretAAD(hook.ID))
	if err != nil {
		return fmt.Errorf("webhook %s: open its secret: %w", hook.ID, err)
	}
	for _, e := range events {
		ok, err := d.attempt(ctx, hook, string(secret), e)
		if err != nil || !ok {
			return err
		}
		hook.Cursor.Position, hook.Attempts = e.Position, 0
		if !d.now().Before(end) {
			return nil
		}
	}
	return nil
}

// next is the webhook's next events: after its cursor, matching its
// filters, inside the reach of the token that made it.
func (d *Deliverer) next(ctx context.Context, hook *agentfs.Webhook, wait time.Duration) ([]*agentfs.Event, error) {
	// The cursor's time only guards a client's cursor against the
	// retention; the webhook's own cursor is always current.
	after := agentfs.EventCursor{Subject: hook.Subject, Position: hook.Cursor.Position, At: d.now().UTC()}
	filter := agentfs.EventFilter{After: &after, RunID: hook.RunID, Prefix: hook.Prefix, Types: hook.Types, Limit: maxBatch}
	reach := storage.Within(ctx, hook.Reach, hook.TokenID)
	events, _, err := d.store.AwaitEvents(reach, hook.Subject, filter, wait)
	if errors.Is(err, agentfs.ErrTooManyWaiters) {
		events, _, err = d.store.ListEvents(reach, hook.Subject, filter)
		if err == nil && len(events) == 0 {
			err = sleep(ctx, wait)
		}
	}
	return events, err
}

// attempt POSTs one event and records the attempt with its outcome; ok
// says the receiver took it and the cursor moved past it.
func (d *Deliverer) attempt(ctx context.Context, hook *agentfs.Webhook, secret string, e *agentfs.Event) (ok bool, err error) {
	body, err := json.Marshal(render.Event(e))
	if err != nil {
		return false, err
	}
	at := d.now()
	sig, err := Sign(secret, e.ID, at, body)
	if err != nil {
		return false, fmt.Errorf("webhook %s: %w", hook.ID, err)
	}
	code, failure := d.post(ctx, hook.URL, e.ID, at, sig, body)
	if ctx.Err() != nil {
		return false, ctx.Err() // cut off by the job's end: not the receiver's failure
	}
	a := storage.WebhookAttempt{From: hook.Cursor.Position, EventAt: e.At,
		Delivery: agentfs.WebhookDelivery{WebhookID: hook.ID, EventID: e.ID, EventPosition: e.Position,
			Attempt: hook.Attempts + 1, StatusCode: code, Error: failure, Latency: d.now().Sub(at)}}
	switch {
	case a.Delivery.Succeeded():
	case code == http.StatusGone:
		a.Disable = "the receiver answered 410 Gone"
	case hook.Attempts >= len(d.cfg.Retries):
		a.Disable = fmt.Sprintf("no 2xx after %d attempts over %s (%s)", hook.Attempts+1,
			d.now().Sub(firstFailure(hook, at)).Round(time.Second), failure)
	default:
		a.Retry = d.now().Add(d.cfg.Retries[hook.Attempts])
	}
	err = d.store.RecordWebhookAttempt(ctx, a)
	if errors.Is(err, storage.ErrCursorMoved) {
		return false, nil
	}
	return err == nil && a.Delivery.Succeeded(), err
}

// ignoreGone is err, except that a webhook deleted meanwhile is no error:
// the job's next look ends it.
func ignoreGone(err error) error {
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil
	}
	return err
}

func firstFailure(hook *agentfs.Webhook, at time.Time) time.Time {
	if hook.FailingSince != nil {
		return *hook.FailingSince
	}
	return at
}

// maxAnswer is how much of a receiver's answer is read (and dropped), so
// its connection can be kept.
const maxAnswer = 64 << 10

// post makes one attempt: the receiver's status, or 0 and why none came;
// a status other than 2xx is described too.
func (d *Deliverer) post(ctx context.Context, url, id string, at time.Time, sig string, body []byte) (code int, failure string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "the URL cannot be called: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "AgentFS-Webhooks/1")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	res, err := d.http.Do(req)
	if err != nil {
		return 0, describe(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxAnswer))
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return res.StatusCode, ""
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return res.StatusCode, "HTTP " + strconv.Itoa(res.StatusCode) + ": redirects are not followed"
	}
	return res.StatusCode, "HTTP " + strconv.Itoa(res.StatusCode)
}

// describe says why an attempt got no answer, in a line.
func describe(err error) string {
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, ErrRefusedAddress):
		return "refused: the receiver's address is not public (AGENTFS_WEBHOOK_ALLOW_PRIVATE)"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timed out"
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
