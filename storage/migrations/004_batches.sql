-- Batches: operations admitted together and run in order in the background.
CREATE TABLE batches (
    id            text PRIMARY KEY,
    subject       text NOT NULL,
    status        text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'partially_succeeded', 'failed')),
    agent_id      text,
    run_id        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    completed_at  timestamptz
);

-- One row per item. Content is kept here, not in the queue's job arguments.
CREATE TABLE batch_items (
    batch_id      text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    idx           integer NOT NULL,
    op            text NOT NULL,
    path          text NOT NULL DEFAULT '',
    file_id       text NOT NULL DEFAULT '',
    content       bytea,
    content_type  text NOT NULL DEFAULT '',
    replace       boolean NOT NULL DEFAULT false,
    item_key      text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    replayed      boolean NOT NULL DEFAULT false,
    result_id     text,
    error         bytea,
    PRIMARY KEY (batch_id, idx)
);
