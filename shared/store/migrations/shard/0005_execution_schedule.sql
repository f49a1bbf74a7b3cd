-- An execution a schedule started carries the schedule and the due time it
-- ran for; (schedule_id, scheduled_at) is also its idempotency key.
ALTER TABLE execution ADD COLUMN schedule_id bigint, ADD COLUMN scheduled_at timestamptz;
