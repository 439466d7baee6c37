-- Schema 5: what a client attached to a turn (Mem0's `metadata`: a JSON object; jsonb keeps its
-- values, and its keys come back sorted, as aril returns them), and the lifecycle of the memory
-- it holds: when it expires and whether it may be updated. The sweep finds the expired through
-- the index.
ALTER TABLE turns ADD COLUMN metadata jsonb;
ALTER TABLE turns ADD COLUMN expires_at timestamptz;
ALTER TABLE turns ADD COLUMN immutable boolean NOT NULL DEFAULT false;
CREATE INDEX turns_expiring ON turns (expires_at) WHERE expires_at IS NOT NULL;
