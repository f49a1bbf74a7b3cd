package whatif

import (
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Record is one recorded execution: its row's facts and its log.
type Record struct {
	ExecutionID int64
	Path        string
	Version     int
	Status      string
	// Events is the log in seq order, without the events stored ignored
	// (fenced or late), which never changed the execution.
	Events []engine.Event
}

// cmdKey names a command by what the new version can match it on: its
// step, the step's visit and the loop iteration (-1 outside loops).
type cmdKey struct {
	step         string
	visit, index int
}

// attempt is one recorded attempt of a command: the call event (call.done,
// call.error) when the worker sent one, and the event that ended it.
type attempt struct {
	call *engine.Event
	end  *engine.Event
}

// recorded is one recorded command.
type recorded struct {
	kind     string
	payload  map[string]any
	attempts []attempt // by attempt number - 1
	cur      int       // the attempt in progress (1-based)
}

// exit is one recorded or simulated end of a step visit (or its skip).
type exit struct {
	status string // completed, failed, cancelled, skipped
	result any
	ref    *engine.ResultKey
	err    string
}

// recording indexes a recorded log for the simulated worker and the
// comparison.
type recording struct {
	started *engine.Event
	final   *engine.Event // playbook.completed / failed / cancelled
	cmds    map[cmdKey][]*recorded
	exits   map[string][]exit
	order   []string // steps by their first event
	// refs: a command's result was stored by reference, outside the log.
	refs bool
}

func index(rec Record) *recording {
	r := &recording{cmds: map[cmdKey][]*recorded{}, exits: map[string][]exit{}}
	byID := map[string]*recorded{}
	seen := map[string]bool{}
	for i := range rec.Events {
		ev := &rec.Events[i]
		if ev.Step != "" && !seen[ev.Step] && stepEvent(ev.Type) {
			seen[ev.Step] = true
			r.order = append(r.order, ev.Step)
		}
		id := ev.CommandID
		if id == "" {
			id, _ = ev.Meta["command_id"].(string)
		}
		switch eventtype.Canonical(ev.Type) {
		case eventtype.PlaybookStarted:
			if r.started == nil {
				r.started = ev
			}
		case eventtype.PlaybookCompleted, eventtype.PlaybookFailed, eventtype.PlaybookCancelled:
			r.final = ev
		case eventtype.StepExit, eventtype.StepSkipped:
			r.exits[ev.Step] = append(r.exits[ev.Step], exitOf(*ev))
		case eventtype.CommandIssued:
			c := &recorded{kind: ev.NodeType, payload: ev.Context, cur: 1, attempts: make([]attempt, 1)}
			if k, _ := ev.Meta["tool_kind"].(string); k != "" {
				c.kind = k
			}
			key := cmdKey{step: ev.Step, visit: jsonx.Int(ev.Meta["visit"]), index: -1}
			if _, ok := ev.Meta["iteration_index"]; ok {
				key.index = jsonx.Int(ev.Meta["iteration_index"])
			}
			r.cmds[key] = append(r.cmds[key], c)
			byID[id] = c
		case eventtype.CommandRetry:
			if c := byID[id]; c != nil {
				c.cur = max(c.cur+1, jsonx.Int(ev.Meta["attempt"]))
				for len(c.attempts) < c.cur {
					c.attempts = append(c.attempts, attempt{})
				}
			}
		case eventtype.CallDone, eventtype.CallError:
			r.refs = r.refs || hasRef(ev)
			if a := byID[id].at(ev); a != nil {
				a.call = ev
			}
		case eventtype.CommandCompleted, eventtype.CommandFailed, eventtype.CommandExpired:
			r.refs = r.refs || hasRef(ev)
			if a := byID[id].at(ev); a != nil && a.end == nil {
				a.end = ev
			}
		}
	}
	return r
}

// at is the attempt an event of the command reports: its meta's attempt, else
// the one in progress.
func (c *recorded) at(ev *engine.Event) *attempt {
	if c == nil {
		return nil
	}
	n := jsonx.Int(ev.Meta["attempt"])
	if n <= 0 {
		n = c.cur
	}
	if n > len(c.attempts) {
		return nil
	}
	return &c.attempts[n-1]
}

// stepEvent: the events that place a step in the order of the run.
func stepEvent(t string) bool {
	switch eventtype.Canonical(t) {
	case eventtype.StepEnter, eventtype.StepExit, eventtype.StepSkipped:
		return true
	}
	return false
}

func exitOf(ev engine.Event) exit {
	if eventtype.Canonical(ev.Type) == eventtype.StepSkipped {
		return exit{status: engine.StepSkipped}
	}
	x := exit{status: engine.StepCompleted, result: ev.Context["result"]}
	x.err, _ = ev.Context["error"].(string)
	switch ev.Status {
	case lifecycle.ExecutionFailed:
		x.status = engine.StepFailed
	case lifecycle.ExecutionCancelled:
		x.status = engine.StepCancelled
	}
	if m, ok := ev.Context["result_ref"].(map[string]any); ok {
		k := engine.ResultKey{Kind: engine.ResultKind(str(m["kind"])), Step: str(m["step"]),
			Visit: jsonx.Int(m["visit"]), Index: -1, URI: str(m["uri"])}
		x.ref, x.result = &k, nil
	}
	return x
}

func str(v any) string { s, _ := v.(string); return s }

func hasRef(ev *engine.Event) bool {
	r, ok := ev.Result.(map[string]any)
	return ok && r["reference"] != nil
}
