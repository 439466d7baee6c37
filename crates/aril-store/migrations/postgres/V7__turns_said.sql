-- Schema 7: what a filter reads of each user's turns. A filter on `created_at` reads the turns
-- said in its span through `turns_said` (when said, else stored); equality on metadata keys
-- finds the turns whose metadata contains the values through `turns_metadata` (`@>`).
CREATE INDEX turns_said ON turns (user_id, (COALESCE(event_time, ingest_time)));
CREATE INDEX turns_metadata ON turns USING gin (metadata jsonb_path_ops);
