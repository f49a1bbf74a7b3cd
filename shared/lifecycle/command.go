// Package lifecycle owns the command lifecycle: the states a command row
// goes through, the transitions between them and who may cause each, and
// the guards that decide them. Each guard is written here twice, in Go (what
// the control plane decides in memory, under its locks) and in SQL (what
// the store's statements select and update), from the same constants;
// TestGuardsMatchSQL (shared/store) pins each Go guard to its SQL form on a
// real Postgres. Nothing else spells a command status or a lease rule, nor
// an execution status (execution.go), which the guards speak of.
//
//	engine: command.issued
//	       │
//	       ▼        claim (a worker)                  start (the holder)
//	    PENDING ─────────────────────────▶ CLAIMED ─────────────────────▶ RUNNING
//	     ▲  ▲  └──── claim, started (our worker, eager dispatch) ──────────▲
//	     │  │
//	     │  │   held (CLAIMED or RUNNING) ── report (the holder) ──▶ COMPLETED | FAILED
//	     │  │   held ── sweep (Ended) ──▶ EXPIRED, or FAILED when TimedOut
//	     │  └── engine: command.retry (attempt + 1) ◀── EXPIRED | FAILED | held (a reported failure)
//	     └───── drain: announced again (ReannounceDue; the status stays)
//	PENDING | CLAIMED | RUNNING ──▶ CANCELLED: cancel, finalize, the engine failing the run (R-R9)
//
// A held command (CLAIMED or RUNNING) keeps its holder only under a lease,
// and every lease ends: LeaseEnd is where a lease's expiry is decided, for
// the claim, the command heartbeat and the pool heartbeat alike, and it never
// lies past the command's deadline (claimed_at + the step's timeout, R-L2)
// plus the grace. A lease that ends is swept (the drain's lease job, or a
// claim on it, R-L4): past its deadline the command fails with class
// timeout, otherwise it expires; either way the engine applies the step's
// retry policy (R-L3).
package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
)

// The command statuses; the row follows its command to the end.
const (
	Pending   = "PENDING"
	Claimed   = "CLAIMED"
	Running   = "RUNNING"
	Completed = "COMPLETED"
	Failed    = "FAILED"
	Cancelled = "CANCELLED"
	Expired   = "EXPIRED"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []string{Pending, Claimed, Running, Completed, Failed, Cancelled, Expired}

// Actor is who causes a transition.
type Actor string

// The actors of the command lifecycle.
const (
	// Engine issues commands (command.issued), decides retries
	// (command.retry) and cancels pending work when a run fails (R-R9).
	Engine Actor = "engine"
	// Claim is a worker's claim: the claim route, a report's claims, and
	// eager dispatch (a report's answer hands the command over, started).
	Claim Actor = "claim"
	// Start is the holder's command.started.
	Start Actor = "start"
	// Report is the holder's command.completed or command.failed (R-L8).
	Report Actor = "report"
	// Sweep ends a lease that ended (Ended): the drain's lease job, or a
	// claim on it (R-L4).
	Sweep Actor = "sweep"
	// Cancel is cancel and finalize (R-R10).
	Cancel Actor = "cancel"
	// Announce publishes a pending command's notification again
	// (ReannounceDue). It never changes the status.
	Announce Actor = "announce"
)

// Transition is one allowed change of a command's status.
type Transition struct {
	From  []string
	To    string
	By    Actor
	Event string // the event that records it
	Guard string // what must hold, in words
}

var (
	held   = []string{Claimed, Running}
	active = []string{Pending, Claimed, Running}
	// retried are the statuses a retry starts from: a held command whose
	// failure the holder reported (it goes straight back to PENDING), or one
	// a sweep ended.
	retried = []string{Claimed, Running, Expired, Failed}
)

// Transitions are every allowed status change; Check refuses any other.
var Transitions = []Transition{
	{From: nil, To: Pending, By: Engine, Event: eventtype.CommandIssued, Guard: "the execution is running"},
	{From: []string{Pending}, To: Claimed, By: Claim, Event: eventtype.CommandClaimed, Guard: "Claimable: available_at has come; the execution is running"},
	{From: []string{Pending}, To: Running, By: Claim, Event: "command.claimed (started)", Guard: "Claimable; our worker's claim and eager dispatch start it at once"},
	{From: []string{Claimed}, To: Running, By: Start, Event: eventtype.CommandStarted, Guard: "HeldBy the poster (holder and attempt, R-L8)"},
	{From: held, To: Completed, By: Report, Event: eventtype.CommandCompleted, Guard: "HeldBy the poster (R-L8)"},
	{From: held, To: Failed, By: Report, Event: eventtype.CommandFailed, Guard: "HeldBy the poster (R-L8)"},
	{From: held, To: Expired, By: Sweep, Event: "command.expired", Guard: "Ended and not TimedOut"},
	{From: held, To: Failed, By: Sweep, Event: "command.failed {class: timeout}", Guard: "Ended and TimedOut (R-L2)"},
	{From: retried, To: Pending, By: Engine, Event: "command.retry", Guard: "a failure the holder reported, or a sweep, and the step's retry policy has an attempt left (R-L3, R-L6)"},
	{From: active, To: Cancelled, By: Engine, Event: "command.cancelled", Guard: "the execution is failing (R-R9)"},
	{From: active, To: Cancelled, By: Cancel, Event: "playbook.cancelled / a forced end", Guard: "the execution is not terminal (R-R10)"},
}

// Check says whether by may move a command from status from to status to;
// from "" is a row the transaction did not read (the engine cancelling a
// command it knows from its snapshot), which any allowed target accepts.
// Staying in a status is no transition (a claim's holder claiming again).
func Check(from, to string, by Actor) error {
	if from == to && from != "" {
		return nil
	}
	for _, t := range Transitions {
		if t.To == to && t.By == by && (from == "" || slices.Contains(t.From, from)) {
			return nil
		}
	}
	return fmt.Errorf("lifecycle: %s may not move a command from %s to %s", by, orNone(from), to)
}

func orNone(s string) string {
	if s == "" {
		return "(new)"
	}
	return s
}

// Row is what the guards read of a command row.
type Row struct {
	Status         string
	WorkerID       string
	Attempt        int
	LeaseExpiresAt time.Time // zero: NULL
	DeadlineAt     time.Time // zero: NULL
	AvailableAt    time.Time
	AnnouncedAt    time.Time // zero: NULL (never announced again)
}

// Clock is what a guard compares a row with: the database's clock, and
// since when the database is reachable (its start, or the end of an outage
// a server process saw).
type Clock struct {
	Now            time.Time
	ReachableSince time.Time
}

// Limits are the server's lease settings.
type Limits struct {
	// Lease is a lease's length (R-L1), and also the quiet time after the
	// database becomes reachable again during which no lease ends: no
	// holder could heartbeat meanwhile.
	Lease time.Duration
	// Grace is added to a deadline before the command is failed for it: a
	// worker that enforces the timeout itself reports first (R-L2).
	Grace time.Duration
}

// The SQL forms. They read the columns of the command table unqualified, and
// the database's clock as now() (the transaction's start).

// in is `status IN ('A', 'B')`.
func in(statuses []string) string {
	return "status IN ('" + strings.Join(statuses, "', '") + "')"
}

// Held: the command is CLAIMED or RUNNING, so it has a holder and a lease.
func Held(r Row) bool { return slices.Contains(held, r.Status) }

// HeldSQL is Held in SQL.
var HeldSQL = in(held)

// Active: the command has not ended (PENDING, CLAIMED or RUNNING).
func Active(r Row) bool { return slices.Contains(active, r.Status) }

// ActiveSQL is Active in SQL.
var ActiveSQL = in(active)

// HeldBy: the command is held by worker, at attempt unless attempt is 0
// (NoETL's workers name no attempt): the fence of R-L8. No worker id holds
// nothing.
func HeldBy(r Row, worker string, attempt int) bool {
	return Held(r) && worker != "" && r.WorkerID == worker && (attempt == 0 || r.Attempt == attempt)
}

// HeldBySQL is HeldBy in SQL; worker and attempt are placeholders.
func HeldBySQL(worker, attempt string) string {
	return HeldSQL + " AND worker_id = " + worker + " AND (" + attempt + "::int = 0 OR attempt = " + attempt + "::int)"
}

// Live: held by a worker under a lease that has not run out, the claim
// whose holder may read its step's credentials (issue 33).
func Live(r Row, c Clock) bool {
	return Held(r) && r.WorkerID != "" && r.LeaseExpiresAt.After(c.Now)
}

// LiveSQL is Live in SQL.
var LiveSQL = HeldSQL + " AND worker_id IS NOT NULL AND worker_id <> '' AND lease_expires_at > now()"

// Claimable: a pending command whose available_at has come (R-L7).
func Claimable(r Row, c Clock) bool { return r.Status == Pending && !r.AvailableAt.After(c.Now) }

// ClaimableSQL is Claimable in SQL.
var ClaimableSQL = "status = '" + Pending + "' AND available_at <= now()"

// quiet: the database has been reachable for a lease, so a holder had the
// time to heartbeat since it came back.
func quiet(c Clock, l Limits) bool { return !c.Now.Before(c.ReachableSince.Add(l.Lease)) }

// ReachableSinceSQL is when the database became reachable: its start (a
// restart, a crash) or the end of an outage a server process saw
// (store.MarkReachable), whichever is later.
const ReachableSinceSQL = `(SELECT greatest(pg_postmaster_start_time(), reachable_since) FROM shard_info WHERE singleton)`

func quietSQL(lease string) string {
	return "now() >= " + ReachableSinceSQL + " + " + lease + "::interval"
}

// TimedOut: a held command's deadline plus the grace has passed (R-L2).
func TimedOut(r Row, c Clock, l Limits) bool {
	return Held(r) && !r.DeadlineAt.IsZero() && !r.DeadlineAt.Add(l.Grace).After(c.Now)
}

// TimedOutSQL is TimedOut in SQL; grace is a placeholder of an interval.
func TimedOutSQL(grace string) string {
	return HeldSQL + " AND " + timedOutSQL(grace)
}

func timedOutSQL(grace string) string {
	return "deadline_at <= now() - " + grace + "::interval"
}

// Ended: a held command's lease is over and its holder loses it: the lease
// ran out (LeaseEnd; a held row without one has none to keep) or the
// deadline plus the grace passed, and not within a lease of the database
// becoming reachable (the holder could not heartbeat meanwhile; it reports
// first, and R-L8 accepts it).
func Ended(r Row, c Clock, l Limits) bool {
	return Held(r) && (!r.LeaseExpiresAt.After(c.Now) || TimedOut(r, c, l)) && quiet(c, l)
}

// EndedSQL is Ended in SQL; lease and grace are placeholders of intervals.
func EndedSQL(lease, grace string) string {
	return HeldSQL + " AND (lease_expires_at IS NULL OR lease_expires_at <= now() OR " + timedOutSQL(grace) + ") AND " + quietSQL(lease)
}

// LeaseEnd is where a lease's expiry is decided: a claim or a heartbeat of
// any kind at now keeps the command until now + the lease, never past its
// deadline plus the grace (the step's time limit, R-L2).
func LeaseEnd(now, deadline time.Time, l Limits) time.Time {
	end := now.Add(l.Lease)
	if !deadline.IsZero() && deadline.Add(l.Grace).Before(end) {
		return deadline.Add(l.Grace)
	}
	return end
}

// LeaseEndSQL is LeaseEnd in SQL, at now() for the row's deadline_at.
func LeaseEndSQL(lease, grace string) string {
	return "least(now() + " + lease + "::interval, deadline_at + " + grace + "::interval)"
}

// Deadline is a claim's deadline: claimed_at + the step's timeout (R-L2).
func Deadline(claimedAt time.Time, timeoutSeconds int) time.Time {
	return claimedAt.Add(time.Duration(max(timeoutSeconds, 1)) * time.Second)
}

// Announcing a pending command again. A notification can be lost (NATS
// restarted without its stream, a worker took it and died before claiming,
// NoETL's worker dropped it as a repeat): a pending command is announced
// again, under a message id of its own (notify.AgainMsgID), after Reannounce
// since it became claimable, then after as long again as it has waited,
// at most Reannounce.Max apart.

// Reannounce is when a pending command is announced again.
type Reannounce struct {
	First time.Duration // after it became claimable
	Max   time.Duration // the longest gap between two announcements
}

// DefaultReannounce is the server's default: 10 s, then doubling to a
// minute.
var DefaultReannounce = Reannounce{First: 10 * time.Second, Max: time.Minute}

// ReannounceDue: a claimable pending command was announced last (or became
// claimable) long enough ago.
func ReannounceDue(r Row, c Clock, a Reannounce) bool {
	if !Claimable(r, c) {
		return false
	}
	last := r.AvailableAt
	if r.AnnouncedAt.After(last) {
		last = r.AnnouncedAt
	}
	gap := min(max(last.Sub(r.AvailableAt), a.First), a.Max)
	return !c.Now.Before(last.Add(gap))
}

// ReannounceDueSQL is ReannounceDue in SQL; first and max are placeholders
// of intervals.
func ReannounceDueSQL(first, maxGap string) string {
	last := "greatest(available_at, coalesce(announced_at, available_at))"
	return ClaimableSQL + " AND now() >= " + last + " + least(greatest(" + last + " - available_at, " + first +
		"::interval), " + maxGap + "::interval)"
}

// Stale: what should have moved the command has not run for overdue: a
// claimable pending command announced last (or claimable since) longer ago,
// or a held command whose lease ended longer ago (or that has none). The
// drain announces again and ends leases well within that; a stale command
// says the drain is not running.
func Stale(r Row, c Clock, overdue time.Duration) bool {
	switch {
	case Claimable(r, c):
		last := r.AvailableAt
		if r.AnnouncedAt.After(last) {
			last = r.AnnouncedAt
		}
		return !last.Add(overdue).After(c.Now)
	case Held(r):
		return r.LeaseExpiresAt.IsZero() || !r.LeaseExpiresAt.Add(overdue).After(c.Now)
	}
	return false
}

// StaleSQL is Stale in SQL; overdue is a placeholder of an interval.
func StaleSQL(overdue string) string {
	return "((" + ClaimableSQL + " AND greatest(available_at, coalesce(announced_at, available_at)) <= now() - " + overdue +
		"::interval) OR (" + HeldSQL + " AND (lease_expires_at IS NULL OR lease_expires_at <= now() - " + overdue + "::interval)))"
}
