-- A recorded answer keeps its secret members (a share link's url) only
-- sealed: response_body shows them null, response_secrets names them, and
-- sealed_secrets holds their values encrypted under the server's record key
-- (AGENTFS_RECORD_KEY, never stored here), replayed only to the token
-- sealed_for names.
ALTER TABLE idempotency_keys
    ADD COLUMN IF NOT EXISTS response_secrets text[],
    ADD COLUMN IF NOT EXISTS sealed_secrets   bytea,
    ADD COLUMN IF NOT EXISTS sealed_for       text;

-- Share links recorded before kept their url in plain text: it is taken out
-- (such a replay answers the link with its url null, as for another token).
-- Running this file again changes nothing more.
UPDATE idempotency_keys
SET response_body = convert_to(
        jsonb_set(convert_from(response_body, 'UTF8')::jsonb, '{url}', 'null'::jsonb)::text || E'\n', 'UTF8'),
    response_secrets = ARRAY['url']
WHERE status = 'completed' AND method = 'POST' AND route = '/v1/files/:id/links'
  AND response_status BETWEEN 200 AND 299 AND response_secrets IS NULL;
