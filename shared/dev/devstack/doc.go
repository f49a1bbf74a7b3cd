// Package devstack starts throwaway infrastructure for tests and `noetl dev`: a
// Postgres server with a cluster database and N shard databases, and an embedded NATS
// JetStream server. Nothing here belongs in a Lambda binary (it links nats-server).
//
// # Postgres
//
// StartPostgres copies a data directory initdb made once (initdb.go: per
// binaries and user, kept in the base dir as noetl-initdb-<key>) into a temp dir
// and starts `postgres` on a free 127.0.0.1 port (plus a unix socket dir inside
// the temp dir). TCP needs the superuser's password (scram-sha-256): a random
// one per cluster, set at start and carried by every DSN handed out. The socket
// is trust, in a 0700 dir of the server's user. When the process is root the
// server runs as the `postgres` OS user (initdb refuses root). Databases are
// created from template1 (CREATE DATABASE clones a template, so a shard costs
// tens of milliseconds). With PostgresOptions.AdminURL (tests pass
// DATABASE_URL) no server is started: uniquely named databases are created in
// that server and dropped again by Stop.
//
// Cleanup and its limits:
//   - Stop is idempotent; it also runs when the context given to StartPostgres is
//     cancelled. It asks the postmaster for a fast shutdown, escalates to SIGKILL of
//     the server's process group after 15 s, and removes the temp dir.
//   - The server runs in its own process group (so a terminal's Ctrl-C reaches only
//     the owner, which then stops it cleanly) with a parent-death signal: if the
//     owning process is killed (even with SIGKILL) the kernel sends the postmaster
//     SIGINT and it shuts down. Linux delivers that signal when the OS thread that
//     started the server exits; Go only retires threads that a goroutine locked and
//     never unlocked, which nothing here does.
//   - A killed owner cannot remove its temp dir. Every start therefore removes
//     devstack temp dirs (noetl-pg-*, noetl-nats-*) in the same base dir whose owner
//     process is gone, killing a leftover postmaster that still serves such a dir.
//   - Databases created in an external server (AdminURL) by a killed process stay
//     there; their names start with noetl_t.
//
// Halt stops a server it started without removing anything (pg_ctl stop, mode
// fast or immediate: the latter is a crash) and Resume starts it again on the
// same port and data, still as this process's child: tests of database outages
// stop it for a minute, or crash-restart it.
//
// # NATS
//
// StartNATS embeds nats-server with JetStream on a free port and a temp store dir.
// Down and Up stop and restart it on the same port and store, for tests of ingest
// while NATS is unavailable; Shutdown ends it and removes the temp store.
package devstack
