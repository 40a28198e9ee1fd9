-- Bytes written per subject per fixed window, so a quota holds across instances.
CREATE TABLE quota_usage (
    subject       text NOT NULL,
    window_start  timestamptz NOT NULL,
    bytes         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, window_start)
);
