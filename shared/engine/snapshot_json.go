package engine

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// The snapshot is encoded at every step, and reflection was most of a step's
// time in the server: Marshal writes it field by field, byte for byte what
// encoding/json writes for these types (TestSnapshotEncodingMatchesReflection
// holds it to that), so stored snapshots and checksums do not change.

// Marshal encodes the snapshot canonically.
func (s *Snapshot) Marshal() ([]byte, error) {
	e, err := s.Encode(nil)
	if err != nil {
		return nil, err
	}
	return e.Bytes, nil
}

// objWriter appends one JSON object's fields, remembering the first error.
type objWriter struct {
	b     []byte
	err   error
	first bool
}

func (w *objWriter) open()  { w.b, w.first = append(w.b, '{'), true }
func (w *objWriter) close() { w.b, w.first = append(w.b, '}'), false }

func (w *objWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...) // keys are plain ASCII
	w.b = append(w.b, '"', ':')
}

func (w *objWriter) str(k, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.key(k)
	w.b = jsonx.AppendString(w.b, v)
}

func (w *objWriter) int(k string, v int64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// bool writes a true value; false is omitted (omitempty).
func (w *objWriter) bool(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

func (w *objWriter) time(k string, t time.Time) {
	if t.IsZero() {
		return // omitzero
	}
	w.key(k)
	w.value(func(b []byte) ([]byte, error) { return jsonx.AppendTime(b, t) })
}

// any writes a JSON value field; omitEmpty omits only a nil value (an empty
// map or list inside an interface is written, as encoding/json does).
func (w *objWriter) any(k string, v any, omitEmpty bool) {
	if omitEmpty && v == nil {
		return
	}
	w.key(k)
	w.value(func(b []byte) ([]byte, error) { return jsonx.AppendValue(b, v) })
}

// object writes a map[string]any field, omitted when empty.
func (w *objWriter) object(k string, m map[string]any) {
	if len(m) == 0 {
		return
	}
	w.key(k)
	w.value(func(b []byte) ([]byte, error) { return jsonx.AppendValue(b, m) })
}

func (w *objWriter) strings(k string, l []string) {
	if len(l) == 0 {
		return
	}
	w.key(k)
	list(w, l, func(s string) { w.b = jsonx.AppendString(w.b, s) })
}

// list writes l as a JSON array, each element by elem.
func list[E any](w *objWriter, l []E, elem func(E)) {
	w.b = append(w.b, '[')
	for i, e := range l {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		elem(e)
	}
	w.b = append(w.b, ']')
	w.first = false
}

func (w *objWriter) value(f func([]byte) ([]byte, error)) {
	b, err := f(w.b)
	w.b = b
	if err != nil && w.err == nil {
		w.err = err
	}
}

// writeMap writes m under key with its keys sorted, as encoding/json does;
// nothing when m is empty (omitempty), and null for a nil entry.
func writeMap[T any, V interface {
	*T
	write(*objWriter)
}](w *objWriter, key string, m map[string]V) {
	if len(m) == 0 {
		return
	}
	w.key(key)
	w.b = append(w.b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonx.AppendString(w.b, k)
		w.b = append(w.b, ':')
		if v := m[k]; v == nil {
			w.b = append(w.b, "null"...)
		} else {
			v.write(w)
		}
	}
	w.b = append(w.b, '}')
	w.first = false
}

func (s *Snapshot) write(w *objWriter, prev, e *Encoded) {
	w.open()
	w.str("status", s.Status, true)
	w.int("seq", s.Seq, false)
	w.time("started_at", s.StartedAt)
	w.time("ended_at", s.EndedAt)
	w.object("ctx", s.Ctx)
	s.writeSteps(w, prev, e)
	writeMap(w, "commands", s.Commands)
	w.strings("failed_steps", s.FailedSteps)
	w.str("error", s.Error, true)
	w.int("running", int64(s.Running), true)
	w.int("queued", int64(s.Queued), true)
	w.strings("waiting", s.Waiting)
	w.close()
}

// nested writes a field whose value is an object written by f.
func (w *objWriter) nested(k string, f func()) {
	w.key(k)
	f()
	w.first = false
}

func (st *StepState) write(w *objWriter) {
	w.open()
	w.str("status", st.Status, false)
	w.int("visits", int64(st.Visits), true)
	w.int("attempts", int64(st.Attempts), true)
	w.bool("bound", st.Bound)
	w.any("result", st.Result, true)
	if st.ResultRef != nil {
		w.nested("result_ref", func() { st.ResultRef.write(w) })
	}
	w.str("result_uri", st.ResultURI, true)
	w.str("error", st.Error, true)
	w.int("enter_seq", st.EnterSeq, true)
	w.time("entered_at", st.EnteredAt)
	w.time("exited_at", st.ExitedAt)
	if len(st.Ledger) > 0 {
		w.key("ledger")
		list(w, st.Ledger, func(a FiredArc) {
			w.open()
			w.str("from", a.From, false)
			w.object("set", a.Set)
			w.close()
		})
	}
	if st.Visit != nil {
		w.nested("visit", func() { st.Visit.write(w) })
	}
	if k := st.Kept; k != nil {
		w.nested("kept", func() {
			w.open()
			w.int("visit", int64(k.Visit), false)
			w.ints("iterations", k.Indexes, false)
			w.close()
		})
	}
	w.close()
}

// ints writes a list of ints; omitEmpty omits an empty one, else an empty
// list is [] and a nil one null, as encoding/json writes them.
func (w *objWriter) ints(k string, l []int, omitEmpty bool) {
	if omitEmpty && len(l) == 0 {
		return
	}
	w.key(k)
	if l == nil {
		w.b = append(w.b, "null"...)
		return
	}
	list(w, l, func(n int) { w.b = strconv.AppendInt(w.b, int64(n), 10) })
}

func (k *ResultKey) write(w *objWriter) {
	w.open()
	w.str("kind", string(k.Kind), false)
	w.str("step", k.Step, false)
	w.int("visit", int64(k.Visit), false)
	w.int("index", int64(k.Index), false)
	w.str("uri", k.URI, true)
	w.close()
}

func (v *Visit) write(w *objWriter) {
	w.open()
	w.int("n", int64(v.N), false)
	w.object("arc_set", v.ArcSet)
	w.int("in_flight", int64(v.InFlight), true)
	if l := v.Loop; l != nil {
		w.nested("loop", func() {
			w.open()
			w.int("total", int64(l.Total), false)
			w.str("iterator", l.Iterator, true)
			w.int("issued", int64(l.Issued), true)
			w.int("done", int64(l.Done), true)
			w.int("failed", int64(l.Failed), true)
			w.int("limit", int64(l.Limit), true)
			w.bool("cursor", l.Cursor)
			w.bool("claiming", l.Claiming)
			w.bool("drained", l.Drained)
			w.str("claim_txid", l.ClaimTxid, true)
			w.ints("kept", l.Kept, true)
			w.close()
		})
	}
	w.close()
}

func (c *CommandState) write(w *objWriter) {
	w.open()
	w.str("step", c.Step, false)
	w.int("visit", int64(c.Visit), false)
	w.int("index", int64(c.Index), false)
	w.int("event_id", c.EventID, false)
	w.str("status", c.Status, false)
	w.int("attempt", int64(c.Attempt), false)
	w.str("worker", c.Worker, true)
	w.int("max_attempts", int64(c.MaxAttempts), false)
	w.strings("retry_on", c.RetryOn)
	if len(c.OnStatus) > 0 {
		w.key("on_status")
		list(w, c.OnStatus, func(n int64) { w.b = strconv.AppendInt(w.b, n, 10) })
	}
	w.bool("claim", c.Claim)
	w.object("envelope", c.Envelope)
	w.close()
}
