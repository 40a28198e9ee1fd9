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
-- transaction. pos numbers a subject's events 1, 2, 3... in the order their
-- transactions committed, with no holes. An event is inserted without one;
-- the deferred trigger below gives it the subject's next number from
-- event_counters as its transaction commits. The counter row stays locked
-- until the commit ends, so the next transaction of the subject numbers its
-- events only after this one's are visible (or were rolled back, numbers
-- and all). A follower of pos therefore never skips an event that commits
-- late and never sees one twice. Numbering at commit keeps the counter lock
-- out of the transaction's own work: it is taken last, after every file
-- lock, so it cannot deadlock with them, and is held only while the commit
-- is written. See docs/architecture.md.
CREATE TABLE event_counters (
    subject  text PRIMARY KEY,
    n        bigint NOT NULL
);

CREATE TABLE events (
    id               text PRIMARY KEY DEFAULT agentfs_id('evt'),
    subject          text NOT NULL,
    pos              bigint,
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
    at               timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX events_by_subject ON events (subject, pos);
CREATE INDEX events_by_run ON events (subject, run_id, pos) WHERE run_id IS NOT NULL;
CREATE INDEX events_by_agent ON events (subject, agent_id, pos) WHERE agent_id IS NOT NULL;
CREATE INDEX events_by_file ON events (subject, file_id, pos);
CREATE INDEX events_at ON events (at);

CREATE FUNCTION agentfs_event_pos() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    p bigint;
BEGIN
    INSERT INTO event_counters AS c (subject, n) VALUES (NEW.subject, 1)
        ON CONFLICT (subject) DO UPDATE SET n = c.n + 1
        RETURNING n INTO p;
    UPDATE events SET pos = p WHERE id = NEW.id;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER events_pos AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION agentfs_event_pos();

-- Waiting readers of a subject's feed wake when its events commit.
CREATE FUNCTION agentfs_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentfs_events', md5(NEW.subject));
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION agentfs_notify_event();

-- A batch item that undoes one file's changes by a run carries its plan.
ALTER TABLE batch_items ADD COLUMN params jsonb;
