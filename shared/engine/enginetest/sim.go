// Package enginetest is the engine's simulator: it drives whole playbooks in
// memory with scripted tool results, playing the store (snapshot kept in its
// stored form, stored results, command rows) and the workers (claim, start,
// call.done, completed/failed, lease expiry). Tests use it to run playbooks
// end to end without a database.
package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Reply is a scripted tool outcome for one command attempt.
type Reply struct {
	// Status is the envelope status: success (default), error or timeout.
	Status string
	Data   any
	Error  string
	// Expire makes the worker vanish after claiming: the lease expires instead.
	Expire bool
	// Fail sends command.failed without call.done (a worker-side failure).
	Fail bool
	// Ref posts Data by reference under this URI (result_kind "ref", worker.md
	// §1), as the control plane stores it; the sim's result store holds Data.
	Ref string
}

// Tool answers one command attempt.
type Tool func(cmd *Cmd) Reply

// Cmd is a command row as the simulated store holds it.
type Cmd struct {
	engine.Command
	Status      string // PENDING, CLAIMED, COMPLETED, FAILED, CANCELLED
	AvailableAt time.Time
}

// Sim is one simulated execution.
type Sim struct {
	PB     *playbook.Playbook
	Engine *engine.Engine
	Run    *engine.Run
	// Stored is the snapshot as the store keeps it: bytes, decoded per event.
	Stored []byte
	Log    []engine.Event
	// Results is the step_result table.
	Results  map[engine.ResultKey]any
	Commands map[string]*Cmd
	Clock    time.Time
	// Tools answers commands by step name; Default answers the rest.
	Tools   map[string]Tool
	Default Tool
	// Items answers pipeline items by label: pipeline commands (task_sequence) run
	// through shared/pipeline as the worker runs them, with these as the tools.
	Items map[string]ItemTool
	// Sleeps records the waits of pipeline policy retries (nothing really sleeps).
	Sleeps []time.Duration
	// Rand, when set, picks which ready command runs next (worker interleavings).
	Rand *rand.Rand
	// Observe, when set, sees every Handle call's outcome with the snapshot bytes.
	Observe func(trigger engine.Event, out *engine.Outcome, snapshot []byte)
	// Cached folds each event into a clone of the last snapshot, as the
	// control plane's snapshot cache does, instead of decoding Stored.
	Cached bool
	// last is the last snapshot with its encoding: every snapshot is encoded
	// against it, and must come out as its whole encoding does.
	last   *engine.Encoded
	nextID int64
	// NeedRetries counts Handle calls answered with NeedResultsError.
	NeedRetries int
}

// New parses nothing: it takes a parsed playbook and returns a simulator whose
// clock starts at a fixed instant.
func New(pb *playbook.Playbook, executionID int64) *Sim {
	return &Sim{
		PB: pb, Engine: engine.New(engine.Config{}),
		Run:      &engine.Run{ExecutionID: executionID, CatalogID: 7, Path: pb.Metadata.Path, Version: 1},
		Results:  map[engine.ResultKey]any{},
		Commands: map[string]*Cmd{},
		Clock:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Default:  func(*Cmd) Reply { return Reply{Data: map[string]any{"ok": true}} },
		nextID:   1000,
	}
}

func (s *Sim) newID() int64 { s.nextID++; return s.nextID }

// Start writes playbook.started with the merged workload and runs the engine.
func (s *Sim) Start(payload map[string]any) error {
	wl, err := s.PB.PrepareWorkload(s.Run.ExecutionID, s.Run.CatalogID, payload, s.Clock)
	if err != nil {
		return err
	}
	s.Run.Workload = wl
	return s.Post(engine.Event{Type: eventtype.PlaybookStarted, Status: "STARTED",
		Context: map[string]any{"workload": wl, "path": s.Run.Path}})
}

// Redrive continues the ended execution under pb (version), as the control
// plane does: the completed iterations of loops to resume are read from the
// simulated step_result table, then playbook.redriven is posted.
func (s *Sim) Redrive(pb *playbook.Playbook, version int) error {
	snap := s.Snapshot()
	if err := engine.CheckRedrive(pb, snap); err != nil {
		return err
	}
	r := engine.Redrive{Version: version, CatalogID: s.Run.CatalogID, PreviousVersion: s.Run.Version,
		PreviousStatus: snap.Status, Kept: map[string]engine.KeptIterations{}}
	for step, visit := range engine.ResumableLoops(pb, snap) {
		k := engine.KeptIterations{Visit: visit}
		for key := range s.Results {
			if key.Kind == engine.KindStepResult && key.Step == step && key.Visit == visit && key.Index >= 0 {
				k.Indexes = append(k.Indexes, key.Index)
			}
		}
		if len(k.Indexes) > 0 {
			slices.Sort(k.Indexes)
			r.Kept[step] = k
		}
	}
	entries := engine.NewEntries()
	for _, ev := range s.Log {
		entries.Add(ev)
	}
	entries.Fill(&r, snap)
	s.PB, s.Run.Version = pb, version
	return s.Post(r.Event())
}

// Post appends an event the way ingest does: seq and id assigned, folded with
// Handle, the outcome stored.
func (s *Sim) Post(ev engine.Event) error {
	_, err := s.post(ev)
	return err
}

func (s *Sim) post(ev engine.Event) (*engine.Outcome, error) {
	ev.Seq = int64(len(s.Log)) + 1
	ev.ID = s.newID()
	ev.Time = s.Clock
	in := engine.Inputs{Results: map[engine.ResultKey]any{}, NewID: s.newID}
	var rounds engine.Rounds
	for {
		snap, err := s.snapshot()
		if err != nil {
			return nil, err
		}
		out, err := s.Engine.Handle(s.PB, s.Run, snap, ev, in)
		keys, err := rounds.Next(err)
		if err != nil {
			return nil, err
		}
		if keys != nil {
			s.NeedRetries++
			for _, k := range keys {
				v, ok := s.Results[k]
				if !ok {
					return nil, fmt.Errorf("engine asked for %s, which was never written", k)
				}
				in.Results[k] = v
			}
			continue
		}
		b, err := s.encode(snap)
		if err != nil {
			return nil, err
		}
		s.commit(ev, out, b)
		return out, nil
	}
}

// snapshot is the state an event folds into: Stored decoded, or with Cached
// a clone of the last snapshot.
func (s *Sim) snapshot() (*engine.Snapshot, error) {
	if s.Cached && s.last != nil && bytes.Equal(s.last.Bytes, s.Stored) {
		return s.last.Snapshot().Clone(), nil
	}
	snap, err := engine.UnmarshalSnapshot(s.Stored)
	if err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return snap, nil
}

// encode encodes snap against the last snapshot, and checks that comes out
// as its whole encoding.
func (s *Sim) encode(snap *engine.Snapshot) ([]byte, error) {
	enc, err := snap.Encode(s.last)
	if err != nil {
		return nil, err
	}
	whole, err := snap.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(enc.Bytes, whole) {
		i := 0
		for i < min(len(enc.Bytes), len(whole)) && enc.Bytes[i] == whole[i] {
			i++
		}
		from := max(i-60, 0)
		return nil, fmt.Errorf("the snapshot encoded against the last one differs from its whole encoding at byte %d:\n…%s\n…%s",
			i, enc.Bytes[from:min(i+60, len(enc.Bytes))], whole[from:min(i+60, len(whole))])
	}
	s.last = enc
	return enc.Bytes, nil
}

func (s *Sim) commit(ev engine.Event, out *engine.Outcome, snapshot []byte) {
	s.Stored = snapshot
	s.Log = append(s.Log, ev)
	s.Log = append(s.Log, out.Events...)
	if err := out.Keep(s.Results); err != nil {
		panic(err.Error())
	}
	for _, c := range out.Commands {
		s.Commands[c.ID] = &Cmd{Command: c, Status: "PENDING", AvailableAt: c.AvailableAt}
	}
	for _, r := range out.Retries {
		if c := s.Commands[r.CommandID]; c != nil {
			c.Status, c.Attempt, c.AvailableAt = "PENDING", r.Attempt, r.AvailableAt
		}
	}
	for _, id := range out.Cancelled {
		if c := s.Commands[id]; c != nil {
			c.Status = "CANCELLED"
		}
	}
	if s.Observe != nil {
		s.Observe(ev, out, snapshot)
	}
}

// Snapshot decodes the current snapshot.
func (s *Sim) Snapshot() *engine.Snapshot {
	snap, err := engine.UnmarshalSnapshot(s.Stored)
	if err != nil {
		panic(err)
	}
	return snap
}

// Pending lists claimable commands in id order (issue order within a step).
func (s *Sim) Pending() []*Cmd {
	var out []*Cmd
	for _, c := range s.Commands {
		if c.Status == "PENDING" {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IssuedEventID < out[j].IssuedEventID })
	return out
}

// Step runs one command attempt to its end: claim, start, result, completion. It
// returns false when nothing is pending.
func (s *Sim) Step() (bool, error) {
	pending := s.Pending()
	if len(pending) == 0 {
		return false, nil
	}
	c := pending[0]
	if s.Rand != nil {
		c = pending[s.Rand.IntN(len(pending))]
	}
	if c.AvailableAt.After(s.Clock) {
		s.Clock = c.AvailableAt // wait out the retry backoff
	}
	if err := s.Claim(c, "worker-1"); err != nil {
		return false, err
	}
	return true, s.Finish(c, s.reply(c))
}

// Claim claims a command and posts command.claimed and command.started.
func (s *Sim) Claim(c *Cmd, worker string) error {
	c.Status = "CLAIMED"
	meta := map[string]any{"command_id": c.ID, "attempt": int64(c.Attempt)}
	if err := s.Post(engine.Event{Type: eventtype.CommandClaimed, Step: c.Step, Status: "CLAIMED", CommandID: c.ID, WorkerID: worker, Meta: meta}); err != nil {
		return err
	}
	return s.Post(engine.Event{Type: eventtype.CommandStarted, Step: c.Step, Status: "RUNNING", CommandID: c.ID, WorkerID: worker, Meta: meta})
}

// Finish reports a claimed command's outcome the way workers do.
func (s *Sim) Finish(c *Cmd, r Reply) error {
	meta := map[string]any{"command_id": c.ID, "attempt": int64(c.Attempt)}
	post := func(typ, status string, result any, errText string) error {
		return s.Post(engine.Event{Type: typ, Step: c.Step, Status: status, CommandID: c.ID, WorkerID: "worker-1",
			Meta: meta, Result: result, Error: errText})
	}
	switch {
	case r.Expire:
		c.Status = "EXPIRED"
		return s.Post(engine.Event{Type: eventtype.CommandExpired, Step: c.Step, Status: "EXPIRED", CommandID: c.ID, Meta: meta})
	case r.Fail:
		c.Status = "FAILED"
		return post(eventtype.CommandFailed, "FAILED", nil, r.Error)
	}
	status := r.Status
	if status == "" {
		status = "success"
	}
	// Results cross the wire as JSON: normalise like the API does (R-T10).
	env := map[string]any{"status": status, "data": jsonx.Normalize(r.Data)}
	if r.Error != "" {
		env["error"] = r.Error
	}
	result := map[string]any{"status": status, "context": env}
	if r.Ref != "" {
		s.Results[engine.RefKey(r.Ref)] = env["data"]
		delete(env, "data")
		result["reference"] = map[string]any{"store_tier": "artifact", "logical_uri": r.Ref}
	}
	if err := post(eventtype.CallDone, "COMPLETED", result, ""); err != nil {
		return err
	}
	c.Status = "COMPLETED"
	return post(eventtype.CommandCompleted, status, nil, "")
}

func (s *Sim) reply(c *Cmd) Reply {
	if t, ok := s.Tools[c.Step]; ok {
		return t(c)
	}
	if c.ToolKind == toolkind.TaskSequence && s.Items != nil {
		return s.runPipeline(c)
	}
	return s.Default(c)
}

// ItemTool answers one attempt of one pipeline item.
type ItemTool func(it pipeline.Item) toolresult.Envelope

// runPipeline runs a pipeline command the way the worker does.
func (s *Sim) runPipeline(c *Cmd) Reply {
	payload := jsonx.Clone(c.Payload).(map[string]any) // what crosses the wire is a copy
	if _, err := pipeline.ResolveRefs(context.Background(), payload, s.readRef); err != nil {
		return Reply{Status: "error", Error: err.Error()}
	}
	env := pipeline.Run(context.Background(), payload, pipeline.Options{
		Exec: func(_ context.Context, it pipeline.Item) toolresult.Envelope {
			t, ok := s.Items[it.Label]
			if !ok {
				return toolresult.Envelope{Status: "error", Error: &toolresult.ErrorInfo{Message: "no scripted item " + it.Label, Kind: "tool"}}
			}
			return t(it)
		},
		Sleep: func(_ context.Context, d time.Duration) error { s.Sleeps = append(s.Sleeps, d); return nil },
		Now:   func() time.Time { return s.Clock },
	})
	r := Reply{Status: env.Status, Data: env.Data}
	if env.Error != nil {
		r.Error = env.Error.Message
	}
	return r
}

// readRef reads a result stored by reference, as the worker reads its result
// store.
func (s *Sim) readRef(_ context.Context, uri string) (any, error) {
	v, ok := s.Results[engine.RefKey(uri)]
	if !ok {
		return nil, fmt.Errorf("no result stored at %s", uri)
	}
	return v, nil
}

// RunToEnd runs commands until none is pending, within a bound on attempts.
func (s *Sim) RunToEnd(maxCommands int) error {
	for n := 0; ; n++ {
		if n > maxCommands {
			return fmt.Errorf("still running after %d commands", maxCommands)
		}
		more, err := s.Step()
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// Status is the execution's status.
func (s *Sim) Status() string { return s.Snapshot().Status }

// Types lists the event types of the log, optionally only those for a step.
func (s *Sim) Types(step string) []string {
	var out []string
	for _, e := range s.Log {
		if step == "" || e.Step == step {
			out = append(out, e.Type)
		}
	}
	return out
}

// Count counts events of a type for a step ("" = any step).
func (s *Sim) Count(typ, step string) int {
	n := 0
	for _, e := range s.Log {
		if e.Type == typ && (step == "" || e.Step == step) {
			n++
		}
	}
	return n
}

// Index is the log position of the nth (0-based) event of a type for a step, or -1.
func (s *Sim) Index(typ, step string, nth int) int {
	for i, e := range s.Log {
		if e.Type == typ && e.Step == step {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	return -1
}

// Result is a step's latest result as templates see it.
func (s *Sim) Result(step string) any {
	st := s.Snapshot().Steps[step]
	if st == nil {
		return nil
	}
	if st.ResultRef != nil {
		return s.Results[st.ResultRef.Stored()]
	}
	return st.Result
}

// StepStatus is a step's status ("pending" when never reached).
func (s *Sim) StepStatus(step string) string {
	if st := s.Snapshot().Steps[step]; st != nil {
		return st.Status
	}
	return engine.StepPending
}

// Args returns a command's rendered args (single tools) as a map.
func Args(c *Cmd) map[string]any {
	m, _ := c.Payload["args"].(map[string]any)
	return m
}

// Seqs checks the log's sequence numbers are 1..n, contiguous (R-S4).
func (s *Sim) Seqs() error {
	for i, e := range s.Log {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("event %d (%s) has seq %d", i, e.Type, e.Seq)
		}
	}
	return nil
}

// Replay folds the log with engine.Apply alone, as replay does.
func (s *Sim) Replay() *engine.Snapshot {
	snap := engine.NewSnapshot()
	for _, e := range s.Log {
		engine.Apply(snap, e)
	}
	return snap
}

// SameState compares two snapshots on everything Apply folds (Waiting is the
// decision's own memory and is left out).
func SameState(a, b *engine.Snapshot) error {
	ca, cb := *a, *b
	ca.Waiting, cb.Waiting = nil, nil
	ja, _ := jsonx.Marshal(&ca)
	jb, _ := jsonx.Marshal(&cb)
	if string(ja) != string(jb) {
		return fmt.Errorf("snapshots differ:\nlive:   %s\nfolded: %s", ja, jb)
	}
	return nil
}

// RandomFaults is a tool for randomised schedules: it answers with the command's
// args, but first, at random, fails transiently where the step's retries absorb
// it (an error within retry.max_attempts, a lease expiry within the default three
// attempts, R-L3), so every run still completes. One in oneIn commands is
// considered for a fault.
func RandomFaults(rng *rand.Rand, pb *playbook.Playbook, oneIn int) Tool {
	return func(c *Cmd) Reply {
		switch rng.IntN(oneIn) {
		case 0:
			if c.Attempt < pb.Step(c.Step).Retry.MaxAttempts {
				return Reply{Status: "error", Error: "transient"}
			}
		case 1:
			if c.Attempt < 3 {
				return Reply{Expire: true}
			}
		}
		return Reply{Data: Args(c)}
	}
}
