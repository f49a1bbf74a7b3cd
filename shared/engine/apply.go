package engine

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Apply folds one event into the snapshot. It is total: events it does not know,
// or that refer to commands no longer in flight, change nothing but the sequence.
// Apply makes no decisions beyond bookkeeping; Handle decides and emits events,
// and those events are folded here too, so the snapshot is always the fold of the
// log (replay checks this).
func Apply(s *Snapshot, ev Event) {
	if ev.Seq > s.Seq {
		s.Seq = ev.Seq
	}
	switch eventtype.Canonical(ev.Type) {
	case eventtype.PlaybookStarted:
		s.Status = lifecycle.ExecutionRunning
		s.StartedAt = ev.Time
	case eventtype.StepEnter:
		applyEnter(s, ev)
	case eventtype.StepSkipped:
		st := s.step(ev.Step)
		clearLedger(s, st)
		st.Status, st.Bound, st.Result, st.ResultRef, st.Error = StepSkipped, true, nil, nil, ""
		st.ExitedAt = ev.Time
	case eventtype.StepExit:
		applyExit(s, ev)
	case eventtype.StepRerouted:
		applyFired(s, ev.Step, ev.Context["fired"])
	case eventtype.CtxUpdated:
		values, _ := ev.Context["values"].(map[string]any)
		if len(values) > 0 {
			w := newPathWriter(s.Ctx, len(values))
			for _, k := range slices.Sorted(maps.Keys(values)) {
				w.set(k, values[k])
			}
			s.Ctx = w.out
		}
	case eventtype.CommandIssued:
		applyIssued(s, ev)
	case eventtype.CommandClaimed:
		if c := s.Commands[commandID(ev)]; c != nil {
			c.Status, c.Worker = CmdClaimed, ev.WorkerID
			// A claim that records the start too (our worker's, and eager
			// dispatch) is followed by no command.started.
			if started, _ := ev.Meta["started"].(bool); started {
				c.Status = CmdRunning
			}
			if a := jsonx.Int(ev.Meta["attempt"]); a > 0 {
				c.Attempt = a
			}
		}
	case eventtype.CommandStarted:
		if c := s.Commands[commandID(ev)]; c != nil && c.Status != CmdRetrying {
			c.Status = CmdRunning
		}
	case eventtype.CallDone, eventtype.CallError:
		if c := s.Commands[commandID(ev)]; c != nil {
			c.Envelope = envelopeOf(ev)
		}
	case eventtype.CommandCompleted, eventtype.CommandFailed, eventtype.CommandExpired:
		oc := classify(s, ev)
		if oc.cmd == nil {
			return
		}
		if !oc.final {
			oc.cmd.Status, oc.cmd.Worker, oc.cmd.Envelope = CmdRetrying, "", nil
			return
		}
		finishCommand(s, oc.id, oc.cmd, oc.ok)
	case eventtype.CommandRetry:
		if c := s.Commands[commandID(ev)]; c != nil {
			c.Status, c.Worker, c.Envelope = CmdPending, "", nil
			if a := jsonx.Int(ev.Meta["attempt"]); a > 0 {
				c.Attempt = a
			}
		}
	case eventtype.CommandCancelled:
		if c := s.Commands[commandID(ev)]; c != nil {
			delete(s.Commands, commandID(ev))
			if v := currentVisit(s, c); v != nil {
				v.InFlight--
				if c.Claim && v.Loop != nil {
					v.Loop.Claiming = false
				}
			}
		}
	case eventtype.LoopClaimed:
		if st := s.Steps[ev.Step]; st != nil && st.Visit != nil && st.Visit.Loop != nil && st.Visit.N == jsonx.Int(ev.Context["visit"]) {
			st.Visit.Loop.Total = jsonx.Int(ev.Context["total"])
			st.Visit.Loop.Drained, _ = ev.Context["drained"].(bool)
			if tx, ok := ev.Context["txid"].(string); ok {
				st.Visit.Loop.ClaimTxid = tx
			}
		}
	case eventtype.PlaybookCompleted:
		s.Status, s.EndedAt = lifecycle.ExecutionCompleted, ev.Time
	case eventtype.PlaybookFailed:
		s.Status, s.EndedAt = lifecycle.ExecutionFailed, ev.Time
		if e, ok := ev.Context["error"].(string); ok && e != "" {
			s.Error = e
		}
	case eventtype.PlaybookCancelled:
		s.Status, s.EndedAt = lifecycle.ExecutionCancelled, ev.Time
	case eventtype.PlaybookRedriven:
		applyRedriven(s, ev)
	}
}

func applyEnter(s *Snapshot, ev Event) {
	st := s.step(ev.Step)
	clearLedger(s, st)
	if st.Visit == nil {
		s.Running++
	}
	v := &Visit{N: jsonx.Int(ev.Context["visit"])}
	if v.N == 0 {
		v.N = st.Visits + 1
	}
	if as, ok := ev.Context["arc_set"].(map[string]any); ok && len(as) > 0 {
		v.ArcSet = as
	}
	if n, ok := ev.Context["iterations_expected"]; ok {
		it, _ := ev.Context["iterator"].(string)
		if it == "" {
			it, _ = ev.Context["iterator_var"].(string) // NoETL's name
		}
		v.Loop = &LoopState{Total: jsonx.Int(n), Iterator: it, Limit: jsonx.Int(ev.Context["max_in_flight"])}
		v.Loop.Cursor, _ = ev.Context["cursor"].(bool)
		if kept := elementsOfInt(ev.Context["kept"]); len(kept) > 0 {
			v.Loop.Kept, v.Loop.Done = kept, len(kept)
		}
	}
	st.Visit, st.Visits, st.Status, st.Attempts, st.Kept = v, v.N, StepRunning, 0, nil
	st.EnterSeq, st.EnteredAt = ev.Seq, ev.Time
}

func applyExit(s *Snapshot, ev Event) {
	st := s.step(ev.Step)
	if st.Visit != nil {
		// Arcs that arrived while the visit ran stay held in the ledger: they start
		// one new visit now that it ended (R-J7). The ledger resets on dispatch or
		// skip (R-J4), not on exit.
		st.Visit = nil
		s.Running--
	} else {
		// An exit without a visit is a dispatch refused (R-J8's max_visits): it
		// consumed the ledger that asked for it.
		clearLedger(s, st)
	}
	st.ExitedAt = ev.Time
	st.Error, _ = ev.Context["error"].(string)
	switch strings.ToUpper(ev.Status) {
	case lifecycle.ExecutionFailed:
		st.Status = StepFailed
		if s.Status == lifecycle.ExecutionRunning {
			s.Status = lifecycle.ExecutionFailing
		}
		if s.Error == "" {
			s.Error = st.Error
		}
		s.FailedSteps = append(s.FailedSteps, ev.Step)
	case lifecycle.ExecutionCancelled:
		st.Status = StepCancelled
		return
	default:
		st.Status = StepCompleted
	}
	if _, has := ev.Context["result"]; has || ev.Context["result_ref"] != nil || st.Status == StepCompleted {
		st.Bound = true
		st.Result, st.ResultRef = ev.Context["result"], nil
		st.ResultURI, _ = ev.Context["result_uri"].(string)
		if ref := resultKeyOf(ev.Context["result_ref"]); ref != nil {
			st.Result, st.ResultRef = nil, ref
		}
	}
	applyFired(s, ev.Step, ev.Context["fired"])
}

func applyIssued(s *Snapshot, ev Event) {
	id := commandID(ev)
	if id == "" {
		return
	}
	c := &CommandState{
		Step:        ev.Step,
		Visit:       jsonx.Int(ev.Meta["visit"]),
		Index:       -1,
		EventID:     ev.ID,
		Status:      CmdPending,
		Attempt:     max(1, jsonx.Int(ev.Meta["attempt"])),
		MaxAttempts: max(1, jsonx.Int(ev.Meta["max_attempts"])),
		RetryOn:     stringsOf(ev.Meta["retry_on"]),
		OnStatus:    int64sOf(ev.Meta["retry_on_status"]),
	}
	if _, ok := ev.Meta["iteration_index"]; ok {
		c.Index = jsonx.Int(ev.Meta["iteration_index"])
	}
	c.Claim, _ = ev.Meta["cursor_claim"].(bool)
	s.Commands[id] = c
	if v := currentVisit(s, c); v != nil {
		v.InFlight++
		if v.Loop != nil && c.Index >= 0 {
			v.Loop.Issued = max(v.Loop.Issued, c.Index+1)
		}
		if v.Loop != nil && c.Claim {
			v.Loop.Claiming = true
		}
	}
}

// finishCommand removes a command whose outcome is final and counts it on its visit.
func finishCommand(s *Snapshot, id string, c *CommandState, ok bool) {
	delete(s.Commands, id)
	st := s.Steps[c.Step]
	if st != nil {
		st.Attempts = max(st.Attempts, c.Attempt)
	}
	v := currentVisit(s, c)
	if v == nil {
		return
	}
	v.InFlight--
	if v.Loop != nil && c.Claim {
		v.Loop.Claiming = false
	}
	if v.Loop != nil && c.Index >= 0 {
		if ok {
			v.Loop.Done++
		} else {
			v.Loop.Failed++
		}
	}
}

// currentVisit is the command's visit if it is still the step's visit in progress.
func currentVisit(s *Snapshot, c *CommandState) *Visit {
	st := s.Steps[c.Step]
	if st == nil || st.Visit == nil || st.Visit.N != c.Visit {
		return nil
	}
	return st.Visit
}

func clearLedger(s *Snapshot, st *StepState) {
	if len(st.Ledger) > 0 {
		s.Queued--
		st.Ledger = nil
	}
}

// pathWriter writes dotted paths into a copy of a map, as many as a set
// block has, copying the maps along the paths so values shared with events or
// earlier snapshots are never mutated: each map once, however many paths go
// through it (a set of n keys costs n, not n copies of the context).
type pathWriter struct {
	out map[string]any
	// own are the maps this writer made, by address: written in place.
	own map[unsafe.Pointer]bool
}

func newPathWriter(m map[string]any, extra int) *pathWriter {
	out := make(map[string]any, len(m)+extra)
	maps.Copy(out, m)
	return &pathWriter{out: out}
}

// set writes v at path; a later path through the same maps sees it.
func (w *pathWriter) set(path string, v any) {
	m := w.out
	for {
		head, rest, nested := strings.Cut(path, ".")
		if !nested {
			m[head] = v
			return
		}
		child, _ := m[head].(map[string]any)
		if child == nil || !w.own[reflect.ValueOf(child).UnsafePointer()] {
			fresh := make(map[string]any, len(child)+1)
			maps.Copy(fresh, child)
			if w.own == nil {
				w.own = map[unsafe.Pointer]bool{}
			}
			w.own[reflect.ValueOf(fresh).UnsafePointer()] = true
			m[head] = fresh
			child = fresh
		}
		m, path = child, rest
	}
}

func commandID(ev Event) string {
	if ev.CommandID != "" {
		return ev.CommandID
	}
	if id, ok := ev.Meta["command_id"].(string); ok {
		return id
	}
	if id, ok := ev.Context["command_id"].(string); ok {
		return id
	}
	return ""
}

func stringsOf(v any) []string { return elementsOf[string](v) }

func int64sOf(v any) []int64 { return elementsOf[int64](v) }

// elementsOf is the elements of the list v that are Ts, in order; nil when
// there are none.
func elementsOf[T any](v any) []T {
	l, _ := v.([]any)
	var out []T
	for _, x := range l {
		if t, ok := x.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func resultKeyOf(v any) *ResultKey {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	k := &ResultKey{Kind: KindStepResult, Index: -1}
	k.Step, _ = m["step"].(string)
	k.Visit = jsonx.Int(m["visit"])
	if kind, ok := m["kind"].(string); ok {
		k.Kind = ResultKind(kind)
	}
	if _, ok := m["index"]; ok {
		k.Index = jsonx.Int(m["index"])
	}
	k.URI, _ = m["uri"].(string)
	return k
}
