-- The commands a worker holds: a pool heartbeat extends their leases and the
-- worker registry counts them as the worker's in-flight commands.
CREATE INDEX command_holder ON command (worker_id) WHERE status IN ('CLAIMED', 'RUNNING');
