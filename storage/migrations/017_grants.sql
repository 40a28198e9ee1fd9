-- Grants (least privilege): a token carries what it may do beyond its
-- scopes, and a delegated token names its parent. Tokens made before keep
-- exactly what they could do: no prefixes (every path), no pins, no expiry,
-- no byte budget, no parent.
ALTER TABLE tokens
    ADD COLUMN name       text NOT NULL DEFAULT '',
    ADD COLUMN parent_id  text REFERENCES tokens (id),
    -- The ids of every ancestor, the root first: a token authenticates only
    -- while none of them is revoked, and revoking one revokes every token
    -- whose lineage names it.
    ADD COLUMN lineage    text[] NOT NULL DEFAULT '{}',
    -- Folders, each ending in '/'; NULL: every path.
    ADD COLUMN prefixes   text[],
    ADD COLUMN run_id     text,
    ADD COLUMN agent_id   text,
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN max_bytes  bigint CHECK (max_bytes > 0);

CREATE INDEX tokens_lineage ON tokens USING gin (lineage);
CREATE INDEX tokens_parent ON tokens (parent_id) WHERE parent_id IS NOT NULL;

-- The bytes a token with a max_bytes has written (reserved before they are
-- read, as the byte quota is), in rows of their own: spending must not
-- touch the tokens row, whose every change makes each instance's token
-- cache forget the token (migration 013).
CREATE TABLE token_spend (
    token_id  text PRIMARY KEY REFERENCES tokens (id) ON DELETE CASCADE,
    bytes     bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);

-- Which token claimed a key: a token with prefixes sees only the records
-- it and its descendants made (GET /v1/operations), whose answers may name
-- files outside its folders.
ALTER TABLE idempotency_keys ADD COLUMN token_id text;

-- The grant a batch was admitted with: each item is held to the creator's
-- prefixes when it runs, and a token with prefixes sees only the batches it
-- and its descendants made. NULL prefixes: every path.
ALTER TABLE batches
    ADD COLUMN token_id text,
    ADD COLUMN prefixes text[],
    -- The creator's max_bytes (NULL: none): its items' bytes are reserved
    -- against the creator's budget as they run.
    ADD COLUMN max_bytes bigint;
