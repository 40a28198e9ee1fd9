-- Instances cache the tokens they look up and forget one as soon as it
-- changes: every update or delete of a token row, whoever makes it (agentfs
-- token revoke, an operator's own SQL), notifies agentfs_token with the
-- token's hash when its transaction commits; a TRUNCATE notifies an empty
-- payload, which forgets every token.
CREATE FUNCTION agentfs_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('agentfs_token', '');
    ELSE
        PERFORM pg_notify('agentfs_token', encode(OLD.token_hash, 'hex'));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tokens_changed AFTER UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION agentfs_token_changed();
CREATE TRIGGER tokens_truncated AFTER TRUNCATE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION agentfs_token_changed();
