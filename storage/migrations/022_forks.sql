-- Forks and merges (DESIGN §19). A fork copies the files live under one
-- prefix at a point to another prefix as new files sharing their blobs;
-- fork_bases is the three-way merge's base: per relative path, the content
-- both sides last agreed on (at the fork, then after each merge). A path
-- with no row had no file on either side at the base.
CREATE TABLE forks (
    id          text PRIMARY KEY,
    subject     text NOT NULL,
    from_prefix text COLLATE "C" NOT NULL,
    to_prefix   text COLLATE "C" NOT NULL,
    base_pos    bigint NOT NULL, -- the point forked, then the point of the last merge
    files       integer NOT NULL,
    agent_id    text,
    run_id      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    merged_at   timestamptz
);
CREATE INDEX forks_by_subject ON forks (subject, created_at DESC, id DESC);

CREATE TABLE fork_bases (
    fork_id  text NOT NULL REFERENCES forks (id) ON DELETE CASCADE,
    rel_path text COLLATE "C" NOT NULL,
    file_id  text NOT NULL, -- the file whose version the base is
    version  integer NOT NULL,
    sha256   text NOT NULL,
    PRIMARY KEY (fork_id, rel_path)
);

-- A forked file names the file and version it was copied from.
ALTER TABLE files ADD COLUMN forked_from_id text;
ALTER TABLE files ADD COLUMN forked_from_version integer;

-- The fork or merge a file event came from: origin is 'fork' (the fork's
-- file.created events) or 'merge' (the changes a merge applied).
ALTER TABLE events ADD COLUMN fork_id text;
ALTER TABLE events ADD COLUMN origin text;
