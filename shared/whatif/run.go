package whatif

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools/noop"
	"github.com/noetl-go/noetl/shared/wire"
)

// Version is the new version a what-if runs.
type Version struct {
	PB        *playbook.Playbook
	CatalogID int64 // 0: content not registered
	Version   int
}

// Loader reads values a recorded execution keeps outside its log: results a
// worker stored by reference (engine.KindReference) and step results too
// large for an event (engine.KindStepResult). It only reads.
type Loader func(ctx context.Context, executionID int64, keys []engine.ResultKey) (map[engine.ResultKey]any, error)

// Runner runs what-ifs. It holds configuration only and is safe for
// concurrent use.
type Runner struct {
	Engine *engine.Engine
	// Load reads recorded values; nil: a record needing one is an error.
	Load Loader
	// MaxEvents bounds one simulated run (a cycle the new version never
	// leaves); 0: ten times the recorded log, at least 10,000.
	MaxEvents int
}

// errLive stops a simulated run at a command no record answers.
type errLive struct {
	step, why string
}

func (e *errLive) Error() string { return e.step + ": " + e.why }

// sim is one simulated run of the new version over a recording.
type sim struct {
	ctx    context.Context
	r      *Runner
	v      Version
	rec    Record
	rc     *recording
	run    *engine.Run
	snap   *engine.Snapshot
	log    []engine.Event
	values map[engine.ResultKey]any // what the run wrote, and recorded values loaded
	used   map[cmdKey]int           // recorded commands of a key already matched
	queue  []*pending
	nextID int64
	// per step: how its commands were answered
	answered map[string]string // step → replayed | engine
	live     *errLive
}

// pending is a command of the simulated run waiting for its answer.
type pending struct {
	cmd   engine.Command
	rec   *recorded // nil: computed (no side effect)
	order int64     // the recorded end's seq: answers follow the recorded interleaving
}

// Execution runs the new version over one recorded execution and compares
// the two.
func (r *Runner) Execution(ctx context.Context, v Version, rec Record) (wire.WhatIfExecution, error) {
	s := &sim{ctx: ctx, r: r, v: v, rec: rec, rc: index(rec), values: map[engine.ResultKey]any{},
		used: map[cmdKey]int{}, answered: map[string]string{}, nextID: 1}
	out := wire.WhatIfExecution{ExecutionID: wire.ID(rec.ExecutionID), RecordedVersion: rec.Version,
		RecordedStatus: rec.Status, Steps: []wire.WhatIfStep{}}
	if s.rc.started == nil {
		return out, fmt.Errorf("execution %d: its log has no playbook.started", rec.ExecutionID)
	}
	if err := s.drive(); err != nil {
		var live *errLive
		if !errors.As(err, &live) {
			return out, fmt.Errorf("execution %d: %w", rec.ExecutionID, err)
		}
		s.live = live
	}
	return s.compare(out)
}

func (s *sim) id() int64 { s.nextID++; return s.nextID }

// drive starts the run and answers commands until it ends or a command has
// no record.
func (s *sim) drive() error {
	st := s.rc.started
	wl, _ := st.Context["workload"].(map[string]any)
	// The recorded workload, with defaults the new version adds for keys it
	// did not have.
	workload := maps.Clone(wl)
	if workload == nil {
		workload = map[string]any{}
	}
	for k, d := range s.v.PB.Workload {
		if _, ok := workload[k]; !ok {
			workload[k] = d
		}
	}
	s.run = &engine.Run{ExecutionID: s.rec.ExecutionID, CatalogID: s.v.CatalogID, Path: s.v.PB.Metadata.Path,
		Version: s.v.Version, Workload: workload}
	s.run.ParentExecutionID = int64(jsonx.Int(st.Context["parent_execution_id"]))
	s.snap = engine.NewSnapshot()
	ctx := maps.Clone(st.Context)
	ctx["workload"], ctx["version"] = workload, int64(s.v.Version)
	ctx["catalog_id"] = fmt.Sprint(s.v.CatalogID)
	if err := s.post(engine.Event{Type: eventtype.PlaybookStarted, Status: "STARTED", Context: ctx, Time: st.Time}); err != nil {
		return err
	}
	limit := s.r.MaxEvents
	if limit <= 0 {
		limit = max(10*len(s.rec.Events), 10000)
	}
	for !s.snap.Terminal() {
		if len(s.log) > limit {
			return &errLive{why: fmt.Sprintf("the new version ran %d events without ending (the record has %d)", len(s.log), len(s.rec.Events))}
		}
		if len(s.queue) == 0 {
			return &errLive{why: "the new version would wait with no command to answer"}
		}
		next := s.queue[0]
		s.queue = s.queue[1:]
		if err := s.answer(next); err != nil {
			return err
		}
	}
	return nil
}

// post folds an event with the engine, as ingest does, and queues the
// commands it issues.
func (s *sim) post(ev engine.Event) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	ev.Seq, ev.ID = s.snap.Seq+1, s.id()
	in := engine.Inputs{Results: s.values, NewID: s.id}
	var keep *engine.Snapshot
	var rounds engine.Rounds
	for round := 0; ; round++ {
		if round > 0 || s.mayNeed() {
			keep = s.snap.Clone()
		}
		out, err := s.r.Engine.Handle(s.v.PB, s.run, s.snap, ev, in)
		keys, err := rounds.Next(err)
		if err != nil {
			return err
		}
		if keys != nil {
			if err := s.load(keys); err != nil {
				return err
			}
			if keep == nil {
				return fmt.Errorf("the engine asked for %v with no copy kept", keys)
			}
			s.snap = keep
			continue
		}
		s.log = append(s.log, ev)
		s.log = append(s.log, out.Events...)
		if err := out.Keep(s.values); err != nil {
			return err
		}
		for _, c := range out.Commands {
			if err := s.issued(c); err != nil {
				return err
			}
		}
		for _, r := range out.Retries {
			if err := s.retried(r); err != nil {
				return err
			}
		}
		for _, id := range out.Cancelled {
			s.queue = deleteFunc(s.queue, func(p *pending) bool { return p.cmd.ID == id })
		}
		return nil
	}
}

// mayNeed: the record holds values outside its log, which the engine may
// ask for mid-decision; the snapshot is copied before each decision then.
func (s *sim) mayNeed() bool { return s.rc.refs }

func (s *sim) load(keys []engine.ResultKey) error {
	if s.r.Load == nil {
		return fmt.Errorf("the record keeps %v outside its log and nothing reads it", keys)
	}
	got, err := s.r.Load(s.ctx, s.rec.ExecutionID, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		v, ok := got[k.Stored()]
		if !ok {
			return fmt.Errorf("recorded %s is missing", k)
		}
		s.values[k] = v
		s.values[k.Stored()] = v
	}
	return nil
}

// issued matches a new command with the recorded one of the same step, visit
// and iteration: the same tool and rendered input. A command with no side
// effect needs no record.
func (s *sim) issued(c engine.Command) error {
	step := s.v.PB.Step(c.Step)
	free := step != nil && pure(step)
	key := cmdKey{step: c.Step, visit: c.Visit, index: c.Index}
	n := s.used[key]
	recs := s.rc.cmds[key]
	why := "no recorded command " + where(key)
	if n < len(recs) {
		rec := recs[n]
		s.used[key] = n + 1
		switch d := firstDiff("", comparable(rec.payload), comparable(c.Payload)); {
		case rec.kind != c.ToolKind:
			why = fmt.Sprintf("the tool changed: recorded %s, now %s", rec.kind, c.ToolKind)
		case d != "":
			why = "the command's input changed " + where(key) + ": " + d
		default:
			// What the worker answered, even to a command without side
			// effects: its answer is the record.
			if free {
				s.mark(c.Step, wire.VerdictEngine)
			} else {
				s.mark(c.Step, wire.VerdictReplayed)
			}
			return s.queueAttempt(c, rec)
		}
	}
	if free {
		s.queue = append(s.queue, &pending{cmd: c})
		s.mark(c.Step, wire.VerdictEngine)
		return nil
	}
	return &errLive{step: c.Step, why: why}
}

// retried queues the next attempt of a command whose attempt failed.
func (s *sim) retried(r engine.RetryOrder) error {
	c, rec := s.inFlight(r.CommandID)
	if c == nil {
		return fmt.Errorf("retry of unknown command %s", r.CommandID)
	}
	c.Attempt = r.Attempt
	if rec == nil {
		s.queue = append(s.queue, &pending{cmd: *c})
		return nil
	}
	return s.queueAttempt(*c, rec)
}

func (s *sim) queueAttempt(c engine.Command, rec *recorded) error {
	if c.Attempt > len(rec.attempts) || rec.attempts[c.Attempt-1].end == nil {
		if step := s.v.PB.Step(c.Step); step != nil && pure(step) {
			s.queue = append(s.queue, &pending{cmd: c})
			return nil
		}
		at := where(cmdKey{c.Step, c.Visit, c.Index})
		why := fmt.Sprintf("attempt %d %s was never run: the new version tries again where the record stopped", c.Attempt, at)
		if c.Attempt <= len(rec.attempts) {
			why = fmt.Sprintf("attempt %d %s never ended in the record", c.Attempt, at)
		}
		return &errLive{step: c.Step, why: why}
	}
	p := &pending{cmd: c, rec: rec, order: rec.attempts[c.Attempt-1].end.Seq}
	// Keep the queue in the recorded order of the answers; computed answers
	// (order 0) go first.
	i := sort.Search(len(s.queue), func(i int) bool { return s.queue[i].order > p.order })
	s.queue = append(s.queue, nil)
	copy(s.queue[i+1:], s.queue[i:])
	s.queue[i] = p
	return nil
}

// inFlight finds a command of the run by id: the last issued with it.
func (s *sim) inFlight(id string) (*engine.Command, *recorded) {
	for i := len(s.log) - 1; i >= 0; i-- {
		ev := s.log[i]
		if ev.CommandID != id || eventtype.Canonical(ev.Type) != eventtype.CommandIssued {
			continue
		}
		c := &engine.Command{ID: id, IssuedEventID: ev.ID, Step: ev.Step, Visit: jsonx.Int(ev.Meta["visit"]), Index: -1,
			ToolKind: ev.NodeType, Payload: ev.Context, Meta: ev.Meta}
		if _, ok := ev.Meta["iteration_index"]; ok {
			c.Index = jsonx.Int(ev.Meta["iteration_index"])
		}
		key := cmdKey{c.Step, c.Visit, c.Index}
		if n := s.used[key]; n > 0 && n <= len(s.rc.cmds[key]) {
			return c, s.rc.cmds[key][n-1]
		}
		return c, nil
	}
	return nil, nil
}

// answer posts a command's outcome: the recorded attempt's events, or the
// computed result of a command with no side effect.
func (s *sim) answer(p *pending) error {
	meta := map[string]any{"command_id": p.cmd.ID, "attempt": int64(p.cmd.Attempt)}
	if p.rec == nil {
		env := compute(p.cmd, s.trigTime())
		status := "success"
		if env.Status != toolresult.StatusSuccess {
			status = env.Status
		}
		return s.post(engine.Event{Type: eventtype.CommandCompleted, Step: p.cmd.Step, Status: status, CommandID: p.cmd.ID,
			Meta: meta, Result: map[string]any{"status": status, "context": env.Map()}, Time: s.trigTime()})
	}
	a := p.rec.attempts[p.cmd.Attempt-1]
	for _, ev := range []*engine.Event{a.call, a.end} {
		if ev == nil {
			continue
		}
		m := maps.Clone(ev.Meta)
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, meta)
		if err := s.post(engine.Event{Type: ev.Type, Step: p.cmd.Step, Status: ev.Status, CommandID: p.cmd.ID, Meta: m,
			Context: ev.Context, Result: ev.Result, Error: ev.Error, WorkerID: ev.WorkerID, Time: ev.Time}); err != nil {
			return err
		}
		if s.snap.Terminal() {
			return nil
		}
	}
	return nil
}

// trigTime is the time of the run's latest event: computed answers take it.
func (s *sim) trigTime() time.Time {
	if len(s.log) == 0 {
		return s.rc.started.Time
	}
	return s.log[len(s.log)-1].Time
}

func (s *sim) mark(step, verdict string) {
	if s.answered[step] != wire.VerdictReplayed {
		s.answered[step] = verdict
	}
}

// pure reports whether a step's commands have no side effect: a noop, or a
// pipeline of noops. The what-if computes their answers.
func pure(step *playbook.Step) bool {
	if step.Tool != nil {
		return step.Tool.Kind == toolkind.Noop
	}
	for _, it := range step.Pipeline {
		if it.Tool == nil || it.Tool.Kind != toolkind.Noop {
			return false
		}
	}
	return len(step.Pipeline) > 0
}

// compute answers a command with no side effect as the worker would.
func compute(c engine.Command, now time.Time) toolresult.Envelope {
	if c.ToolKind != toolkind.TaskSequence {
		cfg, _ := c.Payload["tool_config"].(map[string]any)
		config := make(map[string]any, len(cfg))
		for k, v := range cfg {
			if k != "args" && k != "input" {
				config[k] = v
			}
		}
		return noop.Run(config)
	}
	return pipeline.Run(context.Background(), c.Payload, pipeline.Options{
		Exec:  func(_ context.Context, it pipeline.Item) toolresult.Envelope { return noop.Run(it.Config) },
		Sleep: func(context.Context, time.Duration) error { return nil },
		Now:   func() time.Time { return now },
	})
}

// comparable is a command's payload as two versions' commands compare: what
// the tool receives, without what names the version (catalog_id) or is the
// engine's bookkeeping (visit, timeout).
func comparable(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		switch k {
		case "visit", "timeout_seconds", "step":
			continue
		case "render_context":
			if rc, ok := v.(map[string]any); ok {
				rc = maps.Clone(rc)
				delete(rc, "catalog_id")
				v = rc
			}
		}
		out[k] = v
	}
	return out
}

func where(k cmdKey) string {
	s := fmt.Sprintf("(visit %d", k.visit)
	if k.index >= 0 {
		s += fmt.Sprintf(", iteration %d", k.index)
	}
	return s + ")"
}

func deleteFunc(q []*pending, del func(*pending) bool) []*pending {
	out := q[:0]
	for _, p := range q {
		if !del(p) {
			out = append(out, p)
		}
	}
	return out
}
