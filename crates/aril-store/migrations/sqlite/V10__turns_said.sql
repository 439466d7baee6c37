-- Version 10: what a filter reads of each user's turns, without their text. A filter on
-- `created_at` reads the turns said in its span through `turns_said` (when said, else stored);
-- one on metadata reads every current turn of the scope from `turns_facts`, which holds all it
-- needs in store order (a walk of the table would read every turn's text too).
CREATE INDEX IF NOT EXISTS turns_said ON turns (user_id, COALESCE(event_time, ingest_time));
CREATE INDEX IF NOT EXISTS turns_facts ON turns (user_id, seq, agent_id, run_id, id, event_time,
    ingest_time, expires_at, valid_to, metadata);
