-- Schema 4: BM25 that does not visit every matching row. Until now a lexical search unnested the
-- `tsvector` of every unit holding any word of the question and scanned the scope for N and the
-- mean length: its cost grew with the scope (half a second a query at 100k turns).
--
-- * Postings: one row per (unit, lexeme) with the lexeme's frequency in the unit, the unit's
--   length and `weight`, the BM25 term factor at a fixed reference length (an order only: the
--   score uses the scope's real mean length). One table per unit table, so a posting dies with
--   its unit (ON DELETE CASCADE); a turn's window is a second kind of posting of the turn, and
--   where the window holds the turn's words only (a long turn fills its window alone) one
--   posting of a third kind serves both.
--   aril writes a unit's postings whenever it sets the unit's `tsvector`.
-- * Statistics: document frequencies per scope and kind (`lexical_terms`) and unit counts and
--   lengths (`lexical_totals`), kept by statement triggers on the postings tables from their
--   transition tables (FK cascades fire them too), so no search counts anything. A term whose
--   count reaches zero is deleted with the last unit holding it (a deleted unit's words do not
--   linger). Writers of one user serialise on an advisory lock while they count, so concurrent
--   writers cannot deadlock on the counters.
-- * A search reads, per word of the question, the best postings by `weight` (index order), scores
--   the units they name and rescores the best of them exactly.
CREATE TABLE turn_postings (
    unit_id  TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    kind     SMALLINT NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    role     TEXT NOT NULL,
    lexeme   TEXT NOT NULL,
    tf       INTEGER NOT NULL,
    len      INTEGER NOT NULL,
    weight   REAL NOT NULL
);
CREATE INDEX turn_postings_unit ON turn_postings (unit_id);
CREATE INDEX turn_postings_best ON turn_postings (user_id, kind, lexeme, weight DESC)
    INCLUDE (unit_id, tf, len, agent_id, run_id, role);

CREATE TABLE segment_postings (
    unit_id  TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    kind     SMALLINT NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    role     TEXT NOT NULL DEFAULT '',
    lexeme   TEXT NOT NULL,
    tf       INTEGER NOT NULL,
    len      INTEGER NOT NULL,
    weight   REAL NOT NULL
);
CREATE INDEX segment_postings_unit ON segment_postings (unit_id);
CREATE INDEX segment_postings_best ON segment_postings (user_id, kind, lexeme, weight DESC)
    INCLUDE (unit_id, tf, len, agent_id, run_id);

CREATE TABLE card_postings (
    unit_id  TEXT NOT NULL REFERENCES cards (id) ON DELETE CASCADE,
    kind     SMALLINT NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    role     TEXT NOT NULL DEFAULT '',
    lexeme   TEXT NOT NULL,
    tf       INTEGER NOT NULL,
    len      INTEGER NOT NULL,
    weight   REAL NOT NULL
);
CREATE INDEX card_postings_unit ON card_postings (unit_id);
CREATE INDEX card_postings_best ON card_postings (user_id, kind, lexeme, weight DESC)
    INCLUDE (unit_id, tf, len, agent_id, run_id);

CREATE TABLE lexical_terms (
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    kind     SMALLINT NOT NULL,
    lexeme   TEXT NOT NULL,
    n        BIGINT NOT NULL,
    PRIMARY KEY (user_id, kind, lexeme, agent_id, run_id)
);

CREATE TABLE lexical_totals (
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    kind     SMALLINT NOT NULL,
    units    BIGINT NOT NULL,
    length   BIGINT NOT NULL,
    PRIMARY KEY (user_id, kind, agent_id, run_id)
);

-- Counts the postings a statement added to a postings table (1) or removed from it (-1):
-- both triggers name their transition table `changed`. Each user's advisory lock is taken
-- first, in user order.
CREATE FUNCTION aril_count_postings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sign INTEGER := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
BEGIN
    PERFORM pg_advisory_xact_lock(1634888044, hashtext(u.user_id))
        FROM (SELECT DISTINCT user_id FROM changed ORDER BY user_id) u;
    -- A word a turn and its window share (kind 4) counts as the turn's (0) and the window's (1).
    INSERT INTO lexical_terms AS t (user_id, agent_id, run_id, kind, lexeme, n)
        SELECT user_id, agent_id, run_id, k.kind, lexeme, sign * COUNT(*)
        FROM changed c CROSS JOIN LATERAL (SELECT c.kind WHERE c.kind <> 4
                                            UNION ALL SELECT 0 WHERE c.kind = 4
                                            UNION ALL SELECT 1 WHERE c.kind = 4) k (kind)
        GROUP BY user_id, k.kind, lexeme, agent_id, run_id
        ORDER BY user_id, k.kind, lexeme, agent_id, run_id
        ON CONFLICT (user_id, kind, lexeme, agent_id, run_id) DO UPDATE SET n = t.n + EXCLUDED.n;
    INSERT INTO lexical_totals AS t (user_id, agent_id, run_id, kind, units, length)
        SELECT user_id, agent_id, run_id, kind, sign * COUNT(*), sign * SUM(len) FROM
            (SELECT DISTINCT user_id, agent_id, run_id, k.kind, unit_id, len
             FROM changed c CROSS JOIN LATERAL (SELECT c.kind WHERE c.kind <> 4
                                                 UNION ALL SELECT 0 WHERE c.kind = 4
                                                 UNION ALL SELECT 1 WHERE c.kind = 4) k (kind)) d
        GROUP BY user_id, kind, agent_id, run_id
        ORDER BY user_id, kind, agent_id, run_id
        ON CONFLICT (user_id, kind, agent_id, run_id)
        DO UPDATE SET units = t.units + EXCLUDED.units, length = t.length + EXCLUDED.length;
    IF sign < 0 THEN
        DELETE FROM lexical_terms t USING (SELECT DISTINCT user_id, lexeme FROM changed) c
            WHERE t.user_id = c.user_id AND t.lexeme = c.lexeme AND t.n <= 0;
        DELETE FROM lexical_totals t USING (SELECT DISTINCT user_id FROM changed) c
            WHERE t.user_id = c.user_id AND t.units <= 0;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER turn_postings_added AFTER INSERT ON turn_postings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();
CREATE TRIGGER turn_postings_removed AFTER DELETE ON turn_postings
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();
CREATE TRIGGER segment_postings_added AFTER INSERT ON segment_postings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();
CREATE TRIGGER segment_postings_removed AFTER DELETE ON segment_postings
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();
CREATE TRIGGER card_postings_added AFTER INSERT ON card_postings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();
CREATE TRIGGER card_postings_removed AFTER DELETE ON card_postings
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION aril_count_postings();

-- The postings of what an older aril indexed (kinds: 0 turn, 1 window, 2 segment, 3 card, 4 a
-- word of a turn whose window holds the same words; the weight is taken at `search.rs`'s
-- `WEIGHT_LENGTH`, 32 tokens).
INSERT INTO turn_postings (unit_id, kind, user_id, agent_id, run_id, role, lexeme, tf, len, weight)
    SELECT u.id, CASE WHEN u.wtsv = u.tsv THEN 4 ELSE 0 END, u.user_id, u.agent_id, u.run_id,
           u.role, w.lexeme, f.tf, u.tsv_len, f.tf / (f.tf + 1.2 * (0.25 + 0.75 * u.tsv_len / 32.0))
    FROM turns u CROSS JOIN LATERAL unnest(u.tsv) w
         CROSS JOIN LATERAL (SELECT COALESCE(array_length(w.positions, 1), 1) AS tf) f
    WHERE u.tsv IS NOT NULL;
INSERT INTO turn_postings (unit_id, kind, user_id, agent_id, run_id, role, lexeme, tf, len, weight)
    SELECT u.id, 1, u.user_id, u.agent_id, u.run_id, u.role, w.lexeme, f.tf, u.wtsv_len,
           f.tf / (f.tf + 1.2 * (0.25 + 0.75 * u.wtsv_len / 32.0))
    FROM turns u CROSS JOIN LATERAL unnest(u.wtsv) w
         CROSS JOIN LATERAL (SELECT COALESCE(array_length(w.positions, 1), 1) AS tf) f
    WHERE u.wtsv IS DISTINCT FROM u.tsv;
INSERT INTO segment_postings (unit_id, kind, user_id, agent_id, run_id, lexeme, tf, len, weight)
    SELECT u.id, 2, u.user_id, u.agent_id, u.run_id, w.lexeme, f.tf, u.tsv_len,
           f.tf / (f.tf + 1.2 * (0.25 + 0.75 * u.tsv_len / 32.0))
    FROM segments u CROSS JOIN LATERAL unnest(u.tsv) w
         CROSS JOIN LATERAL (SELECT COALESCE(array_length(w.positions, 1), 1) AS tf) f
    WHERE u.tsv IS NOT NULL;
INSERT INTO card_postings (unit_id, kind, user_id, agent_id, run_id, lexeme, tf, len, weight)
    SELECT u.id, 3, u.user_id, u.agent_id, u.run_id, w.lexeme, f.tf, u.tsv_len,
           f.tf / (f.tf + 1.2 * (0.25 + 0.75 * u.tsv_len / 32.0))
    FROM cards u CROSS JOIN LATERAL unnest(u.tsv) w
         CROSS JOIN LATERAL (SELECT COALESCE(array_length(w.positions, 1), 1) AS tf) f
    WHERE u.tsv IS NOT NULL;

-- Searches read postings, not the `tsvector`s (kept: postings are derived from them).
DROP INDEX turns_tsv, turns_wtsv, segments_tsv, cards_tsv;
