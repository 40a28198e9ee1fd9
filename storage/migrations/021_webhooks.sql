-- Webhooks (DESIGN §23). A webhook is a receiver of its subject's matching
-- events, delivered in feed order: cursor_pos is the position of the last
-- event the receiver acknowledged (2xx), advanced only then, so delivery
-- resumes after it whichever instance delivers and however often they
-- crash. The signing secret is kept sealed (AES-256-GCM under the record
-- key, bound to the webhook's id), never in the clear.
CREATE TABLE webhooks (
    id              text PRIMARY KEY,
    subject         text NOT NULL,
    url             text NOT NULL,
    types           text[] NOT NULL DEFAULT '{}',
    prefix          text NOT NULL DEFAULT '',
    run_id          text NOT NULL DEFAULT '',
    description     text NOT NULL DEFAULT '',
    secret_sealed   bytea NOT NULL,
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    reach           text[],          -- the maker's grant prefixes; NULL: every path
    token_id        text NOT NULL DEFAULT '',
    cursor_pos      bigint NOT NULL,
    cursor_at       timestamptz NOT NULL,
    attempts        int NOT NULL DEFAULT 0,  -- failed attempts at the event after the cursor
    failing_since   timestamptz,
    next_attempt_at timestamptz,
    disabled_reason text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_by_subject ON webhooks (subject, created_at, id);
CREATE INDEX webhooks_active ON webhooks (id) WHERE status = 'active';

-- The delivery log: one row per attempt, newest last.
CREATE TABLE webhook_deliveries (
    id          bigserial PRIMARY KEY,
    webhook_id  text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id    text NOT NULL,
    event_pos   bigint NOT NULL,
    attempt     int NOT NULL,
    status_code int NOT NULL DEFAULT 0,
    error       text NOT NULL DEFAULT '',
    latency_ms  int NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
