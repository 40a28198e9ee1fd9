-- Multipart upload sessions; their parts go straight into an S3 multipart upload.
CREATE TABLE uploads (
    id             text PRIMARY KEY,
    subject        text NOT NULL,
    path           text NOT NULL,
    size_bytes     bigint NOT NULL CHECK (size_bytes > 0),
    content_type   text NOT NULL,
    replace        boolean NOT NULL,
    sha256         text NOT NULL DEFAULT '',
    part_size      bigint NOT NULL,
    part_count     integer NOT NULL,
    status         text NOT NULL CHECK (status IN ('pending', 'completing', 'completed', 'aborted', 'expired', 'failed')),
    s3_upload_id   text NOT NULL,
    blob_key       text NOT NULL,
    hashed_parts   integer NOT NULL DEFAULT 0,
    hash_state     bytea,
    assembled      boolean NOT NULL DEFAULT false,
    completing_until timestamptz,
    file_id        text,
    error          bytea,
    agent_id       text,
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL
);
CREATE INDEX uploads_live ON uploads (subject, path) WHERE status = 'pending';
CREATE INDEX uploads_expiry ON uploads (expires_at) WHERE status IN ('pending', 'completing');

CREATE TABLE upload_parts (
    upload_id    text NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    part_number  integer NOT NULL,
    size_bytes   bigint NOT NULL,
    sha256       text NOT NULL,
    etag         text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (upload_id, part_number)
);
