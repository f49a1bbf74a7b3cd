// Package e2e holds the end-to-end tests: the whole stack (throwaway Postgres
// with 2 shards, embedded NATS, every function behind the local gateway, real
// workers running real tools) driven over HTTP as users and workers drive it.
//
// A test that waits rather than computes calls t.Parallel when it shares
// nothing mutable: a stack of its own, or the shared stack through a pool
// and playbook path of its own. A test that counts what the shared stack
// holds (its rows, its workers), counts round trips, or needs a step to end
// within the 3 s lease under no other load stays serial: the parallel tests
// start only once the serial ones have ended (TestMain sets how many run at
// once).
package e2e
