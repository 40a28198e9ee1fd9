-- A run's recovery (DESIGN §25): the key's record names the run of the
-- request that claimed it (X-Run-ID), the request's path and query (what a
-- successor sends again when the claim was abandoned) and the paths its
-- effect writes, so a
-- run's keys are listed newest first in one index scan however many the
-- subject holds, and a scoped token sees the records whose paths lie in its
-- folders. Keys claimed before this migration cannot say whose run they
-- were: run_recorded is NULL on them (true on every key claimed since), and
-- a recovery counts them as predating the record, through an index that
-- holds only them and empties as their retention ends.
ALTER TABLE idempotency_keys
    ADD COLUMN run_id       text,
    ADD COLUMN paths        text[],
    ADD COLUMN request_uri  text,
    ADD COLUMN run_recorded boolean;
ALTER TABLE idempotency_keys ALTER COLUMN run_recorded SET DEFAULT true;

CREATE INDEX idempotency_keys_by_run ON idempotency_keys (subject, run_id, created_at DESC, key DESC)
    WHERE run_id IS NOT NULL;
CREATE INDEX idempotency_keys_before_runs ON idempotency_keys (subject) WHERE run_recorded IS NULL;
