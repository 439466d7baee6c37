-- Version 7: what earlier files may lack because it was added without a version of its own:
-- API keys (added within version 1) and a turn's session neighbours in store order (added within
-- version 6; the lexical windows read them on every write).
CREATE TABLE IF NOT EXISTS api_keys (
    id       TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    user_id  TEXT,
    admin    INTEGER NOT NULL,
    created  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_session_order
    ON turns (user_id, agent_id, run_id, conversation, IFNULL(session, ''), seq);
