package controlplane

import (
	"errors"
	"fmt"
	"time"
)

// Error kinds. The API maps them to HTTP statuses; messages name the field or the
// object concerned.
var (
	ErrNotFound = errors.New("not found")       // 404
	ErrConflict = errors.New("conflict")        // 409
	ErrInvalid  = errors.New("invalid request") // 422
	// ErrForbidden: the caller may not have what it asked for (credential
	// data outside a running execution's worker).
	ErrForbidden = errors.New("forbidden") // 403
	// ErrUnavailable: the server lacks what the request needs (a keychain
	// key); the message names the setting.
	ErrUnavailable = errors.New("unavailable") // 503
	// ErrNotConfigured: the server was given no result store. Not a 503:
	// asking again gets the same answer, so no client may wait for it as
	// for an outage (our worker fails the step with the message).
	ErrNotConfigured = errors.New("not configured") // 501
)

// Errorf wraps a kind with a message: errors.Is(err, kind) holds and Error() is
// the message alone.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// TooEarlyError answers a claim before a retry's backoff ended (R-L7): 429 with
// Retry-After.
type TooEarlyError struct{ After time.Duration }

func (e *TooEarlyError) Error() string {
	return fmt.Sprintf("the command is not claimable yet: its retry is due in %s", e.After.Round(time.Millisecond))
}

// RefusedClaim is a claim refused with 409; Code is NoETL's reason code, which
// NoETL's workers read (detail.code) to ack the notification and skip it:
// active_claim (a worker holds the command), already_terminal (the command or
// its execution is over), execution_cancelled.
type RefusedClaim struct {
	Code   string
	Reason string
}

func (e *RefusedClaim) Error() string { return e.Reason }
func (e *RefusedClaim) Unwrap() error { return ErrConflict }

// Claim refusal codes (NoETL's).
const (
	ClaimActive             = "active_claim"
	ClaimTerminal           = "already_terminal"
	ClaimExecutionCancelled = "execution_cancelled"
)

func refuse(code, format string, args ...any) *RefusedClaim {
	return &RefusedClaim{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// InvalidPlaybookError lists every problem of a playbook rejected at registration.
type InvalidPlaybookError struct {
	Problems []string
}

func (e *InvalidPlaybookError) Error() string {
	return fmt.Sprintf("the playbook is invalid (%d problems): %s", len(e.Problems), joinProblems(e.Problems))
}

func (e *InvalidPlaybookError) Unwrap() error { return ErrInvalid }

func joinProblems(ps []string) string {
	out := ""
	for i, p := range ps {
		if i > 0 {
			out += "; "
		}
		out += p
	}
	return out
}

func isConflict(err error) bool { return errors.Is(err, ErrConflict) }

// isKnown reports whether err is an answer about the request (a kind above)
// rather than a failure of the server.
func isKnown(err error) bool {
	for _, k := range []error{ErrNotFound, ErrConflict, ErrInvalid, ErrForbidden} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
