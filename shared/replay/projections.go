package replay

import (
	"maps"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// The per-projection fold rules. They follow R-X2; where the parity data set
// pins a detail the words leave open, the comment says so.

type executionState struct {
	status      string
	lastNode    string
	payloadRefs []any
}

// nextStatus: any event moves UNKNOWN to RUNNING (UNKNOWN means "no events"),
// terminal events set their status, and nothing but another terminal event
// or a redrive (which reopens an ended execution) changes a terminal status.
func nextStatus(cur, typ string) string {
	if t := terminalStatus(typ); t != "" {
		return t
	}
	if typ == eventtype.PlaybookRedriven && cur != StatusUnknown {
		return lifecycle.ExecutionRunning
	}
	if cur == StatusUnknown {
		return lifecycle.ExecutionRunning
	}
	return cur
}

func (f *Folder) foldExecution(r *Row, typ string) {
	f.exec.status = nextStatus(f.exec.status, typ)
	// The data set pins this: the last node is the one of the last step
	// entry/exit or command completion, not of the last event (stage.closed
	// and playbook.completed do not move it).
	switch typ {
	case "step.enter", "step.exit", "command.completed":
		if r.NodeName != "" {
			f.exec.lastNode = r.NodeName
		}
	}
	if ref := payloadRef(r); ref != nil {
		f.exec.payloadRefs = append(f.exec.payloadRefs, map[string]any{
			"event_id":  idValue(r.EventID),
			"reference": jsonx.Clone(ref),
			"summary":   payloadSummary(ref),
		})
	}
}

func (e *executionState) value() map[string]any {
	refs := make([]any, len(e.payloadRefs))
	for i, p := range e.payloadRefs {
		refs[i] = jsonx.Clone(p)
	}
	return map[string]any{
		"status":         e.status,
		"last_node_name": strValue(e.lastNode),
		"payload_refs":   refs,
	}
}

// idState is what the stage, frame and command projections keep alike of
// each id: its status, UNKNOWN until an event of the id says otherwise, and
// the id's last event.
type idState struct {
	status string
	last   int64
}

func (s *idState) ids() *idState { return s }

// track returns the state of key in m, opened UNKNOWN when the key is new,
// with eventID as its last event; nil for an event without the id (key ""),
// which is not the projection's. The caller folds the event into it: a call
// through the type parameter would let the row escape, and the fold
// allocates nothing per event (TestExecutionFoldDoesNotAllocatePerEvent).
func track[T any, P interface {
	*T
	ids() *idState
}](m map[string]*T, key string, eventID int64) P {
	v := P(entry(m, key, func() *T {
		v := P(new(T))
		v.ids().status = "UNKNOWN"
		return v
	}))
	if v != nil {
		v.ids().last = eventID
	}
	return v
}

type stageState struct {
	idState
	kind          any
	stepName      any
	parentStageID string
	loopEventID   string
	opened        int64
	closed        int64
	frameCount    int64
	rowCount      int64
	eventsEmitted int64
	failedCount   int64
}

func (s *stageState) fold(r *Row, typ string) {
	// kind and step_name come from the first event that carries them
	// (stage.opened in practice; the data set's step_name is meta.step_name).
	if s.kind == nil {
		s.kind = jsonx.Clone(firstPresent(r.Meta["kind"]))
	}
	if s.stepName == nil {
		s.stepName = jsonx.Clone(firstPresent(r.Meta["step_name"], strValue(r.NodeName)))
	}
	setMetaString(&s.parentStageID, r.Meta, "parent_stage_id")
	setString(&s.loopEventID, loopIDOf(r))
	switch typ {
	case "stage.opened":
		s.status = "OPEN"
		s.opened = r.EventID
	case "stage.closed":
		s.status = orDefault(r.Status, "CLOSED")
		s.closed = r.EventID
		setInt(&s.frameCount, r.Meta, "frame_count")
		setInt(&s.rowCount, r.Meta, "row_count")
		setInt(&s.eventsEmitted, r.Meta, "events_emitted")
		setInt(&s.failedCount, r.Meta, "failed_count")
	default:
		setString(&s.status, r.Status)
	}
}

func (s *stageState) value(id string) map[string]any {
	return map[string]any{
		"stage_id":        id,
		"status":          s.status,
		"kind":            jsonx.Clone(s.kind),
		"step_name":       jsonx.Clone(s.stepName),
		"parent_stage_id": strValue(s.parentStageID),
		"loop_event_id":   strValue(s.loopEventID),
		"opened_event_id": idValue(s.opened),
		"closed_event_id": idValue(s.closed),
		"frame_count":     s.frameCount,
		"row_count":       s.rowCount,
		"events_emitted":  s.eventsEmitted,
		"failed_count":    s.failedCount,
		"last_event_id":   idValue(s.last),
	}
}

type frameState struct {
	idState
	stageID          string
	parentFrameID    string
	commandID        string
	claimed          int64
	terminal         int64
	rowCount         int64
	attempts         int64
	eventsEmitted    int64
	outputRef        any
	outputRefSummary any
}

func (fr *frameState) fold(r *Row, typ string) {
	setString(&fr.stageID, stageIDOf(r))
	setMetaString(&fr.parentFrameID, r.Meta, "parent_frame_id")
	setString(&fr.commandID, commandIDOf(r))
	switch typ {
	case "frame.dispatched":
		fr.status = "CLAIMED"
		fr.claimed = r.EventID
		attempt, ok := metaInt(r.Meta, "attempt")
		if !ok || attempt <= 0 {
			attempt = 1
		}
		fr.attempts = max(fr.attempts, attempt)
	case "frame.started":
		fr.status = "RUNNING"
	case "frame.abandoned":
		fr.status = orDefault(r.Status, "ABANDONED")
	case "frame.committed", "frame.failed":
		if typ == "frame.committed" {
			fr.status = orDefault(r.Status, "COMPLETED")
			setInt(&fr.rowCount, r.Meta, "row_count")
		} else {
			fr.status = orDefault(r.Status, "FAILED")
		}
		setInt(&fr.eventsEmitted, r.Meta, "events_emitted")
		fr.terminal = r.EventID
		ref := payloadRef(r)
		fr.outputRef = jsonx.Clone(ref)
		fr.outputRefSummary = payloadSummary(ref)
	default:
		// The data set pins this: a later command.completed with status
		// "success" for the frame's command overrides frame.committed's
		// COMPLETED.
		setString(&fr.status, r.Status)
	}
}

func (fr *frameState) value(id string) map[string]any {
	return map[string]any{
		"frame_id":           id,
		"stage_id":           strValue(fr.stageID),
		"parent_frame_id":    strValue(fr.parentFrameID),
		"command_id":         strValue(fr.commandID),
		"status":             fr.status,
		"claimed_event_id":   idValue(fr.claimed),
		"terminal_event_id":  idValue(fr.terminal),
		"last_event_id":      idValue(fr.last),
		"row_count":          fr.rowCount,
		"attempts":           fr.attempts,
		"events_emitted":     fr.eventsEmitted,
		"output_ref":         jsonx.Clone(fr.outputRef),
		"output_ref_summary": jsonx.Clone(fr.outputRefSummary),
	}
}

type commandState struct {
	idState
	stageID  string
	frameID  string
	workerID string
	issued   int64
	claimed  int64
	started  int64
	terminal int64
}

func (c *commandState) fold(r *Row, typ string) {
	setString(&c.stageID, stageIDOf(r))
	setString(&c.frameID, frameIDOf(r))
	setString(&c.workerID, r.WorkerID)
	switch typ {
	case "command.issued":
		c.status = orDefault(r.Status, lifecycle.Pending)
		c.issued = r.EventID
	case "command.claimed":
		c.status = orDefault(r.Status, lifecycle.Claimed)
		c.claimed = r.EventID
	case "command.started":
		c.status = orDefault(r.Status, lifecycle.Running)
		c.started = r.EventID
	case "command.completed", "command.failed", "command.cancelled":
		c.status = orDefault(r.Status, strings.ToUpper(strings.TrimPrefix(typ, "command.")))
		c.terminal = r.EventID
	default:
		// Other command.* events (expired, retry, …) carry their status;
		// events of other families only touch ids and last_event_id.
		if strings.HasPrefix(typ, "command.") {
			setString(&c.status, r.Status)
		}
	}
}

func (c *commandState) value(id string) map[string]any {
	return map[string]any{
		"command_id":        id,
		"status":            c.status,
		"stage_id":          strValue(c.stageID),
		"frame_id":          strValue(c.frameID),
		"worker_id":         strValue(c.workerID),
		"issued_event_id":   idValue(c.issued),
		"claimed_event_id":  idValue(c.claimed),
		"started_event_id":  idValue(c.started),
		"terminal_event_id": idValue(c.terminal),
		"last_event_id":     idValue(c.last),
	}
}

type objectState struct {
	typ            string
	id             string
	status         string
	version        int64
	eventCount     int64
	first          int64
	last           int64
	deleted        int64
	lastEventType  string
	attributes     map[string]any
	payloadRefs    []any
	lastPayloadRef any
}

func (f *Folder) foldBusinessObject(r *Row) {
	typ, id, ok := businessObjectOf(r)
	if !ok {
		return
	}
	key := typ + "/" + id
	o := entry(f.objects, key, func() *objectState {
		return &objectState{typ: typ, id: id, status: "UNKNOWN", first: r.EventID, attributes: map[string]any{}}
	})
	bo := asObject(r.Meta["business_object"])
	o.last = r.EventID
	o.lastEventType = r.EventType
	o.eventCount++
	if v, ok := toInt(firstPresent(bo["version"], r.Meta["business_object_version"])); ok && v != 0 {
		o.version = v
	} else {
		o.version = o.eventCount
	}
	if st := businessObjectStatus(r.EventType, r.Status); st != "" {
		o.status = st
		if st == "DELETED" {
			o.deleted = r.EventID
		}
	}
	if state := asObject(bo["state"]); state != nil {
		o.attributes = jsonx.Clone(state).(map[string]any)
	}
	patch := asObject(bo["patch"])
	if len(patch) == 0 {
		patch = asObject(bo["attributes"])
	}
	if patch != nil {
		maps.Copy(o.attributes, jsonx.Clone(patch).(map[string]any))
	}
	if ref := payloadRef(r); ref != nil {
		entry := map[string]any{
			"event_id":  idValue(r.EventID),
			"reference": jsonx.Clone(ref),
			"summary":   payloadSummary(ref),
		}
		o.payloadRefs = append(o.payloadRefs, entry)
		o.lastPayloadRef = entry
	}
}

func (o *objectState) value(key string) map[string]any {
	refs := make([]any, len(o.payloadRefs))
	for i, p := range o.payloadRefs {
		refs[i] = jsonx.Clone(p)
	}
	return map[string]any{
		"object_key":       key,
		"object_type":      o.typ,
		"object_id":        o.id,
		"status":           o.status,
		"version":          o.version,
		"event_count":      o.eventCount,
		"first_event_id":   idValue(o.first),
		"last_event_id":    idValue(o.last),
		"deleted_event_id": idValue(o.deleted),
		"last_event_type":  strValue(o.lastEventType),
		"attributes":       jsonx.Clone(o.attributes),
		"payload_refs":     refs,
		"last_payload_ref": jsonx.Clone(o.lastPayloadRef),
	}
}

type loopState struct {
	stepName  any
	total     any
	visit     string // ours only (R-X3); "" for NoETL loops
	cursor    bool   // ours: a cursor loop, whose total is the rows claimed so far
	done      int64
	failed    int64
	kept      int64 // ours: iterations a redrive kept from the visit before (counted done)
	completed bool
	last      int64
}

// iteration is one of our loop's iteration commands and its latest outcome,
// so a retried iteration moves from failed to done instead of counting twice.
type iteration struct {
	loop    string
	outcome int8
}

const (
	outcomePending int8 = iota
	outcomeDone
	outcomeFailed
)

func (f *Folder) foldLoop(r *Row, typ string) {
	// NoETL loops carry their id in meta.
	if id := loopIDOf(r); id != "" {
		l := entry(f.loops, id, func() *loopState {
			return &loopState{
				stepName: strValue(r.NodeName),
				total:    jsonx.Clone(firstPresent(r.Meta["collection_size"], r.Meta["total"])),
			}
		})
		l.last = r.EventID
		switch typ {
		case "command.completed", "loop.shard.done":
			l.done++
		case "command.failed", "loop.shard.failed":
			l.failed++
		case "loop.done", "loop.fanin.completed":
			l.completed = true
		}
		return
	}
	// Our loops (R-X3): step.enter opens <step>#<visit>, iteration commands
	// count, step.exit of the same visit completes it.
	switch typ {
	case "step.enter":
		n, hasN := r.Context["iterations_expected"]
		if !hasN {
			n, hasN = r.Meta["iterations_expected"]
		}
		_, hasIter := r.Context["iterator"]
		if !hasN && !hasIter {
			return
		}
		visit := visitOf(r)
		l := f.ourLoop(r.NodeName, visit)
		if total, ok := toInt(n); ok {
			l.total = total
		}
		l.cursor = r.Context["cursor"] == true
		if kept, _ := r.Context["kept"].([]any); len(kept) > 0 {
			l.kept = int64(len(kept))
			l.done += l.kept
		}
		l.last = r.EventID
	case "loop.claimed":
		// A cursor loop's claim: its total is the rows claimed so far.
		l := f.ourLoop(r.NodeName, visitOf(r))
		if total, ok := toInt(r.Context["total"]); ok {
			l.total = total
		}
		l.cursor = true
		l.last = r.EventID
	case "step.exit":
		if l := f.loops[r.NodeName+"#"+visitOf(r)]; l != nil && l.visit != "" {
			l.completed = true
			l.last = r.EventID
		}
	default:
		if strings.HasPrefix(typ, "command.") {
			f.foldIteration(r, typ)
		}
	}
}

func (f *Folder) ourLoop(step, visit string) *loopState {
	return entry(f.loops, step+"#"+visit, func() *loopState {
		return &loopState{stepName: strValue(step), visit: visit}
	})
}

func (f *Folder) foldIteration(r *Row, typ string) {
	cid := commandIDOf(r)
	if cid == "" {
		return
	}
	it := f.iterations[cid]
	if it == nil {
		// Only command.issued carries iteration_index in our log; later
		// events of the same command are found through the command id.
		if r.Meta["iteration_index"] == nil {
			return
		}
		step, ok := metaString(r.Meta, "step")
		if !ok {
			step = r.NodeName
		}
		visit, ok := metaString(r.Meta, "visit")
		if !ok {
			visit = "1"
		}
		l := f.ourLoop(step, visit)
		if l.total == nil {
			if n, ok := metaInt(r.Meta, "iteration_total"); ok {
				l.total = n
			}
		}
		it = &iteration{loop: step + "#" + visit}
		f.iterations[cid] = it
	}
	l := f.loops[it.loop]
	l.last = r.EventID
	switch typ {
	case "command.completed":
		l.setOutcome(it, outcomeDone)
	case "command.failed":
		l.setOutcome(it, outcomeFailed)
	case "command.issued", "command.retry":
		l.setOutcome(it, outcomePending)
	}
}

func (l *loopState) setOutcome(it *iteration, o int8) {
	switch it.outcome {
	case outcomeDone:
		l.done--
	case outcomeFailed:
		l.failed--
	}
	it.outcome = o
	switch o {
	case outcomeDone:
		l.done++
	case outcomeFailed:
		l.failed++
	}
}

func (l *loopState) value(id string) map[string]any {
	m := map[string]any{
		"loop_id":       id,
		"step_name":     jsonx.Clone(l.stepName),
		"total":         jsonx.Clone(l.total),
		"done":          l.done,
		"failed":        l.failed,
		"completed":     l.completed,
		"last_event_id": idValue(l.last),
	}
	if l.visit != "" {
		m["visit"] = l.visit
	}
	if l.cursor {
		m["cursor"] = true
	}
	if l.kept > 0 {
		m["kept"] = l.kept
	}
	return m
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setInt overwrites *dst with meta[key] when it holds an integer.
func setInt(dst *int64, meta map[string]any, key string) {
	if v, ok := metaInt(meta, key); ok {
		*dst = v
	}
}

// setString overwrites *dst with v unless v is empty: an event that does not
// carry an id (or a status) keeps the one an earlier event gave.
func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// setMetaString overwrites *dst with meta[key] when it holds a non-empty
// scalar.
func setMetaString(dst *string, meta map[string]any, key string) {
	v, _ := metaString(meta, key)
	setString(dst, v)
}

// entry returns m[key], storing made() there first when the key is new: the
// one way every projection opens the state of an id it has not seen. An event
// without the id (key "") is not the projection's: entry returns nil.
func entry[T any](m map[string]*T, key string, made func() *T) *T {
	if key == "" {
		return nil
	}
	v := m[key]
	if v == nil {
		v = made()
		m[key] = v
	}
	return v
}
