-- Version 1: turns, segments, open segments and the embedding cache.
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
