-- The worker registry (NoETL's runtime table, its worker_pool rows): one row per
-- worker, keyed by the name it registers under (its worker id: the one it claims
-- commands with). A register or pool heartbeat stamps last_seen; a worker is
-- alive while last_seen is younger than the registry's expiry (controlplane,
-- workers.go), expired after, offline once it deregisters. Rows silent for a
-- day are deleted by the next registration.
CREATE TABLE worker (
    name          text        PRIMARY KEY CHECK (name <> ''),
    runtime_id    bigint      GENERATED ALWAYS AS IDENTITY,
    pool          text        NOT NULL,
    runtime       text        NOT NULL,
    status        text        NOT NULL,
    capacity      integer     CHECK (capacity >= 0),
    hostname      text,
    pid           bigint,
    labels        jsonb       NOT NULL DEFAULT '{}',
    -- NoETL's runtime object: {type, pid, hostname} and the worker's meta.
    info          jsonb       NOT NULL DEFAULT '{}',
    -- The process behind the name (a digest of what identifies it): a new one
    -- starts a new instance, whose heartbeats keep only the leases of commands
    -- claimed since instance_at.
    instance      text        NOT NULL,
    instance_at   timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    last_seen     timestamptz NOT NULL DEFAULT now()
);
-- Expiry and retention read workers by when they were last heard from.
CREATE INDEX worker_last_seen ON worker (last_seen);
