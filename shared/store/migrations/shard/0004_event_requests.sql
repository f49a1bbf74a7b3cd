-- Idempotency-Key of POST /api/events and /api/events/batch: the first answer a
-- key got, given again to a repeat of the request (NoETL's workers retry a batch
-- under one key). The cleanup job removes keys older than a day.
CREATE TABLE event_request (
    execution_id    bigint      NOT NULL,
    idempotency_key text        NOT NULL,
    request_hash    text        NOT NULL,
    answer          jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, idempotency_key)
);
CREATE INDEX event_request_created ON event_request (created_at);
