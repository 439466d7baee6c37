-- Schema 5: what a client attached to a turn (Mem0's `metadata`: a JSON object), kept as the
-- client sent it (jsonb keeps its values; its keys come back sorted, as aril returns them).
ALTER TABLE turns ADD COLUMN metadata jsonb;
