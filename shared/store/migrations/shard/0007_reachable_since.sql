-- When a server process last saw this database come back after an outage
-- (store.MarkReachable). Leases lapse while their holders cannot heartbeat;
-- none expires until a lease's time has passed since this, or since the
-- server's own start (pg_postmaster_start_time), whichever is later.
ALTER TABLE shard_info ADD COLUMN reachable_since timestamptz;
