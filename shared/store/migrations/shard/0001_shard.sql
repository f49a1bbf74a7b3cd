-- Shard database: executions, their event logs, commands, outbox and step results.

-- Which shard this database is (written by the migrator right after this set, checked
-- by store.Open), so a misordered shard map is caught before ids are minted.
CREATE TABLE shard_info (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    shard_index integer     NOT NULL CHECK (shard_index BETWEEN 0 AND 1023),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Shard-resident ids are nextval << 10 | shard_index (R-I1). MAXVALUE keeps the
-- composed id below 2^63.
CREATE SEQUENCE id_seq AS bigint MINVALUE 1 MAXVALUE 9007199254740991;

-- next_id() mints one composed id in SQL (used as the outbox_id default); Go mints
-- blocks with store.AllocateIDs using the same arithmetic.
CREATE FUNCTION next_id() RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT (nextval('id_seq') << 10) | shard_index FROM shard_info $$;

-- One row per execution: the hot row, locked by every transaction that changes the
-- execution (R-L5). fillfactor leaves room for HOT updates of state/last_seq.
CREATE TABLE execution (
    execution_id        bigint      PRIMARY KEY,
    catalog_id          bigint      NOT NULL,
    path                text        NOT NULL,
    version             integer     NOT NULL,
    parent_execution_id bigint,
    status              text        NOT NULL
        CHECK (status IN ('RUNNING', 'FAILING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    pool                text        NOT NULL,
    idempotency_key     text,
    workload            jsonb       NOT NULL DEFAULT '{}',
    state               jsonb       NOT NULL DEFAULT '{}',
    last_seq            bigint      NOT NULL DEFAULT 0,
    started_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    completed_at        timestamptz,
    error               text
) WITH (fillfactor = 80);

-- A repeated execute with the same key returns the first execution.
CREATE UNIQUE INDEX execution_idempotency_key ON execution (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- GET /api/executions: keyset pagination by (started_at DESC, execution_id DESC),
-- unfiltered or filtered by one of status, path, catalog_id, parent.
CREATE INDEX execution_started ON execution (started_at DESC, execution_id DESC);
CREATE INDEX execution_status_started ON execution (status, started_at DESC, execution_id DESC);
CREATE INDEX execution_path_started ON execution (path, started_at DESC, execution_id DESC);
CREATE INDEX execution_catalog_started ON execution (catalog_id, started_at DESC, execution_id DESC);
-- Also finds the children of a parent (cancel, sweeper re-drive).
CREATE INDEX execution_parent_started ON execution (parent_execution_id, started_at DESC, execution_id DESC)
    WHERE parent_execution_id IS NOT NULL;

-- The append-only event log. seq is assigned under the execution row lock and is the
-- total order every fold uses (R-S4).
CREATE TABLE event (
    execution_id    bigint      NOT NULL,
    seq             bigint      NOT NULL CHECK (seq > 0),
    event_id        bigint      NOT NULL,
    event_type      text        NOT NULL,
    node_name       text,
    node_type       text,
    status          text,
    context         jsonb,
    meta            jsonb,
    result          jsonb,
    error           text,
    worker_id       text,
    command_id      text,
    parent_event_id bigint,
    client_event_id text,
    -- Stored but not folded: a worker event that failed the fencing check (R-L8).
    ignored         boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
CREATE UNIQUE INDEX event_event_id ON event (event_id);
-- Re-posted worker events are found by their client id and answered with the first id.
CREATE UNIQUE INDEX event_client_event_id ON event (execution_id, client_event_id)
    WHERE client_event_id IS NOT NULL;

-- The claim table: the row follows its command to the end.
CREATE TABLE command (
    command_id       text        PRIMARY KEY,
    execution_id     bigint      NOT NULL,
    issued_event_id  bigint      NOT NULL,
    step             text        NOT NULL,
    tool_kind        text        NOT NULL,
    status           text        NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'CLAIMED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')),
    attempt          integer     NOT NULL DEFAULT 1 CHECK (attempt > 0),
    max_attempts     integer     NOT NULL DEFAULT 1 CHECK (max_attempts > 0),
    worker_id        text,
    lease_expires_at timestamptz,
    deadline_at      timestamptz,
    timeout_seconds  integer     NOT NULL DEFAULT 3600 CHECK (timeout_seconds > 0),
    available_at     timestamptz NOT NULL DEFAULT now(),
    context          jsonb       NOT NULL DEFAULT '{}',
    meta             jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
-- GET /api/commands/{event_id} and claim look commands up by the issuing event.
CREATE UNIQUE INDEX command_issued_event_id ON command (issued_event_id);
-- In-flight commands of an execution (cancel, finalize, R-R9).
CREATE INDEX command_execution_active ON command (execution_id)
    WHERE status IN ('PENDING', 'CLAIMED', 'RUNNING');
-- Sweeper: leases that ran out, deadlines that passed (R-L2), retries that are due.
CREATE INDEX command_lease_expiry ON command (lease_expires_at)
    WHERE status IN ('CLAIMED', 'RUNNING');
CREATE INDEX command_deadline ON command (deadline_at)
    WHERE status IN ('CLAIMED', 'RUNNING');
CREATE INDEX command_pending_available ON command (available_at)
    WHERE status = 'PENDING';

-- Transactional outbox of NATS notifications (R-A6). outbox_id carries the shard bits
-- so the internal outbox routes can route by id.
CREATE TABLE outbox (
    outbox_id    bigint      PRIMARY KEY DEFAULT next_id(),
    execution_id bigint      NOT NULL,
    event_id     bigint      NOT NULL,
    subject      text        NOT NULL,
    -- Nats-Msg-Id (command_id:attempt), so JetStream drops re-publishes.
    msg_id       text        NOT NULL,
    payload      jsonb       NOT NULL,
    status       text        NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'PUBLISHED', 'FAILED')),
    attempts     integer     NOT NULL DEFAULT 0,
    available_at timestamptz NOT NULL DEFAULT now(),
    locked_at    timestamptz,
    published_at timestamptz,
    last_error   text        CHECK (char_length(last_error) <= 2000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_pending ON outbox (available_at) WHERE status = 'PENDING';
CREATE INDEX outbox_in_flight ON outbox (locked_at) WHERE status = 'IN_FLIGHT';
CREATE INDEX outbox_published ON outbox (published_at) WHERE status = 'PUBLISHED';

-- Per-iteration and large step results kept out of the snapshot (R-S1).
CREATE TABLE step_result (
    execution_id bigint      NOT NULL,
    -- result: a visit's whole result (idx -1) or one iteration's; item: one item of
    -- a loop's collection, stored when the loop starts (R-S1).
    kind         text        NOT NULL DEFAULT 'result' CHECK (kind IN ('result', 'item')),
    step         text        NOT NULL,
    visit        integer     NOT NULL,
    idx          integer     NOT NULL,
    result       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, kind, step, visit, idx)
);
