package store

// OutboxLagSQL lets the tests ask Postgres how it answers OutboxLag's query.
const OutboxLagSQL = outboxLagSQL

// OutageMovesLeases reports whether an outage made of errs, once it ends,
// records the shard reachable again (MarkReachable).
func OutageMovesLeases(errs ...error) bool {
	a := newAvailability(nil, nil)
	a.closed.Store(true) // no probe
	for _, err := range errs {
		a.failed(err)
	}
	return !a.heldUp
}
