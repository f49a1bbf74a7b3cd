// Package failover holds the end-to-end tests of database outages (issue 23,
// docs/outages.md): each test has a stack of its own whose Postgres it stops,
// crash-restarts or holds in COMMIT, so they run apart from the e2e package's
// shared stack and in parallel with the other packages.
package failover
