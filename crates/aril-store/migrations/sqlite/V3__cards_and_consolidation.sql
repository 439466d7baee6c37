-- Version 3: cards with their structured indexes, the consolidation queue and the encoder's state.
-- Every closed segment waits here to be written into cards (pending), then is done or failed.
CREATE TABLE IF NOT EXISTS consolidation (
    segment_id TEXT PRIMARY KEY REFERENCES segments (id) ON DELETE CASCADE,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    reason     TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0
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
-- Segments closed before cards existed wait for consolidation like new ones.
INSERT OR IGNORE INTO consolidation (segment_id, status) SELECT id, 'pending' FROM segments;
