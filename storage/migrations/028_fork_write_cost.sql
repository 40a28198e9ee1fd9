-- Less work per row for the writes that make many files at once (a fork
-- of 10 000 files: its files, versions, events, intervals and bases).
--
-- 1. files_search_path (016) and files_live_children (020) are the same
--    index: (subject, path COLLATE "C") WHERE deleted_at IS NULL. Every
--    plan that used the first (search's candidates, with and without a
--    prefix; the listing by delimiter's seek) uses the second the same way.
DROP INDEX files_search_path;

-- 2. The foreign keys of file_versions and file_states on files, and of
--    fork_bases on forks, checked each inserted row with a query of its own
--    (a fork of 10 000 files ran 30 000 of them: a third of the database's
--    time for the fork). Every such row is written by the statement or the
--    transaction that writes or locks its parent: a new version by the
--    statement that inserts or updates its file (writeFiles), an interval
--    at commit from the file row joined in (agentfs_number_events), a base
--    with its fork. A file being purged is locked by the DELETE, so a write
--    of it waits and then finds no row to write from. What the keys still
--    did is the cascade on delete; a trigger per statement does it, one
--    DELETE per dependent table for all the rows the statement removed.
ALTER TABLE file_versions DROP CONSTRAINT file_versions_file_id_fkey;
ALTER TABLE file_states DROP CONSTRAINT file_states_file_id_fkey;
ALTER TABLE fork_bases DROP CONSTRAINT fork_bases_fork_id_fkey;

CREATE FUNCTION agentfs_files_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM file_versions v USING gone g WHERE v.file_id = g.id;
    DELETE FROM file_states s USING gone g WHERE s.file_id = g.id;
    RETURN NULL;
END $$;
CREATE TRIGGER files_gone AFTER DELETE ON files REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION agentfs_files_gone();

CREATE FUNCTION agentfs_forks_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM fork_bases b USING gone g WHERE b.fork_id = g.id;
    RETURN NULL;
END $$;
CREATE TRIGGER forks_gone AFTER DELETE ON forks REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION agentfs_forks_gone();

-- Rows whose parent went before this migration cannot exist (the keys
-- held until now), so nothing is left to clean up.
