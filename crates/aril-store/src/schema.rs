//! The SQLite schema and its version. Turns are never updated; they are deleted only by a
//! deletion (of a scope, or of one memory with all its versions). Segments link to turns through
//! `segment_turns`; a memory's later versions link to its first turn through `revisions`.
//!
//! Version history: 1 = turns, segments, open segments, embeddings, API keys; 2 = `revisions`
//! (memory versions). Opening a version-1 file upgrades it in place (the new table is empty).

/// The schema this build reads and writes. A store with a higher version is refused.
pub const SCHEMA_VERSION: i64 = 2;

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL DEFAULT '',
    run_id       TEXT NOT NULL DEFAULT '',
    conversation TEXT NOT NULL,
    session      TEXT,
    role         TEXT NOT NULL,
    speaker      TEXT,
    text         TEXT NOT NULL,
    text_hash    TEXT NOT NULL,
    event_time   TEXT,
    ingest_time  TEXT NOT NULL,
    source_id    TEXT
);
CREATE INDEX IF NOT EXISTS turns_scope ON turns (user_id, agent_id, run_id, conversation);
CREATE INDEX IF NOT EXISTS turns_hash ON turns (text_hash);
CREATE TABLE IF NOT EXISTS segments (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT NOT NULL UNIQUE,
    user_id        TEXT NOT NULL,
    agent_id       TEXT NOT NULL DEFAULT '',
    run_id         TEXT NOT NULL DEFAULT '',
    conversation   TEXT NOT NULL,
    boundary_score REAL NOT NULL,
    reason         TEXT NOT NULL,
    tokens         INTEGER NOT NULL,
    start_time     TEXT,
    end_time       TEXT,
    text_hash      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS segments_scope ON segments (user_id, agent_id, run_id, conversation);
CREATE INDEX IF NOT EXISTS segments_hash ON segments (text_hash);
CREATE TABLE IF NOT EXISTS segment_turns (
    segment_id TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    ord        INTEGER NOT NULL,
    turn_id    TEXT NOT NULL REFERENCES turns (id),
    PRIMARY KEY (segment_id, ord)
);
CREATE INDEX IF NOT EXISTS segment_turns_turn ON segment_turns (turn_id);
CREATE TABLE IF NOT EXISTS open_segments (
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    conversation TEXT NOT NULL,
    state        TEXT NOT NULL,
    PRIMARY KEY (user_id, agent_id, run_id, conversation)
);
CREATE TABLE IF NOT EXISTS embeddings (
    model     TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    pieces    INTEGER NOT NULL,
    chunks    BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
);
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
CREATE TABLE IF NOT EXISTS api_keys (
    id       TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    user_id  TEXT,
    admin    INTEGER NOT NULL,
    created  TEXT NOT NULL
);
"#;
