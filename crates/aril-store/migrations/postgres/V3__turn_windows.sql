-- Schema 3: each turn's lexical window (the turn with up to two neighbours of its session on
-- each side, within 256 o200k tokens: `aril_core::window_text`) as a second `tsvector`, so BM25
-- can find a short reply by the words around it. aril fills `wtsv` in the transaction that
-- stores a turn, refreshes the windows a new or deleted turn changes, and fills the rows an
-- older aril stored after migrating (`backfill.rs`).
ALTER TABLE turns ADD COLUMN wtsv tsvector;
ALTER TABLE turns ADD COLUMN wtsv_len integer GENERATED ALWAYS AS (aril_tsv_len(wtsv)) STORED;
CREATE INDEX turns_wtsv ON turns USING gin (wtsv);
-- A turn's session neighbours, read in store order.
CREATE INDEX turns_session_order ON turns (user_id, agent_id, run_id, conversation, (COALESCE(session, '')), seq);
