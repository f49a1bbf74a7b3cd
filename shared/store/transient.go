package store

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// What a database outage looks like to a caller, written once: the API
// answers these errors 503 with Retry-After, the control plane retries a
// transaction that failed with one before its COMMIT was sent, and the
// availability tracker (availability.go) logs an outage's start and end.

// ErrCommitInDoubt: the connection failed while COMMIT was in flight, so
// whether the transaction committed is not known from the answer. The
// caller resolves it by reading what the transaction wrote (see
// EventIDAt); an unresolved doubt is Transient.
var ErrCommitInDoubt = errors.New("the outcome of COMMIT is unknown: the connection failed while it was in flight")

// Transient reports whether err is the database being unavailable for a
// while, so the same request can succeed later: it could not be reached, a
// connection was lost, the server is shutting down or starting up, a
// failover made it read-only, it has no connection slot free, or a
// serialization failure or deadlock aborted the transaction. Validation
// errors, missing rows, constraint violations and our own bugs are not; nor
// is the caller's context ending (the caller left or ran out of time).
func Transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrCommitInDoubt):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return ConnectionLost(err) || conflictAborted(err) || errorClass(err) == classUnavailable
}

// Retryable reports whether a transaction that failed with err, before its
// COMMIT was sent, can simply run again: nothing of it was committed, and
// the cause (a lost connection, a serialization failure, a deadlock) may
// not recur.
func Retryable(err error) bool {
	return Transient(err) && !errors.Is(err, ErrCommitInDoubt)
}

// ConnectionLost reports whether err means the connection (or the attempt to
// make one) failed: the server cannot be reached, closed the connection, or
// ended the session (shutdown, crash, termination). Every other connection
// of the pool is then suspect too.
func ConnectionLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller left or ran out of time: the database may be fine
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if c := errorClass(err); c == classConnection {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// pgconn's "conn closed" (a connection already dead when used) carries
	// no exported type; it is safe to retry, as nothing was sent.
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && pgconn.SafeToRetry(err)
}

// Failover reports whether err says the server is no longer the writer
// (Aurora's old writer after a failover answers read-only): the pool must
// dial again, since the writer endpoint now names another instance.
func Failover(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006" // read_only_sql_transaction
}

// conflictAborted: a serialization failure or a deadlock ended the
// transaction; running it again usually succeeds.
func conflictAborted(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

type sqlClass int

const (
	classOther       sqlClass = iota
	classConnection           // the session ended or the server is going away
	classUnavailable          // the server is up but cannot serve this now
)

// errorClass sorts the SQLSTATEs of an outage.
func errorClass(err error) sqlClass {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return classOther
	}
	switch {
	case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection_exception
		return classConnection
	case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P05": // admin/crash shutdown, idle session timeout
		return classConnection
	case pgErr.Code == "57P03", pgErr.Code == "53300", pgErr.Code == "25006": // starting up or in recovery, no slots, read-only after a failover
		return classUnavailable
	}
	return classOther
}
