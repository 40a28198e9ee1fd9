-- The resource subscriptions of the /mcp door's sessions (resources/subscribe
-- of MCP up to 2025-11-25): a session subscribes on one instance and hears
-- its notifications on the GET stream another instance holds, so what it
-- watches is kept here. A row names a file's path, a prefix ending in '/',
-- or '' (everything); after_pos is the subject's feed position when the
-- watch was made (only later events concern it). seen_at is renewed while a
-- stream of the session is open; the sweeper drops watches of sessions not
-- seen for AGENTFS_MCP_SUBSCRIPTION_TTL.
CREATE TABLE watches (
    subject    text        NOT NULL,
    session    text        NOT NULL,
    path       text        NOT NULL,
    after_pos  bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject, session, path)
);

CREATE INDEX watches_seen_at ON watches (seen_at);
