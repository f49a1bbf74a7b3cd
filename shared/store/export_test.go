package store

// OutboxLagSQL lets the tests ask Postgres how it answers OutboxLag's query.
const OutboxLagSQL = outboxLagSQL
