-- Version 2: a memory's later versions (an update appends one; recall shows the newest).
CREATE TABLE IF NOT EXISTS revisions (
    turn_id   TEXT PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    version   INTEGER NOT NULL CHECK (version >= 2),
    UNIQUE (memory_id, version)
);
-- Turns that a later version of their memory replaces: hidden from recall, kept for history.
CREATE VIEW IF NOT EXISTS superseded (turn_id) AS
    SELECT DISTINCT memory_id FROM revisions
    UNION
    SELECT r.turn_id FROM revisions r
    WHERE r.version < (SELECT MAX(version) FROM revisions m WHERE m.memory_id = r.memory_id);
