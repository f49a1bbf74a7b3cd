-- Cluster database: the versioned playbook catalog.

-- Catalog ids come from one cluster-wide sequence (R-I1); they carry no shard bits.
CREATE SEQUENCE catalog_id_seq AS bigint;

CREATE TABLE catalog (
    catalog_id   bigint      PRIMARY KEY DEFAULT nextval('catalog_id_seq'),
    path         text        NOT NULL CHECK (path <> ''),
    version      integer     NOT NULL CHECK (version > 0),
    kind         text        NOT NULL,
    content      text        NOT NULL,
    content_hash text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE catalog_id_seq OWNED BY catalog.catalog_id;

-- Uniqueness of (path, version), and in (path, version DESC) order so "latest version
-- of a path" and "list by path, newest first" are forward index scans.
CREATE UNIQUE INDEX catalog_path_version ON catalog (path, version DESC);
