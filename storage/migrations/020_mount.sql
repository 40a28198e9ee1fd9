-- What a mount needs of a file (DESIGN §21): its POSIX permission bits, the
-- client's modification time (NULL: updated_at) and its kind: a regular
-- file, a symlink (whose content is its target) or a directory marker (a
-- zero-byte file that keeps an empty folder).
ALTER TABLE files
    ADD COLUMN mode integer NOT NULL DEFAULT 420 CHECK (mode BETWEEN 0 AND 4095),
    ADD COLUMN mtime timestamptz,
    ADD COLUMN kind text NOT NULL DEFAULT 'file' CHECK (kind IN ('file', 'symlink', 'directory'));

-- A listing by delimiter seeks from one entry to the next (a directory's
-- whole subtree is skipped in one seek), in byte order of the path, so a
-- listing costs one index probe per entry it answers whatever lies below.
CREATE INDEX files_live_children ON files (subject, path COLLATE "C") WHERE deleted_at IS NULL;
