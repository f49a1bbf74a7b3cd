-- Schedules (NoETL's noetl.schedule field names where it has them) and the
-- log of what each due time did. The control plane's schedule lifecycle
-- (shared/controlplane/schedule.go) is the only writer.

CREATE SEQUENCE schedule_id_seq AS bigint;

CREATE TABLE schedule (
    schedule_id        bigint      PRIMARY KEY DEFAULT nextval('schedule_id_seq'),
    playbook_path      text        NOT NULL CHECK (playbook_path <> ''),
    -- NULL: the latest version when each run starts.
    playbook_version   integer     CHECK (playbook_version > 0),
    cron               text,
    interval_seconds   bigint      CHECK (interval_seconds > 0),
    timezone           text        NOT NULL DEFAULT 'UTC',
    enabled            boolean     NOT NULL DEFAULT true,
    input_payload      jsonb       NOT NULL DEFAULT '{}',
    overlap            text        NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'buffer_one', 'allow')),
    catchup_seconds    bigint      NOT NULL DEFAULT 60 CHECK (catchup_seconds >= 1),
    jitter_seconds     bigint      NOT NULL DEFAULT 0 CHECK (jitter_seconds >= 0),
    meta               jsonb       NOT NULL DEFAULT '{}',
    -- The first due time not handled yet, and when it fires (plus jitter).
    next_run_at        timestamptz,
    fire_at            timestamptz,
    -- buffer_one: the due time waiting for the running one.
    buffered_at        timestamptz,
    -- What is left of a backfill: the next due time and the range's end.
    backfill_next      timestamptz,
    backfill_to        timestamptz,
    -- The last run started: its due time, execution and when.
    last_run_at        timestamptz,
    last_scheduled_at  timestamptz,
    last_execution_id  bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((cron IS NULL) <> (interval_seconds IS NULL))
);
ALTER SEQUENCE schedule_id_seq OWNED BY schedule.schedule_id;

-- What the firing loop reads every second: enabled schedules by when they
-- fire, and the few with a buffered run or a backfill waiting.
CREATE INDEX schedule_due ON schedule (fire_at) WHERE enabled;
CREATE INDEX schedule_pending ON schedule (schedule_id)
    WHERE buffered_at IS NOT NULL OR backfill_next IS NOT NULL;

-- One row per run started, and one per range of due times skipped in a row
-- for one reason (Through and Count), so an outage of a year is one row.
CREATE TABLE schedule_run (
    run_id          bigserial   PRIMARY KEY,
    schedule_id     bigint      NOT NULL REFERENCES schedule ON DELETE CASCADE,
    scheduled_at    timestamptz NOT NULL,
    origin          text        NOT NULL CHECK (origin IN ('schedule', 'buffered', 'backfill', 'trigger')),
    outcome         text        NOT NULL CHECK (outcome IN ('started', 'skipped', 'failed')),
    execution_id    bigint,
    through         timestamptz NOT NULL,
    count           integer     NOT NULL DEFAULT 1,
    reason          text,
    recorded_at     timestamptz NOT NULL DEFAULT now()
);
-- A due time starts at most one run (the execution's idempotency key says
-- the same on its shard).
CREATE UNIQUE INDEX schedule_run_started ON schedule_run (schedule_id, scheduled_at) WHERE outcome = 'started';
CREATE INDEX schedule_run_by_schedule ON schedule_run (schedule_id, scheduled_at DESC, run_id DESC);
