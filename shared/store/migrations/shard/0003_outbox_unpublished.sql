-- The drain reads the outbox lag (the oldest row not yet published) on every
-- run: with this index that is one index probe, not a scan of every row the
-- cleanup has not yet removed.
CREATE INDEX outbox_unpublished ON outbox (created_at) WHERE status <> 'PUBLISHED';
