package engine

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// The snapshot holds every step an execution reached, so encoding it whole at
// every step costs more the longer the chain (at 3,000 steps it was 45 % of
// the server's CPU). A step's state is the same at most events, and its bytes
// are too: Encode copies them from the previous encoding of the same
// execution, writing only the steps whose state changed.

// Encoded is a snapshot's encoding and where each step's value lies in it.
type Encoded struct {
	Bytes  []byte
	snap   *Snapshot
	names  []string     // the step names, sorted, as written
	steps  []*StepState // snap's state of names[i]
	spans  []span       // names[i]'s value in Bytes
	copied int          // steps copied from the previous encoding
}

type span struct{ from, to int }

// Copied is how many steps were copied from the encoding e was encoded
// against.
func (e *Encoded) Copied() int { return e.copied }

// Snapshot is the snapshot encoded. It must not change from then on (the
// control plane's cache shares it; a transaction folds into a clone), since
// the next Encode compares against it.
func (e *Encoded) Snapshot() *Snapshot { return e.snap }

// Encode encodes s byte for byte as Marshal does. The steps whose state is
// the same as in prev (an earlier encoding of the same execution, or nil)
// are copied from it rather than written.
func (s *Snapshot) Encode(prev *Encoded) (*Encoded, error) {
	if prev != nil && prev.snap == s {
		prev = nil // s changed in place since: nothing to compare against
	}
	size := 512
	if prev != nil {
		size = len(prev.Bytes) + 512
	}
	w := &objWriter{b: make([]byte, 0, size)}
	e := &Encoded{snap: s}
	s.write(w, prev, e)
	if w.err != nil {
		return nil, w.err
	}
	e.Bytes = w.b
	return e, nil
}

// writeSteps writes the steps map with its keys sorted, as encoding/json
// does: nothing when it is empty (omitempty), null for a nil entry.
func (s *Snapshot) writeSteps(w *objWriter, prev, e *Encoded) {
	if len(s.Steps) == 0 {
		return
	}
	was := e.order(s.Steps, prev)
	e.spans = make([]span, len(e.names))
	w.key("steps")
	w.b = append(w.b, '{')
	for i, name := range e.names {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonx.AppendString(w.b, name)
		w.b = append(w.b, ':')
		from := len(w.b)
		switch st, k := e.steps[i], was[i]; {
		case k >= 0 && stepUnchanged(prev.steps[k], st):
			w.b = append(w.b, prev.Bytes[prev.spans[k].from:prev.spans[k].to]...)
			e.copied++
		case st == nil:
			w.b = append(w.b, "null"...)
		default:
			st.write(w)
		}
		e.spans[i] = span{from, len(w.b)}
	}
	w.b = append(w.b, '}')
	w.first = false
}

// order sets e.names to steps' keys sorted and e.steps to their states, and
// returns where each stood in prev (-1: not there). With prev, only the steps
// added since are sorted (a chain adds one a step), and merged into its order.
func (e *Encoded) order(steps map[string]*StepState, prev *Encoded) (was []int) {
	e.names, e.steps, was = make([]string, 0, len(steps)), make([]*StepState, 0, len(steps)), make([]int, 0, len(steps))
	var added []string
	if prev == nil {
		added = slices.Sorted(maps.Keys(steps))
	} else {
		for name := range steps {
			if _, ok := prev.snap.Steps[name]; !ok {
				added = append(added, name)
			}
		}
		slices.Sort(added)
	}
	take := func(name string, st *StepState, k int) {
		e.names, e.steps, was = append(e.names, name), append(e.steps, st), append(was, k)
	}
	a := 0
	if prev != nil {
		for k, name := range prev.names {
			st, ok := steps[name]
			if !ok {
				continue // removed since
			}
			for ; a < len(added) && added[a] < name; a++ {
				take(added[a], steps[added[a]], -1)
			}
			take(name, st, k)
		}
	}
	for ; a < len(added); a++ {
		take(added[a], steps[added[a]], -1)
	}
	if len(e.names) != len(steps) {
		return e.order(steps, nil) // prev's snapshot changed after it was encoded: compare nothing
	}
	return was
}

// stepUnchanged reports whether a and b encode the same. JSON values are
// compared by identity: the engine never changes one in place (Clone shares
// them), so the same map is the same value. Anything it cannot tell counts
// as changed, which costs only an encoding.
func stepUnchanged(a, b *StepState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Visits == b.Visits && a.Attempts == b.Attempts && a.Bound == b.Bound &&
		sameValue(a.Result, b.Result) && samePointee(a.ResultRef, b.ResultRef) && a.ResultURI == b.ResultURI &&
		a.Error == b.Error && a.EnterSeq == b.EnterSeq && a.EnteredAt == b.EnteredAt && a.ExitedAt == b.ExitedAt &&
		slices.EqualFunc(a.Ledger, b.Ledger, func(x, y FiredArc) bool { return x.From == y.From && sameMap(x.Set, y.Set) }) &&
		sameVisit(a.Visit, b.Visit) && sameKept(a.Kept, b.Kept)
}

func sameVisit(a, b *Visit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.N == b.N && a.InFlight == b.InFlight && sameMap(a.ArcSet, b.ArcSet) && sameLoop(a.Loop, b.Loop)
}

func sameLoop(a, b *LoopState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Total == b.Total && a.Iterator == b.Iterator && a.Issued == b.Issued && a.Done == b.Done &&
		a.Failed == b.Failed && a.Limit == b.Limit && a.Cursor == b.Cursor && a.Claiming == b.Claiming &&
		a.Drained == b.Drained && a.ClaimTxid == b.ClaimTxid && slices.Equal(a.Kept, b.Kept)
}

func sameKept(a, b *KeptIterations) bool {
	if a == nil || b == nil {
		return a == b
	}
	// A nil list is written null, an empty one [].
	return a.Visit == b.Visit && (a.Indexes == nil) == (b.Indexes == nil) && slices.Equal(a.Indexes, b.Indexes)
}

func samePointee[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sameValue compares JSON values: scalars by value, maps and lists by
// identity.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && sameMap(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0]) && (x == nil) == (y == nil)
	case string, bool, int64, float64, json.Number:
		return a == b
	}
	return false
}

func sameMap(a, b map[string]any) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
