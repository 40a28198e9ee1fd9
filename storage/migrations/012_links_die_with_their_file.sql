-- A share link dies with its file: when a file stops being live (a delete,
-- a batch delete, a move that replaces it, its expiry as recorded), its live
-- links are revoked at that moment, whichever statement did it, and a
-- restore does not bring them back. (A restore of a file whose expiry was
-- not yet recorded records it first; see RestoreFileTx.)
CREATE FUNCTION agentfs_file_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE links SET revoked_at = NEW.deleted_at
    WHERE file_id = NEW.id AND revoked_at IS NULL AND expires_at > NEW.deleted_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER files_deleted_revoke_links AFTER UPDATE OF deleted_at ON files
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
    EXECUTE FUNCTION agentfs_file_deleted();
