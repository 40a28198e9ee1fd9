-- A run's totals kept as its events commit (DESIGN §14, §25), so that a
-- run summary and the confirmed part of a run's recovery read a few rows
-- however many operations the run made. Before, each aggregated every
-- event of the run and counted its files (0.7 ms at 10 events, 119 ms at
-- 100 000).
--
-- run_totals holds, per subject, run, parent folder of the event's path
-- and event type, what the run's events sum to. The folder key keeps a
-- scoped token's totals exact: its prefixes are folders, so the events
-- it sees are exactly those of the folders that start with one of its
-- prefixes, and it sums those rows. run_files counts, the same way, the
-- files not deleted that the run created or last wrote (files.run_id,
-- files.last_run_id); run_file_marks remembers, per such file, what it
-- counts for (its folder and runs), so that the next event of the file
-- moves the count from there to where the file is now. A file past its
-- expires_at that the sweeper has not yet recorded as expired still counts
-- here; the reader subtracts those (few: files_expiry finds them).
--
-- Both are written by agentfs_number_events as the transaction's events
-- are numbered, set-based, one statement per table per commit: the
-- subject's counter lock is held then already, so they add no lock to
-- the transaction's own work and no deadlock. Every change of a file's
-- path, deletion or run makes an event, so the counts follow every door.
-- A DELETE of events (the retention sweep) recomputes the touched groups
-- from the events that remain, so totals always equal what the events
-- say.

-- agentfs_folder is the parent folder of a path ("a/b/" of "a/b/c.txt",
-- "" at the root), as a scoped token's prefixes name folders.
CREATE FUNCTION agentfs_folder(p text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(substring(p from '^.*/'), '');

CREATE TABLE run_totals (
    subject        text NOT NULL,
    run_id         text NOT NULL,
    folder         text NOT NULL,
    type           text NOT NULL,
    n              bigint NOT NULL,
    bytes_written  bigint NOT NULL,
    first_at       timestamptz NOT NULL,
    last_at        timestamptz NOT NULL,
    last_pos       bigint NOT NULL,
    agent_ids      text[] NOT NULL,
    PRIMARY KEY (subject, run_id, folder, type)
);

CREATE TABLE run_files (
    subject  text NOT NULL,
    run_id   text NOT NULL,
    folder   text NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (subject, run_id, folder)
);

CREATE TABLE run_file_marks (
    file_id  text PRIMARY KEY,
    subject  text NOT NULL,
    folder   text NOT NULL,
    runs     text[] NOT NULL
);

-- agentfs_file_runs is the runs a file counts for: its creating and its
-- last writing run, once each, none when deleted.
CREATE FUNCTION agentfs_file_runs(run_id text, last_run_id text, deleted_at timestamptz) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN deleted_at IS NOT NULL THEN '{}'::text[]
    ELSE ARRAY(SELECT DISTINCT x FROM unnest(ARRAY[run_id, last_run_id]) AS u(x) WHERE x IS NOT NULL ORDER BY 1) END;

-- agentfs_run_totals adds the subject's events numbered (lo, hi] to the
-- totals of their runs, and moves the counts of the files they touched.
CREATE FUNCTION agentfs_run_totals(s text, lo bigint, hi bigint) RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    INSERT INTO run_totals AS t (subject, run_id, folder, type, n, bytes_written, first_at, last_at, last_pos, agent_ids)
        SELECT e.subject, e.run_id, agentfs_folder(e.path), e.type, count(*),
            coalesce(sum(e.size_bytes) FILTER (WHERE e.type IN ('file.created', 'file.replaced')), 0),
            min(e.at), max(e.at), max(e.pos),
            coalesce(array_agg(DISTINCT e.agent_id ORDER BY e.agent_id) FILTER (WHERE e.agent_id IS NOT NULL), '{}')
        FROM events e
        WHERE e.subject = s AND e.pos > lo AND e.pos <= hi AND e.run_id IS NOT NULL
        GROUP BY e.subject, e.run_id, agentfs_folder(e.path), e.type
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (subject, run_id, folder, type) DO UPDATE SET
            n = t.n + excluded.n,
            bytes_written = t.bytes_written + excluded.bytes_written,
            first_at = least(t.first_at, excluded.first_at),
            last_at = greatest(t.last_at, excluded.last_at),
            last_pos = greatest(t.last_pos, excluded.last_pos),
            agent_ids = CASE WHEN excluded.agent_ids <@ t.agent_ids THEN t.agent_ids
                ELSE ARRAY(SELECT DISTINCT x FROM unnest(t.agent_ids || excluded.agent_ids) AS u(x) ORDER BY 1) END;

    WITH touched AS (
            SELECT DISTINCT e.file_id FROM events e
            WHERE e.subject = s AND e.pos > lo AND e.pos <= hi AND e.type LIKE 'file.%'),
        cur AS (
            SELECT f.id AS file_id, f.subject, agentfs_folder(f.path) AS folder,
                agentfs_file_runs(f.run_id, f.last_run_id, f.deleted_at) AS runs
            FROM files f JOIN touched t ON t.file_id = f.id),
        old AS (
            SELECT m.* FROM run_file_marks m JOIN touched t ON t.file_id = m.file_id),
        delta AS (
            SELECT subject, run_id, folder, sum(d) AS d FROM (
                SELECT subject, unnest(runs) AS run_id, folder, 1 AS d FROM cur
                UNION ALL
                SELECT subject, unnest(runs), folder, -1 FROM old) x
            GROUP BY subject, run_id, folder HAVING sum(d) <> 0),
        counted AS (
            INSERT INTO run_files AS c (subject, run_id, folder, n)
                SELECT subject, run_id, folder, d FROM delta ORDER BY 1, 2, 3
            ON CONFLICT (subject, run_id, folder) DO UPDATE SET n = c.n + excluded.n),
        unmarked AS (
            DELETE FROM run_file_marks m USING old
            WHERE m.file_id = old.file_id
                AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.file_id = m.file_id AND cardinality(cur.runs) > 0))
    INSERT INTO run_file_marks AS m (file_id, subject, folder, runs)
        SELECT file_id, subject, folder, runs FROM cur WHERE cardinality(runs) > 0
        ON CONFLICT (file_id) DO UPDATE SET subject = excluded.subject, folder = excluded.folder, runs = excluded.runs
        WHERE (m.subject, m.folder, m.runs) IS DISTINCT FROM (excluded.subject, excluded.folder, excluded.runs);
END $$;

-- A DELETE of events takes what it removed out of the totals: the groups
-- it touched are summed again from the events that remain (the sweep
-- removes a run's oldest events, so their first_at moves).
CREATE FUNCTION agentfs_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_totals AS t (subject, run_id, folder, type, n, bytes_written, first_at, last_at, last_pos, agent_ids)
        SELECT e.subject, e.run_id, agentfs_folder(e.path), e.type, count(*),
            coalesce(sum(e.size_bytes) FILTER (WHERE e.type IN ('file.created', 'file.replaced')), 0),
            min(e.at), max(e.at), max(e.pos),
            coalesce(array_agg(DISTINCT e.agent_id ORDER BY e.agent_id) FILTER (WHERE e.agent_id IS NOT NULL), '{}')
        FROM events e
        JOIN (SELECT DISTINCT subject, run_id FROM gone WHERE run_id IS NOT NULL) r
            ON r.subject = e.subject AND r.run_id = e.run_id
        WHERE e.pos IS NOT NULL AND EXISTS (SELECT 1 FROM gone g WHERE g.subject = e.subject
            AND g.run_id = e.run_id AND g.type = e.type AND agentfs_folder(g.path) = agentfs_folder(e.path))
        GROUP BY e.subject, e.run_id, agentfs_folder(e.path), e.type
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (subject, run_id, folder, type) DO UPDATE SET n = excluded.n,
            bytes_written = excluded.bytes_written, first_at = excluded.first_at, last_at = excluded.last_at,
            last_pos = excluded.last_pos, agent_ids = excluded.agent_ids;
    -- Groups left without events go.
    DELETE FROM run_totals t
        WHERE (t.subject, t.run_id, t.folder, t.type) IN (
                SELECT DISTINCT subject, run_id, agentfs_folder(path), type FROM gone WHERE run_id IS NOT NULL)
            AND NOT EXISTS (SELECT 1 FROM events e WHERE e.subject = t.subject AND e.run_id = t.run_id
                AND e.type = t.type AND agentfs_folder(e.path) = t.folder AND e.pos IS NOT NULL);
    RETURN NULL;
END $$;
CREATE TRIGGER events_deleted AFTER DELETE ON events REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION agentfs_events_deleted();

-- The runs of the events and files already kept.
INSERT INTO run_totals (subject, run_id, folder, type, n, bytes_written, first_at, last_at, last_pos, agent_ids)
    SELECT subject, run_id, agentfs_folder(path), type, count(*),
        coalesce(sum(size_bytes) FILTER (WHERE type IN ('file.created', 'file.replaced')), 0),
        min(at), max(at), max(pos),
        coalesce(array_agg(DISTINCT agent_id ORDER BY agent_id) FILTER (WHERE agent_id IS NOT NULL), '{}')
    FROM events WHERE run_id IS NOT NULL AND pos IS NOT NULL
    GROUP BY subject, run_id, agentfs_folder(path), type;
INSERT INTO run_file_marks (file_id, subject, folder, runs)
    SELECT id, subject, agentfs_folder(path), agentfs_file_runs(run_id, last_run_id, deleted_at)
    FROM files WHERE deleted_at IS NULL AND (run_id IS NOT NULL OR last_run_id IS NOT NULL);
INSERT INTO run_files (subject, run_id, folder, n)
    SELECT subject, r, folder, count(*) FROM run_file_marks, unnest(runs) AS r GROUP BY subject, r, folder;

CREATE OR REPLACE FUNCTION agentfs_number_events() RETURNS void LANGUAGE plpgsql
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
        PERFORM agentfs_run_totals(r.subject, r.lo, r.hi);
    END LOOP;
END $$;

