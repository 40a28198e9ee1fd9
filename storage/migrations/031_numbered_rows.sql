-- The numbering's statements (029, 030) read a commit's events back from
-- the table, "e.subject = s AND e.pos = ANY(ps)", planned once per
-- connection (force_generic_plan). A connection that made its plans while
-- events was small (a new database) kept one that scans the subject's
-- events and filters them by position (auto_explain in `make bench`:
-- "Rows Removed by Filter: 937" for a commit of 3, 1.1 of its 1.9 ms),
-- every commit scanning more as the subject grew, until the table's next
-- ANALYZE made it plan again.
--
-- The statement that numbers the events now hands the rows it numbered
-- (RETURNING, an events[]) to the statements after it, which read them
-- from that array: no lookup, no plan that depends on the table's
-- statistics, whatever the table's size. agentfs_run_totals and
-- agentfs_count_runs take the subject's numbered rows in place of its
-- positions (lo, hi]; the bodies are 029's and 030's but for that.

DROP FUNCTION agentfs_run_totals(text, bigint, bigint);
DROP FUNCTION agentfs_count_runs(text, bigint, bigint);

-- agentfs_count_runs adds evs, events of subject s just numbered, to the
-- run totals (027).
CREATE FUNCTION agentfs_count_runs(s text, evs events[]) RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    INSERT INTO run_totals AS t (subject, run_id, folder, type, n, bytes_written, first_at, last_at, last_pos, agent_ids)
        SELECT e.subject, e.run_id, agentfs_folder(e.path), e.type, count(*),
            coalesce(sum(e.size_bytes) FILTER (WHERE e.type IN ('file.created', 'file.replaced')), 0),
            min(e.at), max(e.at), max(e.pos),
            coalesce(array_agg(DISTINCT e.agent_id ORDER BY e.agent_id) FILTER (WHERE e.agent_id IS NOT NULL), '{}')
        FROM unnest(evs) e
        WHERE e.run_id IS NOT NULL
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
            SELECT DISTINCT e.file_id FROM unnest(evs) e
            WHERE e.type LIKE 'file.%'),
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


-- agentfs_run_totals is agentfs_count_runs when there is anything to count.
CREATE FUNCTION agentfs_run_totals(s text, evs events[]) RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    ids text[] := ARRAY(SELECT DISTINCT e.file_id FROM unnest(evs) e WHERE e.file_id IS NOT NULL);
BEGIN
    -- Something to count: an event of a run, or a file touched that
    -- counts for a run now (its creating or last writing run) or did
    -- (its marks); the files by key.
    IF EXISTS (SELECT FROM unnest(evs) e WHERE e.run_id IS NOT NULL)
        OR EXISTS (SELECT FROM files f WHERE f.id = ANY(ids) AND (f.run_id IS NOT NULL OR f.last_run_id IS NOT NULL))
        OR EXISTS (SELECT FROM run_file_marks m WHERE m.file_id = ANY(ids)) THEN
        PERFORM agentfs_count_runs(s, evs);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION agentfs_number_events() RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    numbered events[];
    top bigint;
    subj text;
    evs events[];
BEGIN
    -- Each subject's events take the positions after its counter's, in seq
    -- order; the rows numbered come back, by subject and position.
    WITH todo AS (SELECT id, subject, seq FROM events WHERE pos IS NULL),
    c AS (INSERT INTO event_counters AS c (subject, n)
            SELECT subject, count(*) FROM todo GROUP BY subject ORDER BY subject
            ON CONFLICT (subject) DO UPDATE SET n = c.n + excluded.n
            RETURNING c.subject, c.n),
    k AS (SELECT subject, count(*) AS k FROM todo GROUP BY subject),
    num AS (SELECT t.id, c.n - k.k + row_number() OVER (PARTITION BY t.subject ORDER BY t.seq, t.id) AS pos
            FROM todo t JOIN c ON c.subject = t.subject JOIN k ON k.subject = t.subject),
    up AS (UPDATE events e SET pos = num.pos, committed_at = clock_timestamp()
            FROM num WHERE e.id = num.id RETURNING e AS ev)
    SELECT max((u.ev).seq), array_agg(u.ev ORDER BY (u.ev).subject, (u.ev).pos)
        INTO top, numbered
        FROM up u;
    IF top IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('agentfs.numbered_seq', top::text, true);

    -- Per subject, from the rows numbered: a commit of one event reads
    -- one, one of 10 000 reads 10 000.
    FOR subj IN SELECT DISTINCT e.subject FROM unnest(numbered) e ORDER BY 1 LOOP
        evs := ARRAY(SELECT e FROM unnest(numbered) e WHERE e.subject = subj);
        -- A file.created event begins a new file: no interval of it is open.
        UPDATE file_states s SET to_pos = e.pos
            FROM (SELECT e.file_id, min(e.pos) AS pos FROM unnest(evs) e
                  WHERE e.type LIKE 'file.%' AND e.type <> 'file.created' GROUP BY e.file_id) e
            WHERE s.file_id = e.file_id AND s.to_pos IS NULL;
        INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type,
                blob_key, expires_at, from_pos, to_pos)
            SELECT e.subject, e.file_id, e.path, v.version, v.size_bytes, v.sha256, v.content_type,
                v.blob_key, f.expires_at, e.pos, e.next_pos
            FROM (SELECT e.subject, e.file_id, e.path, e.version, e.type, e.pos,
                         lead(e.pos) OVER (PARTITION BY e.file_id ORDER BY e.pos) AS next_pos
                  FROM unnest(evs) e
                  WHERE e.type LIKE 'file.%') e
                JOIN file_versions v ON v.file_id = e.file_id AND v.version = e.version
                JOIN files f ON f.id = e.file_id
            WHERE e.type IN ('file.created', 'file.replaced', 'file.restored', 'file.moved', 'file.reverted');
        PERFORM agentfs_run_totals(subj, evs);
    END LOOP;
END $$;
