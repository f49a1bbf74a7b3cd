package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// The playbooks the liveness property drives: a chain with retries, a
// parallel loop, and a step with a short time limit.
var livenessPlaybooks = []string{`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: chain, path: live/chain}
workflow:
  - step: start
    tool: {kind: noop}
    retry: {max_attempts: 3, delay: 0}
    next: middle
  - step: middle
    tool: {kind: noop}
    retry: {max_attempts: 3, delay: 0}
    next: end
  - step: end
    tool: {kind: noop}
`, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan, path: live/fan}
workflow:
  - step: start
    loop: {in: [1, 2, 3], iterator: item, mode: parallel}
    tool: {kind: noop}
    retry: {max_attempts: 2, delay: 0}
    next: end
  - step: end
    tool: {kind: noop}
`, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: limited, path: live/limited}
workflow:
  - step: start
    tool: {kind: noop}
    timeout: 1
    retry: {max_attempts: 2, delay: 0}
`}

// simWorker is a worker of the simulation: the commands it claimed and
// has not reported.
type simWorker struct {
	name string
	gen  int
	held []*controlplane.CommandBody
}

func (w *simWorker) id() string { return w.name + "-" + strconv.Itoa(w.gen) }

// liveness drives a stack through one seeded random schedule of worker
// claims, reports (successes, failures), deaths, pool heartbeats, lost
// notifications, drains, cancels, new executions, NATS outages and
// restarts that lose the stream, and database outages; after every step
// with the database up it checks the liveness invariant (controlplane.Doctor
// names nothing) and that no lease lies past its command's time limit.
// Then it heals everything and requires every execution to end.
type liveness struct {
	t       *testing.T
	s       *stack
	rng     *rand.Rand
	cons    jetstream.Consumer
	workers []*simWorker
	execs   []int64
	dbDown  bool
	natsUp  bool
	admin   *pgx.Conn
	dbNames []string
	log     []string
	// did counts the steps of each kind the schedule took.
	did map[string]int
}

// TestLivenessInvariant: over random interleavings, every running
// execution always has something that will move it, and in the end every
// execution ends. NOETL_LIVENESS_SEED replays one seed.
func TestLivenessInvariant(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if v := os.Getenv("NOETL_LIVENESS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("NOETL_LIVENESS_SEED: %v", err)
		}
		seeds = []uint64{n}
	}
	did := map[string]int{}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			for k, n := range runLiveness(t, seed, 120) {
				did[k] += n
			}
		})
	}
	for _, kind := range []string{"claim", "report", "kill", "expire", "announce again", "cancel", "database outage", "NATS outage", "lost notification"} {
		if did[kind] == 0 && !t.Failed() {
			t.Errorf("the schedules never took a step of kind %q: they do not exercise it", kind)
		}
	}
}

func runLiveness(t *testing.T, seed uint64, steps int) map[string]int {
	const grace = 200 * time.Millisecond
	s := newStack(t, func(c *controlplane.Config) {
		c.Lease, c.DeadlineGrace = 400*time.Millisecond, grace
		c.Reannounce = lifecycle.Reannounce{First: 200 * time.Millisecond, Max: 400 * time.Millisecond}
	})
	for _, pb := range livenessPlaybooks {
		s.register(t, pb)
	}
	admin, err := pgx.Connect(s.ctx, s.pg.Server().AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	l := &liveness{t: t, s: s, rng: rand.New(rand.NewPCG(seed, 28)), natsUp: true, admin: admin, did: map[string]int{}}
	for _, dsn := range append([]string{s.pg.ClusterDSN}, s.pg.ShardDSNs...) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		l.dbNames = append(l.dbNames, strings.TrimPrefix(u.Path, "/"))
	}
	t.Cleanup(func() { l.database(true) })
	for i := range 3 {
		w := &simWorker{name: "w" + strconv.Itoa(i)}
		l.workers = append(l.workers, w)
		l.register(w)
	}
	l.consumer()
	for range 3 {
		l.execute()
	}
	for step := range steps {
		l.act()
		if !l.dbDown {
			l.check(step)
		}
	}
	l.heal()
	t.Logf("seed %d: %d executions; steps taken: %v", seed, len(l.execs), l.did)
	return l.did
}

func (l *liveness) note(format string, args ...any) {
	l.log = append(l.log, fmt.Sprintf(format, args...))
}

// fatal ends the run with the schedule that led here.
func (l *liveness) fatal(format string, args ...any) {
	l.t.Helper()
	tail := l.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	l.t.Fatalf(format+"\nlast steps:\n  %s", append(args, strings.Join(tail, "\n  "))...)
}

func (l *liveness) register(w *simWorker) {
	_, err := l.s.svc.RegisterWorker(l.s.ctx, noetlwire.Registration{Name: w.id(), Pool: notify.PoolShared, Runtime: "go",
		Instance: strconv.Itoa(w.gen)})
	l.note("%s registers: %v", w.id(), err)
}

func (l *liveness) consumer() {
	if !l.natsUp {
		return
	}
	c, err := notify.EnsureConsumer(l.s.ctx, l.s.js, notify.PoolShared)
	if err == nil {
		l.cons = c
	}
}

func (l *liveness) execute() {
	paths := []string{"live/chain", "live/fan", "live/limited"}
	p := paths[l.rng.IntN(len(paths))]
	st, err := l.s.svc.Execute(l.s.ctx, controlplane.ExecuteRequest{Path: p})
	if err == nil {
		l.execs = append(l.execs, st.ExecutionID)
	}
	l.note("execute %s: %v", p, err)
}

// act takes one random step of the schedule.
func (l *liveness) act() {
	w := l.workers[l.rng.IntN(len(l.workers))]
	if l.dbDown && l.rng.IntN(4) == 0 {
		l.database(true) // an outage lasts a few steps
		return
	}
	switch r := l.rng.IntN(100); {
	case r < 25:
		l.take(w, 0.2)
	case r < 45:
		l.report(w, l.rng.IntN(4) == 0)
	case r < 52:
		l.note("%s dies holding %d", w.id(), len(w.held))
		l.did["kill"]++
		w.held, w.gen = nil, w.gen+1
		l.register(w)
	case r < 60:
		_, _, err := l.s.svc.WorkerHeartbeat(l.s.ctx, w.id(), nil)
		l.note("%s pool-beats: %v", w.id(), err)
	case r < 72:
		r, err := l.s.svc.Drain(l.s.ctx, 100)
		l.note("drain: %+v %v", r, err)
		if r != nil {
			l.did["expire"] += r.Expired + r.TimedOut
			l.did["announce again"] += r.Reannounced
		}
	case r < 76:
		if len(l.execs) > 0 {
			id := l.execs[l.rng.IntN(len(l.execs))]
			l.note("cancel %d: %v", id, l.s.svc.Cancel(l.s.ctx, id, "the simulation cancels it"))
			l.did["cancel"]++
		}
	case r < 81:
		l.execute()
	case r < 85:
		l.nats()
	case r < 88:
		if !l.dbDown {
			l.database(false)
		}
	default:
		d := time.Duration(100+l.rng.IntN(300)) * time.Millisecond
		l.note("time passes: %s", d)
		time.Sleep(d)
	}
}

// take fetches notifications for w and claims each; lose is the chance a
// notification is taken and lost (the worker dies before claiming, or drops
// it as a repeat).
func (l *liveness) take(w *simWorker, lose float64) {
	if l.cons == nil || !l.natsUp {
		l.consumer()
		if l.cons == nil {
			return
		}
	}
	batch, err := l.cons.FetchNoWait(5)
	if err != nil {
		l.cons = nil
		return
	}
	for m := range batch.Messages() {
		var b notify.Body
		if jsonUnmarshal(m.Data(), &b) != nil {
			l.t.Fatalf("notification %s", m.Data())
		}
		_ = m.Ack()
		if l.rng.Float64() < lose {
			l.note("%s loses the notification of %s", w.id(), b.CommandID)
			l.did["lost notification"]++
			continue
		}
		body, err := l.s.svc.Claim(l.s.ctx, b.EventID, w.id(), true)
		l.note("%s claims %s: %v", w.id(), b.CommandID, err)
		if err == nil {
			w.held = append(w.held, body)
			l.did["claim"]++
		}
	}
}

// report reports one command w holds: completed, or failed.
func (l *liveness) report(w *simWorker, failed bool) {
	if len(w.held) == 0 {
		return
	}
	i := l.rng.IntN(len(w.held))
	c := w.held[i]
	var err error
	if failed {
		_, err = l.s.svc.Ingest(l.s.ctx, controlplane.EventInput{ExecutionID: c.ExecutionID, Type: "command.failed", Status: "FAILED",
			Step: c.Step, WorkerID: w.id(), Meta: map[string]any{"command_id": c.CommandID, "attempt": int64(c.Attempt)},
			Payload: map[string]any{"error": "the simulation fails it"}})
	} else {
		err = errors.Join(l.s.post(c, w.id(), map[string]any{"ok": true})...)
	}
	l.note("%s reports %s attempt %d (failed %v): %v", w.id(), c.CommandID, c.Attempt, failed, err)
	if err == nil {
		l.did["report"]++
	}
	if err == nil || !store.Transient(err) {
		// Done, or refused for good (fenced, ended): either way not held.
		w.held = append(w.held[:i], w.held[i+1:]...)
	}
}

func (l *liveness) nats() {
	switch {
	case !l.natsUp:
		l.note("NATS up: %v", l.s.nats.Up())
		l.natsUp = true
	case l.rng.IntN(2) == 0:
		l.note("NATS down")
		l.s.nats.Down()
		l.natsUp = false
	default:
		l.note("NATS restarts and loses its stream: %v", l.s.nats.Restart())
	}
	l.cons = nil
	l.did["NATS outage"]++
	for l.natsUp && !l.s.nc.IsConnected() {
		time.Sleep(20 * time.Millisecond)
	}
}

// database takes every database of the stack away (its sessions ended, new
// ones refused) or brings it back.
func (l *liveness) database(up bool) {
	allow := "true"
	if !up {
		allow = "false"
	}
	for _, db := range l.dbNames {
		if _, err := l.admin.Exec(l.s.ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS `+allow); err != nil {
			l.t.Fatal(err)
		}
	}
	if !up {
		if _, err := l.admin.Exec(l.s.ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ANY($1) AND pid <> pg_backend_pid()`, l.dbNames); err != nil {
			l.t.Fatal(err)
		}
	}
	l.dbDown = !up
	if !up {
		l.did["database outage"]++
	}
	l.note("database up: %v", up)
}

// check asserts the invariant: Doctor names nothing, and no held command's
// lease lies past its deadline and grace.
func (l *liveness) check(step int) {
	l.t.Helper()
	found, err := l.s.svc.Doctor(l.s.ctx, 1000)
	if err != nil {
		if store.Transient(err) {
			return // a session the outage ended; the next check runs
		}
		l.fatal("step %d: doctor: %v", step, err)
	}
	if len(found) > 0 {
		l.fatal("step %d: %d execution(s) break the liveness invariant: %d: %s", step, len(found), found[0].ExecutionID, found[0].Reason)
	}
	for i := range l.s.st.NumShards() {
		var n int
		err := l.s.st.Shard(i).Pool().QueryRow(l.s.ctx, `SELECT count(*) FROM command WHERE `+lifecycle.HeldSQL+
			` AND lease_expires_at > deadline_at + $1::interval`, 200*time.Millisecond).Scan(&n)
		if err == nil && n > 0 {
			l.fatal("step %d: %d lease(s) past their command's time limit on shard %d", step, n, i)
		}
	}
}

// heal brings everything back and runs honest workers until every
// execution has ended.
func (l *liveness) heal() {
	l.t.Helper()
	if l.dbDown {
		l.database(true)
	}
	if !l.natsUp {
		l.nats()
	}
	l.consumer()
	for round := 0; ; round++ {
		running := 0
		for _, id := range l.execs {
			v, err := l.s.svc.Execution(l.s.ctx, id)
			if err != nil || !isTerminal(v.Row.Status) {
				running++
			}
		}
		if running == 0 {
			return
		}
		if round == 400 {
			l.fatal("%d execution(s) still running %d rounds after healing", running, round)
		}
		if _, err := l.s.svc.Drain(l.s.ctx, 100); err != nil {
			l.note("drain while healing: %v", err)
		}
		for _, w := range l.workers {
			l.take(w, 0)
			for len(w.held) > 0 {
				l.report(w, false)
			}
		}
		l.check(-round)
		time.Sleep(50 * time.Millisecond)
	}
}

func isTerminal(status string) bool {
	switch status {
	case lifecycle.ExecutionCompleted, lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled:
		return true
	}
	return false
}
