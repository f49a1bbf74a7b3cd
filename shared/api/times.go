package api

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// An event's duration (NoETL's `duration`, in milliseconds as NoETL stores
// it and its GUI reads it) is read at answer time, never stored: an end
// event's time minus the time of the event that started what it ends. Which
// events end what is said once, in endOf.

// durationLookback bounds how many events before a page the starts of its
// end events are looked for; an end whose start is further back has no
// duration (null), so a page costs the same at any depth of the log.
const durationLookback = 1000

// eventsJSON is a page of an execution's events as answers carry them, in
// the page's order, each end event with its duration; m masks their values.
func (a *API) eventsJSON(ctx context.Context, row store.Execution, m *redact.Masker, evs []store.Event) ([]wire.Event, error) {
	out := make([]wire.Event, len(evs))
	first, ends := int64(math.MaxInt64), false
	for i, e := range evs {
		out[i] = eventJSON(m, e)
		first = min(first, e.Seq)
		if endOf(e) != "" {
			ends = true
		}
	}
	var earlier []store.StartMark
	if ends && first > 1 {
		var err error
		if earlier, err = a.svc.StartMarks(ctx, row.ExecutionID, max(0, first-1-durationLookback), first-1); err != nil {
			return nil, err
		}
	}
	ms := durations(evs, earlier, row.StartedAt)
	for i, e := range evs {
		if d, ok := ms[e.Seq]; ok {
			out[i].Duration = &d
		}
	}
	return out, nil
}

// eventJSON is an event as users read it, its values masked with m.
func eventJSON(m *redact.Masker, e store.Event) wire.Event {
	return wire.Event{
		EventID: wire.ID(e.EventID), ExecutionID: wire.ID(e.ExecutionID), Seq: e.Seq,
		EventType: e.EventType, NodeName: wire.OptString(e.NodeName), NodeType: wire.OptString(e.NodeType),
		Status: wire.OptString(e.Status), Context: maskedObject(m, e.Context), Meta: maskedObject(m, e.Meta),
		Result: maskedObject(m, e.Result), Error: wire.OptString(maskedString(m, e.Error)), WorkerID: wire.OptString(e.WorkerID),
		CommandID: wire.OptString(e.CommandID), ParentEventID: wire.OptID(e.ParentEventID),
		ClientEventID: wire.OptString(e.ClientEventID), Ignored: e.Ignored, CreatedAt: wire.At(e.CreatedAt),
		Timestamp: wire.At(e.CreatedAt),
	}
}

// executionStart is endOf's key of the execution's own start.
const executionStart = "execution"

// endOf says what an event ends, as the key of its start: a step visit's
// step.exit ends its step.enter, a command's end its claim or start, a
// playbook's end the execution. "" for other events.
func endOf(e store.Event) string {
	switch e.EventType {
	case "step.exit":
		return stepKey(e.NodeName, visitOf(e.Context))
	case "command.completed", "command.failed", "call.done", "call.error":
		if id := commandOf(e); id != "" {
			return "command\x00" + id
		}
	case "playbook.completed", "playbook.failed", "playbook.cancelled":
		return executionStart
	}
	return ""
}

// startOf is the key an event starts, "" when it starts nothing.
func startOf(m store.StartMark) string {
	switch m.EventType {
	case "step.enter":
		return stepKey(m.Step, m.Visit)
	case "command.claimed", "command.started":
		if m.CommandID != "" {
			return "command\x00" + m.CommandID
		}
	}
	return ""
}

func stepKey(step, visit string) string { return "step\x00" + step + "\x00" + visit }

func visitOf(ctx map[string]any) string {
	if v, ok := ctx["visit"]; ok && v != nil {
		return strings.Trim(string(jsonx.MustMarshal(v)), `"`)
	}
	return ""
}

func commandOf(e store.Event) string {
	if e.CommandID != "" {
		return e.CommandID
	}
	if s, ok := e.Meta["command_id"].(string); ok {
		return s
	}
	return ""
}

// durations returns, by seq, the milliseconds each end event of evs took:
// from the latest start of the same key before it, among earlier (the
// starts before the page, in seq order) and evs themselves.
func durations(evs []store.Event, earlier []store.StartMark, started time.Time) map[int64]int64 {
	type point struct {
		seq   int64
		start string // the key this event starts, or
		end   string // the key it ends
		at    time.Time
	}
	pts := make([]point, 0, len(earlier)+len(evs))
	for _, m := range earlier {
		pts = append(pts, point{seq: m.Seq, start: startOf(m), at: m.CreatedAt})
	}
	for _, e := range evs {
		p := point{seq: e.Seq, at: e.CreatedAt, start: startOf(store.StartMark{EventType: e.EventType, Step: e.NodeName,
			Visit: visitOf(e.Context), CommandID: commandOf(e)})}
		p.end = endOf(e)
		pts = append(pts, p)
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.seq, b.seq) })
	starts := map[string]time.Time{executionStart: started}
	out := map[int64]int64{}
	for _, p := range pts {
		if p.end != "" {
			if at, ok := starts[p.end]; ok && !at.IsZero() {
				out[p.seq] = max(0, p.at.Sub(at).Milliseconds())
			}
		}
		if p.start != "" {
			starts[p.start] = p.at
		}
	}
	return out
}

// durationHuman writes seconds as NoETL does: 1d 2h 3m 4s, zero parts left
// out, 0s for nothing.
func durationHuman(seconds float64) string {
	s := int64(math.Round(max(0, seconds)))
	var parts []string
	for _, u := range []struct {
		n    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}} {
		if s >= u.n {
			parts = append(parts, fmt.Sprintf("%d%s", s/u.n, u.name))
			s %= u.n
		}
	}
	if s > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%ds", s))
	}
	return strings.Join(parts, " ")
}
