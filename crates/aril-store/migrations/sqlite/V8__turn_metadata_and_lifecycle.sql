-- Version 8: what a client attached to a turn (`metadata`, a JSON object as text) and the
-- lifecycle of the memory it holds (`expires_at`: RFC 3339 in UTC with microseconds, so that text
-- order is time order; `immutable`), added as columns by schema.rs where missing. The sweep finds
-- the expired through this index.
CREATE INDEX IF NOT EXISTS turns_expiring ON turns (expires_at) WHERE expires_at IS NOT NULL;
