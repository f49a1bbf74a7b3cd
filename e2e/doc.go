// Package e2e holds the end-to-end tests: the whole stack (throwaway Postgres
// with 2 shards, embedded NATS, every function behind the local gateway, real
// workers running real tools) driven over HTTP as users and workers drive it.
package e2e
