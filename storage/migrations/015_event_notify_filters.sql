-- A waiting reader of the feed (GET /v1/events?wait=) is woken only by
-- events its filter can match: the notification of a statement that
-- inserts events carries, per subject, what the filters look at (type,
-- file id, path, agent id, run id of each event), as
--   {"s": md5(subject), "e": [[type, file_id, path, agent_id, run_id], ...]}
-- (agent_id and run_id '' when unset). NOTIFY takes fewer than 8000 bytes,
-- so a statement whose events do not fit (or are too many to be worth
-- listing) notifies the bare md5 of the subject, as before, which wakes
-- every waiter of that subject. One notification per statement and
-- subject, not per row: a batch of many events is one wake-up.
CREATE OR REPLACE FUNCTION agentfs_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
    payload text;
BEGIN
    FOR s IN SELECT subject, count(*) AS n FROM added GROUP BY subject LOOP
        payload := NULL;
        IF s.n <= 100 THEN
            SELECT json_build_object('s', md5(s.subject), 'e', json_agg(json_build_array(
                    a.type, a.file_id, a.path, coalesce(a.agent_id, ''), coalesce(a.run_id, ''))))::text
                INTO payload FROM added a WHERE a.subject = s.subject;
        END IF;
        IF payload IS NULL OR octet_length(payload) >= 8000 THEN
            payload := md5(s.subject);
        END IF;
        PERFORM pg_notify('agentfs_events', payload);
    END LOOP;
    RETURN NULL;
END $$;

DROP TRIGGER events_notify ON events;
CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION agentfs_notify_event();
