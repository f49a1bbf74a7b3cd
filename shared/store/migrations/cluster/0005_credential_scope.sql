-- A credential's scope (shared/credscope): the playbooks and pools that may
-- read its data and the hosts our worker may send it to; NULL: none. And the
-- claim a served read was answered for: the command whose step names the
-- credential (its worker is worker_id, taken from the command, never from
-- the request).
ALTER TABLE credential ADD COLUMN scope jsonb;
ALTER TABLE credential_read ADD COLUMN command_id text;
