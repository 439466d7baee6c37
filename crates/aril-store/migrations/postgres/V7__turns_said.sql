-- Schema 7: each user's turns by when they were said (else stored), so that a filter on
-- `created_at` reads the turns of its span, not the whole memory.
CREATE INDEX turns_said ON turns (user_id, (COALESCE(event_time, ingest_time)));
