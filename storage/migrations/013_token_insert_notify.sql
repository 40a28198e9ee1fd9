-- Instances remember refused tokens too (tokencache.go): a token inserted
-- after it was refused (by hand, or restored from a backup) must be
-- forgotten like a revoked one, so an insert notifies agentfs_token as well.
CREATE OR REPLACE FUNCTION agentfs_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('agentfs_token', '');
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('agentfs_token', encode(NEW.token_hash, 'hex'));
    ELSE
        PERFORM pg_notify('agentfs_token', encode(OLD.token_hash, 'hex'));
        IF TG_OP = 'UPDATE' AND NEW.token_hash IS DISTINCT FROM OLD.token_hash THEN
            PERFORM pg_notify('agentfs_token', encode(NEW.token_hash, 'hex'));
        END IF;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER tokens_changed ON tokens;
CREATE TRIGGER tokens_changed AFTER INSERT OR UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION agentfs_token_changed();
