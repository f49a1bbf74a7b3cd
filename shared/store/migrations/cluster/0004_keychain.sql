-- Cluster database: the keychain (credentials sealed with envelope encryption,
-- shared/keychain) and the log of every credential read.

CREATE SEQUENCE credential_id_seq AS bigint;

-- A credential's data is never stored in plaintext: ciphertext is the data's
-- JSON under a data key (AES-256-GCM, the name as associated data), and
-- wrapped_key is that data key wrapped by the key ring's key key_id (a key
-- file's key or a KMS key ARN). meta, tags and description are not secret.
CREATE TABLE credential (
    credential_id bigint      PRIMARY KEY DEFAULT nextval('credential_id_seq'),
    name          text        NOT NULL UNIQUE CHECK (name <> ''),
    type          text        NOT NULL CHECK (type <> ''),
    meta          jsonb,
    tags          text[]      NOT NULL DEFAULT '{}',
    description   text,
    key_id        text        NOT NULL,
    wrapped_key   bytea       NOT NULL,
    nonce         bytea       NOT NULL,
    ciphertext    bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE credential_id_seq OWNED BY credential.credential_id;

-- Key rotation finds the rows not sealed under the current key.
CREATE INDEX credential_key ON credential (key_id, credential_id);

-- Every read of one credential (GET /api/credentials/{identifier}): who
-- (scope, a token fingerprint, the worker), which credential, which
-- execution, whether its data was asked for and what was answered. Never the
-- data.
CREATE TABLE credential_read (
    read_id       bigserial   PRIMARY KEY,
    read_at       timestamptz NOT NULL DEFAULT now(),
    name          text        NOT NULL,
    credential_id bigint,
    execution_id  bigint,
    include_data  boolean     NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('served', 'refused', 'not_found')),
    reason        text,
    scope         text        NOT NULL,
    token         text,
    worker_id     text,
    request_id    text
);
CREATE INDEX credential_read_name ON credential_read (name, read_id DESC);
CREATE INDEX credential_read_execution ON credential_read (execution_id, read_id DESC) WHERE execution_id IS NOT NULL;
CREATE INDEX credential_read_time ON credential_read (read_at);
