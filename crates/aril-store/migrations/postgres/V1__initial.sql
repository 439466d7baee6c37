-- aril's PostgreSQL schema, version 1: the same tables as the embedded SQLite store (schema 5),
-- with native types (timestamptz, jsonb, bytea). Link tables carry `n` to keep insertion order.
-- Applied by `aril --store postgres://… migrate` (refinery keeps the history).
CREATE TABLE turns (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    event_time   TIMESTAMPTZ,
    ingest_time  TIMESTAMPTZ NOT NULL,
    source_id    TEXT
);
CREATE INDEX turns_scope ON turns (user_id, agent_id, run_id, conversation);
CREATE INDEX turns_hash ON turns (text_hash);
CREATE TABLE segments (
    seq            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    user_id        TEXT NOT NULL,
    agent_id       TEXT NOT NULL DEFAULT '',
    run_id         TEXT NOT NULL DEFAULT '',
    conversation   TEXT NOT NULL,
    boundary_score DOUBLE PRECISION NOT NULL,
    reason         TEXT NOT NULL,
    tokens         BIGINT NOT NULL,
    start_time     TIMESTAMPTZ,
    end_time       TIMESTAMPTZ,
    text_hash      TEXT NOT NULL
);
CREATE INDEX segments_scope ON segments (user_id, agent_id, run_id, conversation);
CREATE INDEX segments_hash ON segments (text_hash);
CREATE TABLE segment_turns (
    segment_id TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    ord        INTEGER NOT NULL,
    turn_id    TEXT NOT NULL REFERENCES turns (id),
    PRIMARY KEY (segment_id, ord)
);
CREATE INDEX segment_turns_turn ON segment_turns (turn_id);
CREATE TABLE open_segments (
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    conversation TEXT NOT NULL,
    state        JSONB NOT NULL,
    PRIMARY KEY (user_id, agent_id, run_id, conversation)
);
CREATE TABLE embeddings (
    model     TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    pieces    INTEGER NOT NULL,
    chunks    BYTEA NOT NULL,
    PRIMARY KEY (model, text_hash)
);
CREATE TABLE revisions (
    turn_id   TEXT PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    version   INTEGER NOT NULL CHECK (version >= 2),
    UNIQUE (memory_id, version)
);
CREATE INDEX revisions_memory ON revisions (memory_id);
CREATE VIEW superseded (turn_id) AS
    SELECT memory_id FROM revisions
    UNION
    SELECT r.turn_id FROM revisions r
    WHERE r.version < (SELECT MAX(version) FROM revisions m WHERE m.memory_id = r.memory_id);
CREATE TABLE consolidation (
    segment_id TEXT PRIMARY KEY REFERENCES segments (id) ON DELETE CASCADE,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    reason     TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX consolidation_status ON consolidation (status);
CREATE TABLE cards (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    user_id     TEXT NOT NULL,
    agent_id    TEXT NOT NULL DEFAULT '',
    run_id      TEXT NOT NULL DEFAULT '',
    segment_id  TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    time_start  TIMESTAMPTZ,
    time_end    TIMESTAMPTZ,
    granularity TEXT,
    span_end    TIMESTAMPTZ
);
CREATE INDEX cards_scope ON cards (user_id, agent_id, run_id);
CREATE INDEX cards_time ON cards (user_id, time_start, span_end);
CREATE INDEX cards_segment ON cards (segment_id);
CREATE TABLE card_turns (
    n       BIGINT GENERATED ALWAYS AS IDENTITY,
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    turn_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (card_id, turn_id)
);
CREATE INDEX card_turns_turn ON card_turns (turn_id);
CREATE TABLE card_entities (
    n       BIGINT GENERATED ALWAYS AS IDENTITY,
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    PRIMARY KEY (card_id, key)
);
CREATE INDEX card_entities_key ON card_entities (key);
CREATE TABLE card_topics (
    n       BIGINT GENERATED ALWAYS AS IDENTITY,
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    key     TEXT NOT NULL,
    name    TEXT NOT NULL,
    PRIMARY KEY (card_id, key)
);
CREATE INDEX card_topics_key ON card_topics (key);
CREATE TABLE card_supersedes (
    n          BIGINT GENERATED ALWAYS AS IDENTITY,
    card_id    TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    supersedes TEXT NOT NULL,
    PRIMARY KEY (card_id, supersedes)
);
CREATE INDEX card_supersedes_old ON card_supersedes (supersedes);
CREATE TABLE encoder_states (
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    conversation TEXT NOT NULL,
    state        JSONB NOT NULL,
    PRIMARY KEY (user_id, agent_id, run_id, conversation)
);
CREATE TABLE card_vectors (
    card_id TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    model   TEXT NOT NULL,
    chunks  BYTEA NOT NULL,
    PRIMARY KEY (card_id, model)
);
CREATE TABLE llm_calls (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                TIMESTAMPTZ NOT NULL,
    purpose           TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    counted_locally   BOOLEAN NOT NULL,
    latency_ms        BIGINT NOT NULL,
    prompt_o200k      BIGINT,
    completion_o200k  BIGINT,
    attempts          INTEGER NOT NULL
);
CREATE TABLE api_keys (
    id       TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    user_id  TEXT,
    admin    BOOLEAN NOT NULL,
    created  TIMESTAMPTZ NOT NULL
);
