-- Version 4: cards' embeddings (gone with their card) and token accounting.
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
    attempts          INTEGER NOT NULL
);
