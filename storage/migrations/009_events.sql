-- agentfs_id makes a resource id as the server does (a prefix, '_', then
-- 26 characters of the base32 alphabet holding 128 random bits), for rows
-- written many at a time by one statement.
CREATE FUNCTION agentfs_id(prefix text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    b bytea := uuid_send(gen_random_uuid());
    alphabet text := '0123456789abcdefghjkmnpqrstvwxyz';
    out text := '';
    acc integer := 0;
    bits integer := 0;
BEGIN
    FOR i IN 0..15 LOOP
        acc := (acc << 8) | get_byte(b, i);
        bits := bits + 8;
        WHILE bits >= 5 LOOP
            bits := bits - 5;
            out := out || substr(alphabet, ((acc >> bits) & 31) + 1, 1);
        END LOOP;
        acc := acc & ((1 << bits) - 1);
    END LOOP;
    RETURN prefix || '_' || out || substr(alphabet, ((acc << (5 - bits)) & 31) + 1, 1);
END $$;

-- The run ledger: one event per effect on a file, written in the effect's
-- transaction. xid is the writing transaction's id (xid8, never wraps):
-- readers hand out only events of transactions older than every one still
-- running (pg_snapshot_xmin), so a follower of the feed never skips an
-- event that commits late and never sees one twice. See docs/architecture.md.
CREATE TABLE events (
    xid              xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq              bigserial,
    id               text NOT NULL DEFAULT agentfs_id('evt'),
    subject          text NOT NULL,
    type             text NOT NULL,
    file_id          text NOT NULL,
    path             text NOT NULL,
    previous_path    text,
    version          integer,
    size_bytes       bigint,
    sha256           text,
    agent_id         text,
    run_id           text,
    idempotency_key  text,
    request_id       text,
    batch_id         text,
    at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (xid, seq)
);
CREATE INDEX events_by_subject ON events (subject, xid, seq);
CREATE INDEX events_by_run ON events (subject, run_id, xid, seq) WHERE run_id IS NOT NULL;
CREATE INDEX events_by_agent ON events (subject, agent_id, xid, seq) WHERE agent_id IS NOT NULL;
CREATE INDEX events_by_file ON events (subject, file_id, xid, seq);
CREATE INDEX events_at ON events (at);

-- Waiting readers of a subject's feed wake when its events commit.
CREATE FUNCTION agentfs_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentfs_events', md5(NEW.subject));
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION agentfs_notify_event();

-- A batch item that undoes one file's changes by a run carries its plan.
ALTER TABLE batch_items ADD COLUMN params jsonb;
