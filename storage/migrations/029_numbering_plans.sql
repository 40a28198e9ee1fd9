-- The numbering at commit (025, 027) planned every one of its statements
-- afresh at every commit (plan_cache_mode = force_custom_plan), so that a
-- commit's range of positions was a constant to the planner: a generic
-- plan for "pos > $lo AND pos <= $hi" guesses a range of thousands of rows
-- and scanned every event, file and version (23 ms a checkpoint at 1 M
-- files). But most commits number one event, and planning those statements
-- cost more than running them: measured with pg_stat_statements (and
-- track_planning) over `make bench`'s 4 KiB uploads, about 4.8 ms of
-- planning per commit against 2 ms of execution, all of it while the
-- subject's counter row is locked, so every upload of the subject waits
-- for it.
--
-- The statements now name the commit's positions as an array,
-- "pos = ANY($ps)", which a generic plan takes for a few rows: an index
-- probe per position into events (subject, pos), then probes by key into
-- file_states, file_versions, files and the run tables, whatever the
-- tables' sizes. The plans are made once per connection and kept
-- (force_generic_plan); a commit of 10 000 events (a fork) runs the same
-- probes 10 000 times. The bodies are 027's but for that.

CREATE OR REPLACE FUNCTION agentfs_run_totals(s text, lo bigint, hi bigint) RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    ps bigint[] := ARRAY(SELECT generate_series(lo + 1, hi));
BEGIN
    INSERT INTO run_totals AS t (subject, run_id, folder, type, n, bytes_written, first_at, last_at, last_pos, agent_ids)
        SELECT e.subject, e.run_id, agentfs_folder(e.path), e.type, count(*),
            coalesce(sum(e.size_bytes) FILTER (WHERE e.type IN ('file.created', 'file.replaced')), 0),
            min(e.at), max(e.at), max(e.pos),
            coalesce(array_agg(DISTINCT e.agent_id ORDER BY e.agent_id) FILTER (WHERE e.agent_id IS NOT NULL), '{}')
        FROM events e
        WHERE e.subject = s AND e.pos = ANY(ps) AND e.run_id IS NOT NULL
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
            WHERE e.subject = s AND e.pos = ANY(ps) AND e.type LIKE 'file.%'),
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

CREATE OR REPLACE FUNCTION agentfs_number_events() RETURNS void LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    subjects text[];
    los bigint[];
    his bigint[];
    top bigint;
    r record;
    ps bigint[];
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

    -- Per subject, by its positions (lo, hi] as an array: a commit of one
    -- event reads one event, one of 10 000 reads 10 000.
    FOR r IN SELECT * FROM unnest(subjects, los, his) AS u(subject, lo, hi) LOOP
        ps := ARRAY(SELECT generate_series(r.lo + 1, r.hi));
        -- A file.created event begins a new file: no interval of it is open.
        UPDATE file_states s SET to_pos = e.pos
            FROM (SELECT e.file_id, min(e.pos) AS pos FROM events e
                  WHERE e.subject = r.subject AND e.pos = ANY(ps)
                      AND e.type LIKE 'file.%' AND e.type <> 'file.created' GROUP BY e.file_id) e
            WHERE s.file_id = e.file_id AND s.to_pos IS NULL;
        INSERT INTO file_states (subject, file_id, path, version, size_bytes, sha256, content_type,
                blob_key, expires_at, from_pos, to_pos)
            SELECT e.subject, e.file_id, e.path, v.version, v.size_bytes, v.sha256, v.content_type,
                v.blob_key, f.expires_at, e.pos, e.next_pos
            FROM (SELECT e.subject, e.file_id, e.path, e.version, e.type, e.pos,
                         lead(e.pos) OVER (PARTITION BY e.file_id ORDER BY e.pos) AS next_pos
                  FROM events e
                  WHERE e.subject = r.subject AND e.pos = ANY(ps) AND e.type LIKE 'file.%') e
                JOIN file_versions v ON v.file_id = e.file_id AND v.version = e.version
                JOIN files f ON f.id = e.file_id
            WHERE e.type IN ('file.created', 'file.replaced', 'file.restored', 'file.moved', 'file.reverted');
        PERFORM agentfs_run_totals(r.subject, r.lo, r.hi);
    END LOOP;
END $$;
