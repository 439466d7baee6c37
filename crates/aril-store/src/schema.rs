//! The SQLite schema and its version. Turns are never updated; they are deleted only by a
//! deletion (of a scope, or of one memory with all its versions). Segments link to turns through
//! `segment_turns`; a memory's later versions link to its first turn through `revisions`.
//!
//! Version history: 1 = turns, segments, open segments, embeddings, API keys; 2 = `revisions`
//! (memory versions); 3 = cards with their structured indexes, the consolidation queue and the
//! encoder's state; 4 = `card_vectors` (cards' embeddings, gone with their card) and `llm_calls`
//! (token accounting); 5 = o200k token counts in `llm_calls` (empty for older calls); 6 = a version
//! on each open segment (a write must find the version it read) and a claim lease on each queued
//! segment (`consolidation.claimed_until`, Unix milliseconds). Opening an
//! older file upgrades it in place (the new tables start empty, and before 3 its segments are
//! queued for consolidation).

/// The schema this build reads and writes. A store with a higher version is refused.
pub const SCHEMA_VERSION: i64 = 6;

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
-- A turn's session neighbours in store order (the lexical windows read them on every write).
CREATE INDEX IF NOT EXISTS turns_session_order
    ON turns (user_id, agent_id, run_id, conversation, IFNULL(session, ''), seq);
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
    -- Raised by every write; a write names the version it read (optimistic concurrency).
    version      INTEGER NOT NULL DEFAULT 0,
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
-- Every closed segment waits here to be written into cards (pending), then is done or failed.
CREATE TABLE IF NOT EXISTS consolidation (
    segment_id TEXT PRIMARY KEY REFERENCES segments (id) ON DELETE CASCADE,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    reason     TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0,
    -- While an encoder holds the segment: when its claim lapses (Unix ms).
    claimed_until INTEGER
);
CREATE INDEX IF NOT EXISTS consolidation_status ON consolidation (status);
-- Cards die with the segment they came from (its event frame): a deletion that touches a segment
-- takes their text too, and the rebuilt segment is queued again.
CREATE TABLE IF NOT EXISTS cards (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    user_id     TEXT NOT NULL,
    agent_id    TEXT NOT NULL DEFAULT '',
    run_id      TEXT NOT NULL DEFAULT '',
    segment_id  TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    time_start  TEXT,
    time_end    TEXT,
    granularity TEXT,
    -- The end of the interval the card's time names (its end, or its start plus one day, month
    -- or year by granularity): what date lookups compare.
    span_end    TEXT
);
CREATE INDEX IF NOT EXISTS cards_scope ON cards (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS cards_time ON cards (user_id, time_start, span_end);
CREATE INDEX IF NOT EXISTS cards_segment ON cards (segment_id);
CREATE TABLE IF NOT EXISTS card_turns (
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    turn_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (card_id, turn_id)
);
CREATE INDEX IF NOT EXISTS card_turns_turn ON card_turns (turn_id);
-- Entities and topics as written (`name`) and folded to lower case (`key`, what lookups use).
CREATE TABLE IF NOT EXISTS card_entities (
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    PRIMARY KEY (card_id, key)
);
CREATE INDEX IF NOT EXISTS card_entities_key ON card_entities (key);
CREATE TABLE IF NOT EXISTS card_topics (
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    PRIMARY KEY (card_id, key)
);
CREATE INDEX IF NOT EXISTS card_topics_key ON card_topics (key);
-- A card that updates earlier ones names them; the earlier ones stay (history) and recall prefers
-- the newest. No foreign key on `supersedes`: the earlier card may be gone with its segment.
CREATE TABLE IF NOT EXISTS card_supersedes (
    card_id    TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    supersedes TEXT NOT NULL,
    PRIMARY KEY (card_id, supersedes)
);
CREATE INDEX IF NOT EXISTS card_supersedes_old ON card_supersedes (supersedes);
-- The encoder's disambiguation state, per conversation (JSON, bounded by the encoder).
CREATE TABLE IF NOT EXISTS encoder_states (
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    conversation TEXT NOT NULL,
    state        TEXT NOT NULL,
    PRIMARY KEY (user_id, agent_id, run_id, conversation)
);
-- A card's chunk vectors under one embedding model. Not in `embeddings`: they die with their card
-- (a deleted segment's cards leave no vector behind).
CREATE TABLE IF NOT EXISTS card_vectors (
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    model   TEXT NOT NULL,
    chunks  BLOB NOT NULL,
    PRIMARY KEY (card_id, model)
);
-- Every language-model call as it was paid for. No content and no user: accounting only.
CREATE TABLE IF NOT EXISTS llm_calls (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    at                TEXT NOT NULL,
    purpose           TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    counted_locally   INTEGER NOT NULL,
    latency_ms        INTEGER NOT NULL,
    prompt_o200k      INTEGER,
    completion_o200k  INTEGER,
    attempts          INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id       TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    user_id  TEXT,
    admin    INTEGER NOT NULL,
    created  TEXT NOT NULL
);
"#;
