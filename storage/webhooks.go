package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// webhookColumns are a webhook row as scanWebhook reads it.
const webhookColumns = `id, subject, url, types, prefix, run_id, description, status, reach, token_id,
	cursor_pos, cursor_at, attempts, failing_since, next_attempt_at, disabled_reason, created_at, updated_at`

func scanWebhook(row pgx.Row, more ...any) (*agentfs.Webhook, error) {
	var w agentfs.Webhook
	dest := []any{&w.ID, &w.Subject, &w.URL, &w.Types, &w.Prefix, &w.RunID, &w.Description, &w.Status, &w.Reach,
		&w.TokenID, &w.Cursor.Position, &w.Cursor.At, &w.Attempts, &w.FailingSince, &w.NextAttemptAt,
		&w.DisabledReason, &w.CreatedAt, &w.UpdatedAt}
	if err := row.Scan(append(dest, more...)...); err != nil {
		return nil, Translate(err)
	}
	w.Cursor.Subject = w.Subject
	if w.Types == nil {
		w.Types = []string{}
	}
	return &w, nil
}

// scanWebhookRow is scanWebhook of exactly a webhook row.
func scanWebhookRow(row pgx.Row) (*agentfs.Webhook, error) { return scanWebhook(row) }

// CreateWebhookTx stores w in tx with its sealed secret: active, its
// cursor at the current end of the subject's feed, so its receiver hears
// of what commits from then on.
func (s *Store) CreateWebhookTx(ctx context.Context, tx pgx.Tx, w *agentfs.Webhook, sealed []byte) (*agentfs.Webhook, error) {
	var reach []string // NULL: every path
	if len(w.Reach) > 0 {
		reach = w.Reach
	}
	types := w.Types
	if types == nil {
		types = []string{}
	}
	args := pgx.NamedArgs{"id": w.ID, "subject": w.Subject, "url": w.URL, "types": types, "prefix": w.Prefix,
		"run_id": w.RunID, "description": w.Description, "sealed": sealed, "reach": reach, "token_id": w.TokenID}
	return scanOne("create webhook", scanWebhookRow, tx.QueryRow(ctx, `INSERT INTO webhooks (id, subject, url, types, prefix, run_id, description,
			secret_sealed, reach, token_id, cursor_pos, cursor_at)
		VALUES (@id, @subject, @url, @types, @prefix, @run_id, @description, @sealed, @reach, @token_id,
			coalesce((SELECT n FROM event_counters WHERE subject = @subject), 0), now())
		RETURNING `+webhookColumns, args))
}

// ListWebhooks returns a page of the subject's webhooks that ctx's reach
// made, oldest first.
func (s *Store) ListWebhooks(ctx context.Context, subject string, filter agentfs.WebhookFilter) ([]*agentfs.Webhook, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visibleMade(ctx, "token_id", w.args))
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) > (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE `+w.where()+
		` ORDER BY created_at, id LIMIT @limit`, w.args)
	return collect(rows, err, "list webhooks", rowOf(scanWebhookRow))
}

// Webhook returns the subject's webhook id, if ctx's reach made it.
func (s *Store) Webhook(ctx context.Context, subject, id string) (*agentfs.Webhook, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	return scanOne("get webhook", scanWebhookRow, s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE id = @id AND subject = @subject AND `+visibleMade(ctx, "token_id", args), args))
}

// webhookChange is what an update sets: SQL assignments and their
// arguments.
type webhookChange struct {
	sets string
	args pgx.NamedArgs
}

// resumed forgets a webhook's failures: what setting it active again, or a
// replay, starts from.
const resumed = `status = 'active', attempts = 0, failing_since = NULL, next_attempt_at = NULL, disabled_reason = ''`

// changeWebhook applies ch to the subject's webhook id in tx, if ctx's
// reach made it, and returns it changed.
func (s *Store) changeWebhook(ctx context.Context, tx pgx.Tx, subject, id string, ch webhookChange) (*agentfs.Webhook, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := ch.args
	if args == nil {
		args = pgx.NamedArgs{}
	}
	args["id"], args["subject"] = id, subject
	return scanWebhook(tx.QueryRow(ctx, `UPDATE webhooks SET `+ch.sets+`, updated_at = now()
		WHERE id = @id AND subject = @subject AND `+visibleMade(ctx, "token_id", args)+` RETURNING `+webhookColumns, args))
}

// UpdateWebhookTx changes the subject's webhook id in tx as p says. A
// status set to active forgets the failures (delivery resumes after the
// cursor at once); set to disabled, delivery stops.
func (s *Store) UpdateWebhookTx(ctx context.Context, tx pgx.Tx, subject, id string, p agentfs.WebhookPatch) (*agentfs.Webhook, error) {
	ch := webhookChange{sets: "id = id", args: pgx.NamedArgs{}}
	if p.URL != nil {
		ch.sets += ", url = @url"
		ch.args["url"] = *p.URL
	}
	if p.Types != nil {
		ch.sets += ", types = @types"
		ch.args["types"] = append([]string{}, (*p.Types)...)
	}
	if p.Status != nil {
		switch *p.Status {
		case agentfs.WebhookActive:
			ch.sets += ", " + resumed
		case agentfs.WebhookDisabled:
			ch.sets += ", status = 'disabled', disabled_reason = 'disabled by a request'"
		}
	}
	w, err := s.changeWebhook(ctx, tx, subject, id, ch)
	if err != nil {
		return nil, fmt.Errorf("update webhook: %w", err)
	}
	return w, nil
}

// RotateWebhookSecretTx replaces the webhook's sealed secret in tx; the
// next attempt is signed with the new one.
func (s *Store) RotateWebhookSecretTx(ctx context.Context, tx pgx.Tx, subject, id string, sealed []byte) (*agentfs.Webhook, error) {
	w, err := s.changeWebhook(ctx, tx, subject, id, webhookChange{sets: "secret_sealed = @sealed", args: pgx.NamedArgs{"sealed": sealed}})
	if err != nil {
		return nil, fmt.Errorf("rotate webhook secret: %w", err)
	}
	return w, nil
}

// ReplayWebhookTx moves the webhook's cursor to after (back or forth) in
// tx and makes it active: its receiver gets every matching event after
// that cursor again, in order.
func (s *Store) ReplayWebhookTx(ctx context.Context, tx pgx.Tx, subject, id string, after agentfs.EventCursor) (*agentfs.Webhook, error) {
	w, err := s.changeWebhook(ctx, tx, subject, id, webhookChange{sets: "cursor_pos = @pos, cursor_at = @at, " + resumed,
		args: pgx.NamedArgs{"pos": after.Position, "at": after.At}})
	if err != nil {
		return nil, fmt.Errorf("replay webhook: %w", err)
	}
	return w, nil
}

// DeleteWebhookTx removes the subject's webhook id and its delivery log in
// tx; its delivery stops.
func (s *Store) DeleteWebhookTx(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.Webhook, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	return scanOne("delete webhook", scanWebhookRow, tx.QueryRow(ctx, `DELETE FROM webhooks WHERE id = @id AND subject = @subject AND `+
		visibleMade(ctx, "token_id", args)+` RETURNING `+webhookColumns, args))
}

// WebhookDeliveries returns up to limit attempts of the subject's webhook
// id, newest first, before the attempt numbered before (0: the newest).
func (s *Store) WebhookDeliveries(ctx context.Context, subject, id string, before int64, limit int) ([]*agentfs.WebhookDelivery, error) {
	if _, err := s.Webhook(ctx, subject, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, webhook_id, event_id, event_pos, attempt, status_code, error, latency_ms, at
		FROM webhook_deliveries WHERE webhook_id = @id AND (@before = 0 OR id < @before) ORDER BY id DESC LIMIT @limit`,
		pgx.NamedArgs{"id": id, "before": before, "limit": limit})
	if err != nil {
		return nil, Translate(fmt.Errorf("list webhook deliveries: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.WebhookDelivery, error) {
		var d agentfs.WebhookDelivery
		var ms int
		err := r.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.EventPosition, &d.Attempt, &d.StatusCode, &d.Error, &ms, &d.At)
		d.Latency = time.Duration(ms) * time.Millisecond
		return &d, err
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("list webhook deliveries: %w", err))
	}
	return out, nil
}

// DeliveryState is a webhook as its delivery worker reads it, by id alone,
// with its sealed secret; agentfs.ErrNotFound once it is deleted.
func (s *Store) DeliveryState(ctx context.Context, id string) (*agentfs.Webhook, []byte, error) {
	if err := s.disableOrphaned(ctx, id); err != nil {
		return nil, nil, err
	}
	var sealed []byte
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+`, secret_sealed FROM webhooks WHERE id = $1`, id), &sealed)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook delivery state: %w", err)
	}
	return w, sealed, nil
}

// disableOrphaned disables the active webhook id if the token that made it
// no longer authenticates (revoked, expired, or an ancestor revoked): a
// webhook hands out what its maker may read, so it ends with the maker's
// token. A webhook made without a token (an empty token_id) is kept.
func (s *Store) disableOrphaned(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE webhooks SET status = 'disabled', next_attempt_at = NULL, updated_at = now(),
			disabled_reason = 'the token that made it was revoked or expired: make the webhook again with a token that stands'
		WHERE id = $1 AND status = 'active' AND token_id <> ''
		  AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.id = webhooks.token_id AND `+tokenStands+`)`, id)
	if err != nil {
		return Translate(fmt.Errorf("webhook delivery state: %w", err))
	}
	return nil
}

// ActiveWebhooks lists the ids of every active webhook, for the delivery
// worker's look at start-up that each has its job.
func (s *Store) ActiveWebhooks(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM webhooks WHERE status = 'active' ORDER BY id`)
	if err != nil {
		return nil, Translate(fmt.Errorf("active webhooks: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, Translate(err)
}

// WebhookAttempt is the outcome of one attempt to deliver one event: the
// log row, and what it does to the webhook.
type WebhookAttempt struct {
	Delivery agentfs.WebhookDelivery
	// From is the cursor position the attempt was made after; the
	// webhook changes only if its cursor is still there (a replay that
	// moved it meanwhile wins).
	From    int64
	EventAt time.Time
	// Retry, after a failure, is when the next attempt is due.
	Retry time.Time
	// Disable, when set, disables the webhook with this reason (a 410, or
	// the retry schedule spent).
	Disable string
}

// ErrCursorMoved says a webhook's cursor moved (a replay) or the webhook
// went away while an attempt was made: the attempt is logged, and the
// worker reads the webhook again.
var ErrCursorMoved = errors.New("the webhook's cursor moved while the attempt was made")

// RecordWebhookAttempt logs an attempt and applies its outcome in one
// transaction: a 2xx moves the cursor past the event and forgets the
// failures; a failure counts and schedules the next attempt, or disables
// the webhook.
func (s *Store) RecordWebhookAttempt(ctx context.Context, a WebhookAttempt) error {
	d := a.Delivery
	args := pgx.NamedArgs{"id": d.WebhookID, "from": a.From, "pos": d.EventPosition, "at": a.EventAt,
		"retry": a.Retry, "reason": a.Disable}
	var sets string
	switch {
	case d.Succeeded():
		sets = "cursor_pos = @pos, cursor_at = @at, attempts = 0, failing_since = NULL, next_attempt_at = NULL"
	case a.Disable != "":
		sets = "status = 'disabled', disabled_reason = @reason, attempts = attempts + 1, next_attempt_at = NULL"
	default:
		sets = "attempts = attempts + 1, failing_since = coalesce(failing_since, now()), next_attempt_at = @retry"
	}
	moved := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE webhooks SET `+sets+`, updated_at = now()
			WHERE id = @id AND cursor_pos = @from AND status = 'active'`, args)
		if err != nil {
			return Translate(fmt.Errorf("record webhook attempt: %w", err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_id, event_pos, attempt, status_code, error, latency_ms)
			SELECT @id, @event, @pos, @attempt, @code, @error, @ms WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = @id)`,
			pgx.NamedArgs{"id": d.WebhookID, "event": d.EventID, "pos": d.EventPosition, "attempt": d.Attempt,
				"code": d.StatusCode, "error": d.Error, "ms": d.Latency.Milliseconds()}); err != nil {
			return Translate(fmt.Errorf("record webhook attempt: %w", err))
		}
		moved = tag.RowsAffected() == 0
		return nil
	})
	if err == nil && moved {
		return ErrCursorMoved
	}
	return err
}
