-- When a pending command was last announced again (lifecycle.ReannounceDue):
-- a notification can be lost, so a pending command is announced again until
-- a worker claims it. NULL: only its first announcement. A retry clears it.
ALTER TABLE command ADD COLUMN announced_at timestamptz;
