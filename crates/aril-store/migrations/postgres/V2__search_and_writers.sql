-- aril's PostgreSQL schema, version 2: search inside PostgreSQL, so every aril process sharing
-- the database sees one index, and what several writers need.
--
-- * Chunk vectors as rows (pgvector), one table per unit kind so each row dies with its unit
--   (ON DELETE CASCADE). `dims` selects the partial HNSW index of the vectors' dimension: the
--   384-dimensional one (all-MiniLM-L6-v2) is created here, others by aril when it first writes
--   vectors of that size.
-- * BM25 over `tsvector` columns (GIN), filled by aril from the text a unit is searched by (a
--   turn's `Speaker: text`, a segment's turns, a card's text with its entities and topics);
--   `tsv_len` is the unit's token count, BM25's document length.
-- * `open_segments.version`: raised by every write; a write names the version it read.
-- * `consolidation.claimed_until`: a lease held by the one encoder writing the segment's cards.
-- Rows of an older database are filled in by `aril migrate` after this script (vectors are
-- decoded from the embedding cache, texts rendered by aril).
CREATE EXTENSION IF NOT EXISTS vector;

CREATE FUNCTION aril_tsv_len(t tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT COALESCE(SUM(COALESCE(array_length(positions, 1), 1)), 0)::integer FROM unnest(t) $$;

CREATE TABLE turn_chunks (
    turn_id  TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    model    TEXT NOT NULL,
    n        INTEGER NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    dims     INTEGER NOT NULL,
    vec      vector NOT NULL,
    PRIMARY KEY (turn_id, model, n)
);
CREATE INDEX turn_chunks_user ON turn_chunks (user_id, model);
CREATE INDEX turn_chunks_hnsw_384 ON turn_chunks
    USING hnsw ((vec::vector(384)) vector_cosine_ops) WHERE dims = 384;

CREATE TABLE segment_chunks (
    segment_id TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    model      TEXT NOT NULL,
    n          INTEGER NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    dims       INTEGER NOT NULL,
    vec        vector NOT NULL,
    PRIMARY KEY (segment_id, model, n)
);
CREATE INDEX segment_chunks_user ON segment_chunks (user_id, model);
CREATE INDEX segment_chunks_hnsw_384 ON segment_chunks
    USING hnsw ((vec::vector(384)) vector_cosine_ops) WHERE dims = 384;

CREATE TABLE card_chunks (
    card_id  TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    model    TEXT NOT NULL,
    n        INTEGER NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    dims     INTEGER NOT NULL,
    vec      vector NOT NULL,
    PRIMARY KEY (card_id, model, n)
);
CREATE INDEX card_chunks_user ON card_chunks (user_id, model);
CREATE INDEX card_chunks_hnsw_384 ON card_chunks
    USING hnsw ((vec::vector(384)) vector_cosine_ops) WHERE dims = 384;

ALTER TABLE turns ADD COLUMN tsv tsvector;
ALTER TABLE turns ADD COLUMN tsv_len integer GENERATED ALWAYS AS (aril_tsv_len(tsv)) STORED;
CREATE INDEX turns_tsv ON turns USING gin (tsv);
ALTER TABLE segments ADD COLUMN tsv tsvector;
ALTER TABLE segments ADD COLUMN tsv_len integer GENERATED ALWAYS AS (aril_tsv_len(tsv)) STORED;
CREATE INDEX segments_tsv ON segments USING gin (tsv);
ALTER TABLE cards ADD COLUMN tsv tsvector;
ALTER TABLE cards ADD COLUMN tsv_len integer GENERATED ALWAYS AS (aril_tsv_len(tsv)) STORED;
CREATE INDEX cards_tsv ON cards USING gin (tsv);

ALTER TABLE open_segments ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE consolidation ADD COLUMN claimed_until TIMESTAMPTZ;
