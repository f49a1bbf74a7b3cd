-- The cluster database (noetl) is created from POSTGRES_DB; these are the two
-- shard databases the shard map in init/ready.d names. Migrations are applied
-- by `noetl migrate` (localstack/README.md).
CREATE DATABASE noetl_shard_0;
CREATE DATABASE noetl_shard_1;
