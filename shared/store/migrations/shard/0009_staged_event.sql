-- Worker events that decide nothing (command.started, call.done, call.error, and
-- the copies of server-owned events NoETL's workers post), accepted without
-- the execution's lock by one statement (StageEvents): the execution's next
-- transaction enters them into its log, in arrival order, before anything
-- else (seq, fencing, fold), and deletes them here (LockSet.Staged).
CREATE TABLE staged_event (
    arrival         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id    bigint      NOT NULL,
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
    ignored         boolean     NOT NULL DEFAULT false,
    raw_output      boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL
);
CREATE INDEX staged_event_execution ON staged_event (execution_id, arrival);
CREATE UNIQUE INDEX staged_event_event_id ON staged_event (event_id);
CREATE UNIQUE INDEX staged_event_client_event_id ON staged_event (execution_id, client_event_id)
    WHERE client_event_id IS NOT NULL;
