-- One row per (subject, Idempotency-Key): a claim while the request runs,
-- then the recorded outcome. The effect and its completion commit together.
CREATE TABLE idempotency_keys (
    subject           text NOT NULL,
    key               text NOT NULL,
    request_hash      bytea NOT NULL,          -- everything but the content
    content_hash      bytea,                   -- SHA-256 of the content, set on completion
    method            text NOT NULL,
    route             text NOT NULL,
    status            text NOT NULL CHECK (status IN ('in_progress', 'completed')),
    fence             bigint NOT NULL,         -- bumped by every claim and takeover
    lease_expires_at  timestamptz,
    response_status   integer,
    response_headers  jsonb,
    response_body     bytea,
    resource_object   text,
    resource_id       text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz,
    expires_at        timestamptz,
    PRIMARY KEY (subject, key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at) WHERE status = 'completed';
CREATE INDEX idempotency_keys_abandoned ON idempotency_keys (lease_expires_at) WHERE status = 'in_progress';
