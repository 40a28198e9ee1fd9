-- A complete's claim on its upload session: complete_fence is its fencing
-- token, bumped by every complete that begins (a takeover too), and
-- completing_until its lease, renewed while it runs. Only the complete
-- holding the current fence may commit the file.
ALTER TABLE uploads ADD COLUMN complete_fence bigint NOT NULL DEFAULT 0;

-- Completes of one path take turns: a complete looks for another session of
-- the path that is completing.
CREATE INDEX uploads_completing ON uploads (subject, path) WHERE status = 'completing';

-- A part on its way to S3 holds a lease on its session, renewed while it
-- streams; a complete does not take the part list while one is live.
CREATE TABLE upload_part_leases (
    id           bigserial PRIMARY KEY,
    upload_id    text NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    part_number  integer NOT NULL,
    lease_until  timestamptz NOT NULL
);
CREATE INDEX upload_part_leases_upload ON upload_part_leases (upload_id);
