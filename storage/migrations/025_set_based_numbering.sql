-- Events are numbered, and file_states written, a transaction at a time
-- instead of an event at a time. The deferred events_pos trigger still
-- fires once per event at commit (a constraint trigger can only be per
-- row), but its first call in a transaction numbers every event the
-- transaction inserted, per subject in insertion order, with one upsert of
-- the counter and one UPDATE, and writes their file_states with one UPDATE
-- (closing the intervals the events end) and one INSERT (opening the ones
-- they begin); every later call finds its event numbered already and
-- returns at once. A fork of 10 000 files was 40 000 statements at commit
-- (counter, event, close, open, per event), 2.4 s of the fork's commit on
-- this machine; now it is four.
--
-- seq is the insertion order (events of one statement included), which
-- positions follow within a transaction as the per-event trigger's calls
-- did. Old events keep seq NULL: they are numbered already.
CREATE SEQUENCE events_seq;
ALTER TABLE events ADD COLUMN seq bigint;
ALTER TABLE events ALTER COLUMN seq SET DEFAULT nextval('events_seq');
ALTER SEQUENCE events_seq OWNED BY events.seq;
-- The transaction's own events awaiting their numbers: every committed
-- event is numbered, and no other transaction's uncommitted row is
-- visible, so these are exactly this transaction's.
CREATE INDEX events_unnumbered ON events (seq) WHERE pos IS NULL;

-- agentfs_number_events numbers every unnumbered event visible (the
-- calling transaction's), writes their file_states, and records in the
-- transaction-local setting agentfs.numbered_seq the last seq it numbered.
-- Per file the events apply in position order: the file's open interval
-- closes at its first event; each event that leaves the file live opens an
-- interval that its next event in the transaction closes (or that stays
-- open after the last), exactly as agentfs_point_state applied one event
-- after another.
-- Its statements are planned for each call's own arguments: plpgsql's
-- cached generic plan of the file_states statements scans every event,
-- file and version (23 ms a checkpoint at 1 M files).
CREATE FUNCTION agentfs_number_events() RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    subjects text[];
    los bigint[];
    his bigint[];
    top bigint;
    r record;
BEGIN
    -- Each subject's events take the positions after its counter's, in seq
    -- order: (lo, hi] of the subject's feed.
    WITH todo AS (SELECT id, subject, seq FROM events WHERE pos IS NULL),
    c AS (INSERT INTO event_counters AS c (subject, n)
            SELECT subject, count(*) FROM todo GROUP BY subject ORDER BY subject
            ON CONFLICT (subject) DO UPDATE SET n = c.n + excluded.n
            RETURNING c.subject, c.n),
    k AS (SELECT subject, count(*) AS k FROM todo GROUP BY subject),
    num AS (SELECT t.id, c.n - k.k + row_number() OVER (PARTITION BY t.subject ORDER BY t.seq, t.id) AS pos
            FROM todo t JOIN c ON c.subject = t.subject JOIN k ON k.subject = t.subject),
    up AS (UPDATE events e SET pos = num.pos, committed_at = clock_timestamp()
            FROM num WHERE e.id = num.id RETURNING e.seq)
    SELECT (SELECT max(seq) FROM up), array_agg(c.subject), array_agg(c.n - k.k), array_agg(c.n)
        INTO top, subjects, los, his
        FROM c JOIN k ON k.subject = c.subject;
    IF top IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('agentfs.numbered_seq', top::text, true);

    -- Per subject, with its range as constants (custom plans): a commit of
    -- one event reads one event, one of 10 000 reads 10 000.
    FOR r IN SELECT * FROM unnest(subjects, los, his) AS u(subject, lo, hi) LOOP
        -- A file.created event begins a new file: no interval of it is open.
        UPDATE file_states s SET to_pos = e.pos
            FROM (SELECT e.file_id, min(e.pos) AS pos FROM events e
                  WHERE e.subject = r.subject AND e.pos > r.lo AND e.pos <= r.hi
                      AND e.type LIKE 'file.%' AND e.type <> 'file.created' GROUP BY e.file_id) e
            WHERE s.file_id = e.file_id AND s.to_pos IS NULL;
        INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type,
                blob_key, expires_at, from_pos, to_pos)
            SELECT e.subject, e.file_id, e.path, v.version, v.size_bytes, v.sha256, v.content_type,
                v.blob_key, f.expires_at, e.pos, e.next_pos
            FROM (SELECT e.subject, e.file_id, e.path, e.version, e.type, e.pos,
                         lead(e.pos) OVER (PARTITION BY e.file_id ORDER BY e.pos) AS next_pos
                  FROM events e
                  WHERE e.subject = r.subject AND e.pos > r.lo AND e.pos <= r.hi AND e.type LIKE 'file.%') e
                JOIN file_versions v ON v.file_id = e.file_id AND v.version = e.version
                JOIN files f ON f.id = e.file_id
            WHERE e.type IN ('file.created', 'file.replaced', 'file.restored', 'file.moved', 'file.reverted');
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION agentfs_event_pos() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq <= coalesce(nullif(current_setting('agentfs.numbered_seq', true), '')::bigint, 0) THEN
        RETURN NULL; -- numbered by an earlier call of this transaction
    END IF;
    PERFORM agentfs_number_events();
    RETURN NULL;
END $$;
