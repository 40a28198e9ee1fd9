-- Points in time (DESIGN §18). A point of a subject is a position of its
-- event feed; what was true at a position is kept in file_states: one row
-- per interval of positions [from_pos, to_pos) over which a file was live
-- with one path and one version (to_pos NULL: still open). An as-of page is
-- one scan of file_states_by_path in path order; a diff reads the rows
-- whose intervals start or end between its two points.
--
-- The intervals are written where every effect of every door passes with
-- its position known: the deferred trigger that numbers events at commit
-- (agentfs_event_pos, migration 009). An event that leaves its file live
-- closes the file's open interval at its position and opens the next one;
-- a delete, expiry or purge only closes it. Expiry is lazy (a file counts
-- as deleted from expires_at on, before the sweeper writes file.expired),
-- so each interval keeps the file's expires_at and an as-of read compares
-- it with the point's time.

-- committed_at: when the event's transaction committed (the numbering
-- trigger's clock), so a time resolves to the last position committed at or
-- before it. Earlier events take their insertion time.
ALTER TABLE events ADD COLUMN committed_at timestamptz;
UPDATE events SET committed_at = at;
CREATE INDEX events_by_commit ON events (subject, committed_at);
-- checkpoint.created / checkpoint.deleted carry no file: file_id is '' and
-- path the checkpoint's prefix, and checkpoint_id names it.
ALTER TABLE events ADD COLUMN checkpoint_id text;

CREATE TABLE checkpoints (
    id          text PRIMARY KEY,
    subject     text NOT NULL,
    name        text,
    prefix      text NOT NULL DEFAULT '',
    note        text NOT NULL DEFAULT '',
    pos         bigint NOT NULL, -- the subject's last committed position when it was made
    agent_id    text,
    run_id      text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX checkpoints_name ON checkpoints (subject, name) WHERE name IS NOT NULL;
CREATE INDEX checkpoints_by_subject ON checkpoints (subject, created_at DESC, id DESC);

CREATE TABLE file_states (
    subject       text NOT NULL,
    file_id       text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    path          text COLLATE "C" NOT NULL,
    version       integer NOT NULL,
    size_bytes    bigint NOT NULL,
    sha256        text NOT NULL,
    content_type  text NOT NULL,
    blob_key      text NOT NULL,
    expires_at    timestamptz,
    from_pos      bigint NOT NULL,
    to_pos        bigint,
    PRIMARY KEY (file_id, from_pos)
);
-- An as-of page: the files live at P under a prefix, in path order.
CREATE INDEX file_states_by_path ON file_states (subject, path, from_pos);
-- A diff: the intervals that start or end between two positions.
CREATE INDEX file_states_by_start ON file_states (subject, from_pos);
CREATE INDEX file_states_by_end ON file_states (subject, to_pos) WHERE to_pos IS NOT NULL;
CREATE INDEX file_states_by_expiry ON file_states (subject, expires_at) WHERE expires_at IS NOT NULL;
-- One open interval per file.
CREATE UNIQUE INDEX file_states_open ON file_states (file_id) WHERE to_pos IS NULL;

-- agentfs_point_state applies event e, numbered p, to file_states.
CREATE FUNCTION agentfs_point_state(e events, p bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF e.type NOT LIKE 'file.%' THEN
        RETURN;
    END IF;
    UPDATE file_states SET to_pos = p WHERE file_id = e.file_id AND to_pos IS NULL;
    IF e.type IN ('file.created', 'file.replaced', 'file.restored', 'file.moved', 'file.reverted') THEN
        INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type,
                blob_key, expires_at, from_pos)
            SELECT e.subject, e.file_id, e.path, v.version, v.size_bytes, v.sha256, v.content_type,
                v.blob_key, f.expires_at, p
            FROM file_versions v JOIN files f ON f.id = v.file_id
            WHERE v.file_id = e.file_id AND v.version = e.version;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION agentfs_event_pos() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    p bigint;
BEGIN
    INSERT INTO event_counters AS c (subject, n) VALUES (NEW.subject, 1)
        ON CONFLICT (subject) DO UPDATE SET n = c.n + 1
        RETURNING n INTO p;
    UPDATE events SET pos = p, committed_at = clock_timestamp() WHERE id = NEW.id;
    PERFORM agentfs_point_state(NEW, p);
    RETURN NULL;
END $$;

-- A live file's expiry set or cleared without an event (PATCH) changes its
-- open interval. Past points stay true: an expiry is only ever set in the
-- future, and one already passed makes the file deleted, which PATCH
-- refuses, so old and new expires_at both lie after every point of the
-- interval that saw the file live.
CREATE FUNCTION agentfs_state_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE file_states SET expires_at = NEW.expires_at WHERE file_id = NEW.id AND to_pos IS NULL;
    RETURN NULL;
END $$;
CREATE TRIGGER files_state_expiry AFTER UPDATE OF expires_at ON files FOR EACH ROW
    WHEN (OLD.expires_at IS DISTINCT FROM NEW.expires_at AND NEW.deleted_at IS NULL)
    EXECUTE FUNCTION agentfs_state_expiry();

-- History from before: the intervals of the kept events, replayed in
-- order. Before a file's first kept event its state is inferred from that
-- event (a replace or revert of version n: version n-1 at its path; a move:
-- its previous path; a delete or expiry: the event's version and path; a
-- create or restore: not live), from position 0; a live file with no kept
-- event at all is live from 0 as it is now. What cannot be rebuilt: a
-- version already swept (its interval is left out), and an expires_at
-- changed since (each interval takes the file's current one).
INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type, blob_key, expires_at, from_pos)
    SELECT f.subject, f.id, f.path, f.version, f.size_bytes, f.sha256, f.content_type, f.blob_key, f.expires_at, 0
    FROM files f
    WHERE f.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.file_id = f.id);
INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type, blob_key, expires_at, from_pos)
    SELECT first.subject, first.file_id, first.before_path, v.version, v.size_bytes, v.sha256,
        v.content_type, v.blob_key, f.expires_at, 0
    FROM (SELECT DISTINCT ON (file_id) subject, file_id, type,
                 CASE WHEN type = 'file.moved' THEN previous_path ELSE path END AS before_path,
                 CASE WHEN type IN ('file.replaced', 'file.reverted') THEN version - 1 ELSE version END AS before_version
          FROM events WHERE pos IS NOT NULL AND type LIKE 'file.%'
          ORDER BY file_id, pos) first
    JOIN files f ON f.id = first.file_id
    JOIN file_versions v ON v.file_id = first.file_id AND v.version = first.before_version
    WHERE first.type NOT IN ('file.created', 'file.restored', 'file.purged') AND first.before_path IS NOT NULL;
DO $$
DECLARE
    e events;
BEGIN
    FOR e IN SELECT * FROM events WHERE pos IS NOT NULL AND type LIKE 'file.%'
             AND EXISTS (SELECT 1 FROM files f WHERE f.id = events.file_id)
             ORDER BY subject, pos LOOP
        PERFORM agentfs_point_state(e, e.pos);
    END LOOP;
END $$;
