-- Tokens: only the SHA-256 of a token is stored.
CREATE TABLE tokens (
    id          text PRIMARY KEY,
    subject     text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    scopes      text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Files: one row per file; its content is the immutable blob named by blob_key.
CREATE TABLE files (
    id             text PRIMARY KEY,
    subject        text NOT NULL,
    path           text NOT NULL,
    size_bytes     bigint NOT NULL CHECK (size_bytes >= 0),
    content_type   text NOT NULL,
    sha256         text NOT NULL,
    version        integer NOT NULL DEFAULT 1,
    blob_key       text NOT NULL,
    agent_id       text,
    run_id         text,
    last_agent_id  text,
    last_run_id    text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    purge_after    timestamptz,
    blocked        boolean NOT NULL DEFAULT false,
    block_reason   text NOT NULL DEFAULT ''
);

-- A path is unique among one subject's live files.
CREATE UNIQUE INDEX files_live_path ON files (subject, path) WHERE deleted_at IS NULL;
-- Listing: newest first, optionally by run, agent, exact path or prefix.
CREATE INDEX files_by_created ON files (subject, created_at DESC, id DESC);
CREATE INDEX files_by_run ON files (subject, run_id, created_at DESC, id DESC) WHERE run_id IS NOT NULL;
CREATE INDEX files_by_agent ON files (subject, agent_id, created_at DESC, id DESC) WHERE agent_id IS NOT NULL;
CREATE INDEX files_by_path ON files (subject, path text_pattern_ops);
CREATE INDEX files_blob_key ON files (blob_key);
CREATE INDEX files_purge ON files (purge_after) WHERE purge_after IS NOT NULL;
