-- Version 8: what a client attached to a turn (a JSON object, as text), and the lifecycle of the
-- memory it holds: when it expires (RFC 3339 in UTC with microseconds, so that text order is
-- time order) and whether it may be updated. The sweep finds the expired through the index.
ALTER TABLE turns ADD COLUMN metadata TEXT;
ALTER TABLE turns ADD COLUMN expires_at TEXT;
ALTER TABLE turns ADD COLUMN immutable INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS turns_expiring ON turns (expires_at) WHERE expires_at IS NOT NULL;
