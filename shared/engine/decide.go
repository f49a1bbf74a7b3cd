package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Config tunes an Engine. The zero value gives the defaults.
type Config struct {
	// InlineResultBytes is the largest step result kept in the snapshot; larger ones
	// are written outside it and loaded when a template reads them (R-S1).
	InlineResultBytes int
	// MaxLoopItems bounds a loop's collection.
	MaxLoopItems int
	// PartRef names a part of a large command (commandsize.go) the caller
	// stores in its result store: a reference of the execution, from the
	// part's name and content hash. Nil (no result store): a command over
	// MaxCommandBytes fails its step.
	PartRef func(executionID int64, name, id string) string
}

// Defaults of Config.
const (
	DefaultInlineResultBytes = 64 << 10
	DefaultMaxLoopItems      = 1_000_000
)

// Engine decides what happens next in executions. It holds configuration only and
// is safe for concurrent use.
type Engine struct{ cfg Config }

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.InlineResultBytes <= 0 {
		cfg.InlineResultBytes = DefaultInlineResultBytes
	}
	if cfg.MaxLoopItems <= 0 {
		cfg.MaxLoopItems = DefaultMaxLoopItems
	}
	return &Engine{cfg: cfg}
}

// Handle folds the trigger event into snap and decides what follows: the events to
// append after it (already folded into snap), the commands to issue and the values
// to store. The trigger's Seq, ID and Time must be set by the caller; emitted events
// take the next sequence numbers, ids from in.NewID, and the trigger's time.
//
// On a *NeedResultsError the caller loads the named values and calls again with a
// fresh copy of the snapshot (this call may have changed snap).
func (e *Engine) Handle(pb *playbook.Playbook, run *Run, snap *Snapshot, trigger Event, in Inputs) (out *Outcome, err error) {
	d := &decider{e: e, pb: pb, g: pb.Graph(), run: run, s: snap, in: in, trig: trigger,
		out: &Outcome{}, local: map[ResultKey]any{}, queued: playbook.NewBitset(len(pb.Steps)), budget: tmpl.NewBudget()}
	defer func() {
		if r := recover(); r != nil {
			need, ok := r.(needResults)
			if !ok {
				panic(r)
			}
			out, err = nil, &NeedResultsError{Keys: need}
		}
	}()
	d.decide()
	return d.out, nil
}

// needResults is raised inside a decision when a stored value is missing; Handle
// turns it into a NeedResultsError.
type needResults []ResultKey

type decider struct {
	e    *Engine
	pb   *playbook.Playbook
	g    *playbook.Graph
	run  *Run
	s    *Snapshot
	in   Inputs
	trig Event
	out  *Outcome
	// local holds values written or known during this call (loop items rendered at
	// dispatch, iteration results just reported).
	local  map[ResultKey]any
	work   rankHeap
	queued playbook.Bitset
	// budget bounds what every template rendered in this decision builds, together
	// (tmpl.Budget): one budget per event, so neither many templates nor many
	// iterations issued at once multiply the allowance. Exceeding it is a render
	// error like any other: deterministic, never retried, on_error applies (R-L6).
	budget *tmpl.Budget
	// sizeBuf is scratch space for measuring commands (boundCommand).
	sizeBuf []byte
	// missing are the stored values this decision found missing so far, and
	// gathering counts the open blocks (gather) that collect them rather than
	// stop at the first, so the caller loads them in one round.
	missing   needResults
	missed    map[ResultKey]bool
	gathering int
	// gen counts the changes to what templates read (every event folded but a
	// command's bookkeeping, every value written), ctxGen those to the context;
	// shared is `steps` kept up to date, overCtx `ctx` under an arc set, tokens
	// the arc sets it was laid over, and inWhen says a when is rendering
	// (views.go).
	gen, ctxGen uint64
	shared      sharedSteps
	overCtx     overCtx
	tokens      uint64
	inWhen      bool
}

func (d *decider) decide() {
	trigType := eventtype.Canonical(d.trig.Type)
	wasTerminal := d.s.Terminal()
	oc := classify(d.s, d.trig)
	if oc.cmd != nil && oc.final {
		d.out.Finished = &Finished{CommandID: oc.id, OK: oc.ok, Class: oc.class}
	}
	d.apply(d.trig)
	if wasTerminal && trigType != eventtype.PlaybookRedriven {
		return // late events of an ended execution are recorded, never acted on (R-R10)
	}
	switch trigType {
	case eventtype.PlaybookStarted:
		d.enter(d.pb.Start(), nil, false)
	case eventtype.PlaybookRedriven:
		if !wasTerminal {
			return // only an ended execution is redriven; the caller refuses the rest
		}
		d.redrive()
	case eventtype.CommandCompleted, eventtype.CommandFailed, eventtype.CommandExpired:
		d.commandEnded(oc)
	case eventtype.PlaybookCancelled, eventtype.PlaybookCompleted, eventtype.PlaybookFailed:
		// Cancel or an operator's finalize (R-R10): stop everything in flight.
		d.abort()
		return
	}
	d.settle()
}

// emit appends an engine event and folds it at once, so later decisions in this
// call see it.
func (d *decider) emit(ev Event) {
	ev.Seq = d.s.Seq + 1
	ev.ID = d.in.NewID()
	ev.Time = d.trig.Time
	if ev.Context == nil {
		ev.Context = map[string]any{}
	}
	d.apply(ev)
	d.out.Events = append(d.out.Events, ev)
}

func (d *decider) stepIndex(name string) int { return d.pb.Step(name).Index }

// ---- command outcomes ----

func (d *decider) commandEnded(oc cmdOutcome) {
	if oc.cmd == nil {
		return // unknown or already finished: fenced by the store, ignored here
	}
	if !oc.final {
		d.scheduleRetry(oc)
		return
	}
	st := d.s.Steps[oc.cmd.Step]
	step := d.pb.Step(oc.cmd.Step)
	if step == nil || st == nil || st.Visit == nil || st.Visit.N != oc.cmd.Visit {
		return // a late report for a visit that already ended
	}
	switch {
	case oc.cmd.Claim:
		d.claimEnded(step, st, oc)
	case oc.cmd.Index >= 0:
		d.iterationEnded(step, st, oc)
	default:
		d.singleEnded(step, st, oc)
	}
}

// scheduleRetry re-issues a failed command after its backoff (R-L6): same id,
// attempt + 1, available from the trigger's time plus the delay.
func (d *decider) scheduleRetry(oc cmdOutcome) {
	step := d.pb.Step(oc.cmd.Step)
	k := oc.cmd.Attempt // this is retry number k
	delay := pipeline.RetryDelaySeconds(step.Retry.Delay, step.Retry.Backoff, k, step.Retry.MaxDelay)
	at := d.trig.Time.Add(seconds(delay))
	attempt := oc.cmd.Attempt + 1
	d.emit(Event{Type: eventtype.CommandRetry, Step: oc.cmd.Step, Status: "PENDING", CommandID: oc.id,
		Context: map[string]any{"error": oc.errMsg},
		Meta: map[string]any{"command_id": oc.id, "attempt": int64(attempt), "available_at": at.UTC().Format(timeLayout),
			"delay_seconds": delay, "class": oc.class}})
	d.out.Retries = append(d.out.Retries, RetryOrder{CommandID: oc.id, Attempt: attempt, AvailableAt: at})
}

func (d *decider) singleEnded(step *playbook.Step, st *StepState, oc cmdOutcome) {
	switch {
	case oc.ok && oc.ref != "" && (!step.UsesPolicy() || !carriesContextUpdates(d.resultData(oc))):
		// Stored by reference, it stays there: read only if a template reads
		// it (set, next, a later step), never copied into the shard (tens of
		// MB under the execution's lock). A pipeline's or a policy's result
		// is read first for the context updates it may carry.
		d.complete(step, st, storedResult{oc.ref}, nil, "", oc.ref)
	case oc.ok:
		data, updates := splitContextUpdates(d.resultData(oc))
		d.complete(step, st, data, updates, "", oc.ref)
	case d.s.Status != lifecycle.ExecutionRunning:
		d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionFailed,
			Context: map[string]any{"visit": int64(st.Visit.N), "error": oc.errMsg}})
	case step.OnError == playbook.OnErrorContinue:
		d.complete(step, st, map[string]any{"error": oc.errMsg}, nil, oc.errMsg, "")
	default:
		d.failStep(step, oc.errMsg)
	}
}

func (d *decider) iterationEnded(step *playbook.Step, st *StepState, oc cmdOutcome) {
	v := st.Visit
	key := ResultKey{Kind: KindStepResult, Step: step.Name, Visit: v.N, Index: oc.cmd.Index}
	if oc.ok {
		data, updates := splitContextUpdates(d.resultData(oc))
		d.write(key, data)
		if len(updates) > 0 && d.s.Status == lifecycle.ExecutionRunning {
			// R-W3: applied before the next iteration renders.
			d.emit(Event{Type: eventtype.CtxUpdated, Step: step.Name, Status: "CONTEXT",
				Context: map[string]any{"step": step.Name, "values": updates}})
		}
	} else {
		switch {
		case step.OnError == playbook.OnErrorContinue:
			d.write(key, map[string]any{"error": oc.errMsg})
		case d.s.Status == lifecycle.ExecutionRunning:
			d.failStep(step, fmt.Sprintf("iteration %d: %s", oc.cmd.Index, oc.errMsg))
			return
		}
	}
	if d.s.Status != lifecycle.ExecutionRunning {
		if v.InFlight == 0 {
			d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionCancelled,
				Context: map[string]any{"visit": int64(v.N), "error": "the loop was stopped because the execution is failing"}})
		}
		return
	}
	d.fillLoop(step, st)
	if step.Loop.Cursor != nil || st.Visit != v || v.InFlight > 0 || v.Loop.Done+v.Loop.Failed < v.Loop.Total {
		return // a cursor loop ends when a claim says so (claimEnded)
	}
	d.completeLoop(step, st)
}

// completeLoop completes a loop visit with its iterations' results in order.
func (d *decider) completeLoop(step *playbook.Step, st *StepState) {
	v := st.Visit
	keys := make([]ResultKey, v.Loop.Total)
	for i := range keys {
		keys[i] = ResultKey{Kind: KindStepResult, Step: step.Name, Visit: v.N, Index: i}
	}
	d.complete(step, st, d.loadAll(keys), nil, "", "")
}

// claimEnded takes a cursor loop's claim result: its rows become the loop's next
// items (loop.claimed), issued up to the limit. A claim that returns no row while
// nothing is in flight ends the loop; one that returns none while iterations run
// stops claiming until they have ended, since they may add rows (a next page),
// and then one more claim decides. A claim that fails after its retries fails
// the step: on_error applies to iterations, not to the source of the rows.
func (d *decider) claimEnded(step *playbook.Step, st *StepState, oc cmdOutcome) {
	v := st.Visit
	var rows []any
	errMsg := oc.errMsg
	if oc.ok {
		var err error
		if rows, err = claimedRows(d.resultData(oc)); err != nil {
			errMsg = err.Error()
		}
	}
	if d.s.Status != lifecycle.ExecutionRunning {
		if v.InFlight == 0 {
			d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionCancelled,
				Context: map[string]any{"visit": int64(v.N), "error": "the loop was stopped because the execution is failing"}})
		}
		return
	}
	if !oc.ok || errMsg != "" {
		d.failStep(step, "loop.cursor claim: "+errMsg)
		return
	}
	items := rows
	if step.Loop.Cursor.PerFrame && len(rows) > 0 {
		items = []any{rows}
	}
	base := v.Loop.Total
	if base+len(items) > d.e.cfg.MaxLoopItems {
		d.failStep(step, fmt.Sprintf("loop.cursor: the loop has claimed %d items, more than the limit of %d", base+len(items), d.e.cfg.MaxLoopItems))
		return
	}
	key := func(i int) ResultKey { return ResultKey{Kind: KindLoopItem, Step: step.Name, Visit: v.N, Index: i} }
	for i, it := range items {
		d.local[key(base+i)] = it
	}
	claimed := map[string]any{"visit": int64(v.N), "claimed": int64(len(rows)), "total": int64(base + len(items)), "drained": len(rows) == 0}
	if tx := claimTxid(d.resultData(oc)); tx != "" && len(rows) > 0 {
		claimed["txid"] = tx
	}
	d.emit(Event{Type: eventtype.LoopClaimed, Step: step.Name, Status: "CLAIMED", CommandID: oc.id, Context: claimed})
	if len(rows) == 0 && v.InFlight == 0 {
		d.completeLoop(step, st)
		return
	}
	d.fillLoop(step, st)
	// Rows claimed now and not issued yet wait in the store.
	for i := max(base, v.Loop.Issued); i < base+len(items); i++ {
		d.write(key(i), d.local[key(i)])
	}
}

// claimTxid is the transaction id our worker reports with a claim it holds open
// until the server has its rows (shared/tools' Claim); "" from NoETL's workers,
// which commit the claim before reporting it.
func claimTxid(data any) string {
	m, _ := data.(map[string]any)
	s, _ := m[toolresult.ClaimTxidKey].(string)
	return s
}

// claimedRows reads the rows a claim returned: the statement's rows (the last
// statement's, at the top of the postgres tool's data as NoETL's current tool
// has them, or under command_N), or a list given as the data itself.
func claimedRows(data any) ([]any, error) {
	switch x := data.(type) {
	case []any:
		return x, nil
	case map[string]any:
		if rows, ok := x["rows"].([]any); ok {
			return rows, nil
		}
		for i := jsonx.Int(x["statement_count"]) - 1; i >= 0; i-- {
			if c, ok := x["command_"+strconv.Itoa(i)].(map[string]any); ok {
				if rows, ok := c["rows"].([]any); ok {
					return rows, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("the claim returned no rows (got %s): end the claim with a statement that returns the rows it took (UPDATE … RETURNING, or SELECT)", jsonx.Describe(data))
}

// ---- dispatch ----

// enter starts a new visit of step (dsl.md §4.2). checkWhen is false only for the
// start step at playbook start (§4.1).
func (d *decider) enter(step *playbook.Step, arcSet map[string]any, checkWhen bool) {
	st := d.s.step(step.Name)
	visit := st.Visits + 1
	if visit > step.MaxVisits {
		// R-J8: fails the playbook whatever on_error says.
		d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionFailed, Context: map[string]any{
			"visit": int64(st.Visits), "error": fmt.Sprintf("step %q exceeded max_visits (%d); raise spec.max_visits if the cycle is intended", step.Name, step.MaxVisits)}})
		d.enterFailing()
		return
	}
	b := &bindings{arcSet: arcSet}
	if checkWhen && step.When != nil {
		ok, err := d.holds(step.When, b)
		if err != nil {
			d.emitEnter(step, visit, arcSet, nil)
			d.renderFailed(step, "when", err)
			return
		}
		if !ok {
			d.emit(Event{Type: eventtype.StepSkipped, Step: step.Name, Status: "SKIPPED",
				Context: map[string]any{"reason": "when is false"}})
			d.stepEnded(step)
			return
		}
	}
	if checkWhen {
		for i, r := range step.Admit {
			if r.When != nil {
				ok, err := d.holds(r.When, b)
				if err != nil {
					d.emitEnter(step, visit, arcSet, nil)
					d.renderFailed(step, fmt.Sprintf("spec.policy.admit.rules[%d].when", i), err)
					return
				}
				if !ok {
					continue
				}
			}
			if !r.Allow {
				d.emit(Event{Type: eventtype.StepSkipped, Step: step.Name, Status: "SKIPPED",
					Context: map[string]any{"reason": fmt.Sprintf("admit rule %d refused", i)}})
				d.stepEnded(step)
				return
			}
			break
		}
	}
	if msg := unsupported(step); msg != "" {
		d.emitEnter(step, visit, arcSet, nil)
		d.failStep(step, msg)
		return
	}
	if step.Loop == nil {
		d.emitEnter(step, visit, arcSet, nil)
		d.issue(step, d.s.Steps[step.Name], nil)
		return
	}
	var items []any
	if step.Loop.Cursor == nil {
		coll, err := d.renderValue(step.Loop.In, b)
		if err == nil {
			items, err = collection(coll, d.e.cfg.MaxLoopItems)
		}
		if err != nil {
			d.emitEnter(step, visit, arcSet, nil)
			d.renderFailed(step, "loop.in", err)
			return
		}
	}
	limit := step.Loop.MaxInFlight
	if step.Loop.MaxInFlightT != nil && step.Loop.Mode != playbook.ModeSequential {
		var err error
		if limit, err = d.renderLimit(step.Loop.MaxInFlightT, b); err != nil {
			d.emitEnter(step, visit, arcSet, nil)
			d.renderFailed(step, "loop max_in_flight", err)
			return
		}
		// The parser bounds a written limit; a rendered one is checked here,
		// before any iteration is issued.
		if n := limit * rowConcurrency(step); n > playbook.MaxLoopInFlight {
			d.emitEnter(step, visit, arcSet, nil)
			what := "the rendered value"
			if n != limit {
				what += " × loop.spec.frame.row_concurrency"
			}
			d.renderFailed(step, "loop max_in_flight", errors.New(playbook.InFlightError(what, n)))
			return
		}
	}
	ls := &LoopState{Total: len(items), Iterator: step.Loop.Iterator, Cursor: step.Loop.Cursor != nil}
	if step.Loop.MaxInFlightT != nil {
		ls.Limit = limit // folded from step.enter, so later fills use the same limit
	}
	if !ls.Cursor {
		ls.Kept = d.keep(step, st.Kept, visit, len(items))
	}
	d.emitEnter(step, visit, arcSet, ls)
	if ls.Cursor {
		d.fillLoop(step, d.s.Steps[step.Name]) // issues the first claim
		return
	}
	if len(items) == len(ls.Kept) {
		// Empty loops complete at once, and so do loops a redrive kept whole.
		d.completeLoop(step, d.s.Steps[step.Name])
		return
	}
	first := 1
	if step.Loop.Mode == playbook.ModeParallel {
		first = min(len(items), limit)
	}
	for i, item := range items {
		if _, kept := slices.BinarySearch(ls.Kept, i); kept {
			continue
		}
		key := ResultKey{Kind: KindLoopItem, Step: step.Name, Visit: visit, Index: i}
		if first > 0 {
			first--
			d.local[key] = item // issued in this call: no need to store
		} else {
			d.write(key, item)
		}
	}
	d.fillLoop(step, d.s.Steps[step.Name])
}

// keep copies the results of the iterations a redrive kept (those of the
// previous visit within the new collection) to the new visit and returns
// their indexes: they count as done and are never issued.
func (d *decider) keep(step *playbook.Step, k *KeptIterations, visit, total int) []int {
	if k == nil {
		return nil
	}
	var idx []int
	var old []ResultKey
	for _, i := range k.Indexes {
		if i < total {
			idx = append(idx, i)
			old = append(old, ResultKey{Kind: KindStepResult, Step: step.Name, Visit: k.Visit, Index: i})
		}
	}
	for j, v := range d.loadAll(old) {
		d.write(ResultKey{Kind: KindStepResult, Step: step.Name, Visit: visit, Index: idx[j]}, v)
	}
	return idx
}

func (d *decider) emitEnter(step *playbook.Step, visit int, arcSet map[string]any, loop *LoopState) {
	c := map[string]any{"visit": int64(visit)}
	if len(arcSet) > 0 {
		c["arc_set"] = arcSet
	}
	if loop != nil {
		c["iterations_expected"] = int64(loop.Total)
		// NoETL names it iterator_var; iterator is R-R8's name (both kept).
		c["iterator"], c["iterator_var"] = loop.Iterator, loop.Iterator
		if loop.Limit > 0 {
			c["max_in_flight"] = int64(loop.Limit)
		}
		if loop.Cursor {
			c["cursor"] = true
		}
		if len(loop.Kept) > 0 {
			kept := make([]any, len(loop.Kept))
			for i, n := range loop.Kept {
				kept[i] = int64(n)
			}
			c["kept"] = kept
		}
	}
	d.emit(Event{Type: eventtype.StepEnter, Step: step.Name, Status: "ENTERED", Context: c,
		Meta: map[string]any{"visit": int64(visit)}})
}

// fillLoop issues iterations up to the loop's limit: one at a time in order when
// sequential, up to max_in_flight when parallel (R-A9) or a cursor loop, whose
// claim then asks for more rows when none is left to issue.
func (d *decider) fillLoop(step *playbook.Step, st *StepState) {
	v := st.Visit
	limit := d.loopLimit(step, v)
	for st.Visit == v && nextIteration(v.Loop) < v.Loop.Total && v.InFlight-claiming(v) < limit && d.s.Status == lifecycle.ExecutionRunning {
		i := nextIteration(v.Loop)
		item := d.load(ResultKey{Kind: KindLoopItem, Step: step.Name, Visit: v.N, Index: i})
		d.issue(step, st, &iteration{index: i, total: v.Loop.Total, iterator: step.Loop.Iterator, item: item})
	}
	if step.Loop.Cursor != nil {
		d.claim(step, st)
	}
}

// nextIteration is the next iteration to issue: the first not issued that a
// redrive did not keep.
func nextIteration(l *LoopState) int {
	i := l.Issued
	for i < l.Total {
		if _, kept := slices.BinarySearch(l.Kept, i); !kept {
			break
		}
		i++
	}
	return i
}

// loopLimit is how many iterations of the visit may be in flight at once.
func (d *decider) loopLimit(step *playbook.Step, v *Visit) int {
	if step.Loop.Mode == playbook.ModeSequential {
		return 1
	}
	limit := step.Loop.MaxInFlight
	if v.Loop.Limit > 0 {
		limit = v.Loop.Limit // a templated max_in_flight, rendered at entry
	}
	return limit * rowConcurrency(step)
}

// rowConcurrency multiplies a cursor loop's limit (1 for other loops).
func rowConcurrency(step *playbook.Step) int {
	if c := step.Loop.Cursor; c != nil && c.RowConcurrency > 1 {
		return c.RowConcurrency
	}
	return 1
}

// claiming is 1 while the visit's claim command is in flight: it counts in
// InFlight but not against the loop's limit.
func claiming(v *Visit) int {
	if v.Loop.Claiming {
		return 1
	}
	return 0
}

// claim issues a cursor loop's claim when every claimed row has been issued and
// no claim is in flight; after a claim that returned nothing, only once the
// iterations in flight have ended. The claim is a command of the cursor's kind
// (a postgres statement, which NoETL's workers run too) whose payload's cursor
// block tells ours to hold the claim's transaction open until the server has
// its rows (shared/worker).
func (d *decider) claim(step *playbook.Step, st *StepState) {
	v := st.Visit
	if v == nil || v.Loop == nil || d.s.Status != lifecycle.ExecutionRunning || v.Loop.Claiming || v.Loop.Issued < v.Loop.Total || (v.Loop.Drained && v.InFlight > 0) {
		return
	}
	c := step.Loop.Cursor
	batch := c.Batch
	if batch == 0 {
		batch = d.loopLimit(step, v)
	}
	process := "row"
	if c.PerFrame {
		process = "frame"
	}
	b := &bindings{arcSet: v.ArcSet, extra: map[string]any{
		"__frame_max_rows": int64(batch), "__worker_slot_id": fmt.Sprintf("%s#%d", step.Name, v.N),
		"__frame_policy": map[string]any{"max_rows": int64(batch), "process": process},
	}}
	auth, err := d.render(c.Auth, b)
	if err != nil {
		d.renderFailed(step, "loop.cursor.auth", err)
		return
	}
	query, err := d.render(c.Claim, b)
	if err != nil {
		d.renderFailed(step, "loop.cursor.claim", err)
		return
	}
	cursor := map[string]any{"claim": true, "max_rows": int64(batch), "iterator": step.Loop.Iterator}
	if c.Options != nil {
		cursor["options"] = c.Options
	}
	payload := map[string]any{"step": step.Name, "visit": int64(v.N), "timeout_seconds": int64(step.Timeout),
		"tool_config": map[string]any{"auth": tmpl.Text(auth), "query": tmpl.Text(query), "args": map[string]any{}},
		"args":        map[string]any{}, "cursor": cursor}
	d.emitCommand(step, st, c.Kind, -1, payload, map[string]any{"cursor_claim": true, "claim_rows": int64(batch)})
}

// issue renders and emits one command. A render error is deterministic: it is
// never retried and on_error applies (R-L6).
func (d *decider) issue(step *playbook.Step, st *StepState, it *iteration) {
	b := &bindings{arcSet: st.Visit.ArcSet, iter: it}
	payload, err := d.commandPayload(step, st.Visit.N, b)
	if err != nil {
		d.renderFailed(step, "tool", err)
		return
	}
	if err := d.boundCommand(step, payload); err != nil {
		d.renderFailed(step, "command", err)
		return
	}
	index := -1
	var extra map[string]any
	if it != nil {
		index = it.index
		extra = map[string]any{"iteration_index": int64(it.index), "iteration_total": int64(it.total),
			"iterator_step": step.Name, "item_var": it.iterator, "iterator": it.iterator}
		if tx := st.Visit.Loop.ClaimTxid; step.Loop.Cursor != nil && tx != "" {
			// The claim's worker commits its rows once the server has them, so an
			// iteration could otherwise run before the rows it works on are
			// claimed; the worker waits for the claim's transaction to end first.
			auth, err := d.render(step.Loop.Cursor.Auth, b)
			if err != nil {
				d.renderFailed(step, "loop.cursor.auth", err)
				return
			}
			payload["cursor"] = map[string]any{"after_txid": tx, "auth": tmpl.Text(auth)}
		}
	}
	d.emitCommand(step, st, step.ToolKind(), index, payload, extra)
}

// emitCommand emits command.issued for a payload and hands the command out.
func (d *decider) emitCommand(step *playbook.Step, st *StepState, kind string, index int, payload, extra map[string]any) {
	id := d.in.NewID()
	cmdID := CommandID(d.run.ExecutionID, step.Name, id, index)
	meta := map[string]any{
		"command_id": cmdID, "step": step.Name, "visit": int64(st.Visit.N), "tool_kind": kind,
		"attempt": int64(1), "attempts": int64(1), "max_attempts": int64(step.Retry.MaxAttempts),
		"retry_on": anySlice(step.Retry.On), "execution_id": fmt.Sprint(d.run.ExecutionID),
		"catalog_id": fmt.Sprint(d.run.CatalogID), "actionable": true, "timeout_seconds": int64(step.Timeout),
	}
	if len(step.Retry.OnStatus) > 0 {
		meta["retry_on_status"] = anySlice(step.Retry.OnStatus)
	}
	maps.Copy(meta, extra)
	ev := Event{Type: eventtype.CommandIssued, Step: step.Name, NodeType: kind, Status: "PENDING",
		CommandID: cmdID, Context: payload, Meta: meta}
	// The command id embeds the event id, so emit is inlined here to use id.
	ev.Seq, ev.ID, ev.Time = d.s.Seq+1, id, d.trig.Time
	d.apply(ev)
	d.out.Events = append(d.out.Events, ev)
	d.out.Commands = append(d.out.Commands, Command{
		ID: cmdID, IssuedEventID: id, Step: step.Name, Visit: st.Visit.N, Index: index,
		ToolKind: kind, Attempt: 1, MaxAttempts: step.Retry.MaxAttempts, Timeout: step.Timeout,
		AvailableAt: d.trig.Time, Payload: payload, Meta: meta,
	})
}

// renderFailed fails a step whose template could not render at dispatch.
func (d *decider) renderFailed(step *playbook.Step, what string, err error) {
	msg := fmt.Sprintf("%s: %v", what, err)
	if step.OnError == playbook.OnErrorContinue {
		d.complete(step, d.s.Steps[step.Name], map[string]any{"error": msg}, nil, msg, "")
		return
	}
	d.failStep(step, msg)
}

func unsupported(step *playbook.Step) string {
	if step.Loop != nil && step.Loop.Unsupported != "" {
		return step.Loop.Unsupported
	}
	if step.Tool != nil && !step.Tool.Supported {
		return fmt.Sprintf("tool kind %s is not supported (R-N1)", step.Tool.Kind)
	}
	for _, it := range step.Pipeline {
		if !it.Tool.Supported {
			return fmt.Sprintf("tool kind %s is not supported (pipeline item %s, R-N1)", it.Tool.Kind, it.Label)
		}
	}
	return ""
}

// renderLimit renders a templated max_in_flight; it must be a whole number ≥ 1.
func (d *decider) renderLimit(t *tmpl.Template, b *bindings) (int, error) {
	v, err := d.render(t, b)
	if err != nil {
		return 0, err
	}
	if s, ok := v.(string); ok {
		// A mixed template renders text; "4" means 4.
		if n, convErr := strconv.Atoi(strings.TrimSpace(s)); convErr == nil {
			v = int64(n)
		}
	}
	switch n := v.(type) {
	case int64:
		if n >= 1 && n <= math.MaxInt32 {
			return int(n), nil
		}
	case float64:
		if n == math.Trunc(n) && n >= 1 && n <= math.MaxInt32 {
			return int(n), nil
		}
	}
	return 0, fmt.Errorf("must render to a whole number ≥ 1, got %s", jsonx.Describe(v))
}

// collection turns a rendered loop.in into items (dsl.md §4.2, R-A9).
func collection(v any, limit int) ([]any, error) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		items = x
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			items = append(items, map[string]any{"key": k, "value": x[k]})
		}
	case int64:
		if x < 0 || x > int64(limit) {
			return nil, fmt.Errorf("loop count %d is out of range 0..%d", x, limit)
		}
		items = make([]any, x)
		for i := range items {
			items[i] = int64(i)
		}
	case float64:
		if x != float64(int64(x)) {
			return nil, fmt.Errorf("loop count %v is not a whole number", x)
		}
		return collection(int64(x), limit)
	case string:
		return nil, fmt.Errorf("loop collection rendered to a string, expected a list, an object or a count (parse JSON text with | fromjson)")
	default:
		return nil, fmt.Errorf("loop collection must be a list, an object or a count, got %s", jsonx.TypeName(v))
	}
	if len(items) > limit {
		return nil, fmt.Errorf("loop collection has %d items, more than the limit of %d", len(items), limit)
	}
	return items, nil
}

// ---- completion, failure, routing ----

// complete finishes a step's visit (dsl.md §4.6): durable updates, set, step.exit
// with the arcs that fired, then the successors are re-checked. ref is the URI
// the worker stored the result at, when it did (the step's _ref in templates).
func (d *decider) complete(step *playbook.Step, st *StepState, result any, updates map[string]any, errMsg, ref string) {
	stored, _ := result.(storedResult)
	if stored.uri != "" {
		result = nil // loaded if the step's set or next reads it (bindings.stored)
	}
	v := st.Visit
	exit := map[string]any{"visit": int64(v.N)}
	if errMsg != "" {
		exit["error"] = errMsg
	}
	if ref != "" {
		exit["result_uri"] = ref
	}
	if d.s.Status != lifecycle.ExecutionRunning {
		// A late completion while failing is recorded, never routed (R-R9).
		d.putResult(exit, step, v.N, result, stored.uri)
		d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionCompleted, Context: exit})
		return
	}
	if len(updates) > 0 {
		d.emit(Event{Type: eventtype.CtxUpdated, Step: step.Name, Status: "CONTEXT",
			Context: map[string]any{"step": step.Name, "values": updates}})
	}
	eventName := "step.exit"
	if step.Loop != nil {
		eventName = "loop.done"
	}
	b := &bindings{arcSet: v.ArcSet, phase: true, output: result, stored: stored.uri, errMsg: errMsg, self: step.Name,
		event: map[string]any{"name": eventName, "step": step.Name, "status": lifecycle.ExecutionCompleted}}
	values, err := d.renderSet(step.Set, b)
	if err != nil {
		d.failStep(step, fmt.Sprintf("set: %v", err))
		return
	}
	if len(values) > 0 {
		d.emit(Event{Type: eventtype.CtxUpdated, Step: step.Name, Status: "CONTEXT",
			Context: map[string]any{"step": step.Name, "values": values}})
	}
	fired, err := d.route(step, b)
	if err != nil {
		d.failStep(step, fmt.Sprintf("next: %v", err))
		return
	}
	if len(fired) > 0 {
		exit["fired"] = fired
	}
	d.putResult(exit, step, v.N, result, stored.uri)
	d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionCompleted, Context: exit})
	d.stepEnded(step)
}

// storedResult is a step's result the worker stored by reference at uri,
// not read.
type storedResult struct{ uri string }

// putResult records a result in a step.exit context, by reference when large
// (R-S1): one the worker stored (storedURI) by its reference, read from the
// result store when needed.
func (d *decider) putResult(exit map[string]any, step *playbook.Step, visit int, result any, storedURI string) {
	if storedURI != "" {
		exit["result_ref"] = map[string]any{"kind": string(KindReference), "step": step.Name, "visit": int64(visit), "index": int64(-1), "uri": storedURI}
		return
	}
	b, err := jsonx.Marshal(result)
	if err == nil && len(b) > d.e.cfg.InlineResultBytes {
		key := ResultKey{Kind: KindStepResult, Step: step.Name, Visit: visit, Index: -1}
		d.write(key, result)
		exit["result_ref"] = map[string]any{"kind": string(key.Kind), "step": key.Step, "visit": int64(key.Visit), "index": int64(-1)}
		return
	}
	exit["result"] = result
}

// route evaluates next against the updated context (dsl.md §3, §4.6).
func (d *decider) route(step *playbook.Step, b *bindings) ([]any, error) {
	if step.Next == nil {
		return nil, nil
	}
	var fired []any
	for i, a := range step.Next.Arcs {
		d.out.Work.ArcsExamined++
		if a.When != nil {
			ok, err := d.holds(a.When, b)
			if err != nil {
				return nil, fmt.Errorf("arc %d (to %s) when: %w", i, a.To, err)
			}
			if !ok {
				continue
			}
		}
		f := map[string]any{"step": a.To}
		if len(a.Set) > 0 {
			values, err := d.renderSet(a.Set, b)
			if err != nil {
				return nil, fmt.Errorf("arc %d (to %s) set: %w", i, a.To, err)
			}
			f["set"] = values
		}
		fired = append(fired, f)
		if step.Next.Mode == playbook.ModeExclusive {
			break
		}
	}
	return fired, nil
}

// failStep fails a step fatally: the execution starts failing (R-R9).
func (d *decider) failStep(step *playbook.Step, msg string) {
	c := map[string]any{"error": msg}
	if st := d.s.Steps[step.Name]; st != nil && st.Visit != nil {
		c["visit"] = int64(st.Visit.N)
	}
	d.emit(Event{Type: eventtype.StepExit, Step: step.Name, Status: lifecycle.ExecutionFailed, Context: c})
	d.enterFailing()
}

// enterFailing cancels what has not started: pending commands and scheduled retries
// (R-R9). Claimed and running commands are let finish.
func (d *decider) enterFailing() {
	touched := d.cancelCommands(func(c *CommandState) bool {
		return c.Status == CmdPending || c.Status == CmdRetrying
	}, "the execution is failing")
	for _, name := range touched {
		if st := d.s.Steps[name]; st != nil && st.Visit != nil && st.Visit.InFlight == 0 {
			d.emit(Event{Type: eventtype.StepExit, Step: name, Status: lifecycle.ExecutionCancelled,
				Context: map[string]any{"visit": int64(st.Visit.N), "error": "cancelled because the execution is failing"}})
		}
	}
}

// cancelCommands emits command.cancelled for the in-flight commands match selects,
// in id order, and returns the steps they belonged to.
func (d *decider) cancelCommands(match func(*CommandState) bool, reason string) []string {
	var ids []string
	for id, c := range d.s.Commands {
		if match(c) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var steps []string
	for _, id := range ids {
		c := d.s.Commands[id]
		if !slices.Contains(steps, c.Step) {
			steps = append(steps, c.Step)
		}
		d.emit(Event{Type: eventtype.CommandCancelled, Step: c.Step, Status: "CANCELLED", CommandID: id,
			Context: map[string]any{"reason": reason}, Meta: map[string]any{"command_id": id}})
		d.out.Cancelled = append(d.out.Cancelled, id)
	}
	sort.Strings(steps)
	return steps
}

// abort ends an execution that cancel or finalize made terminal (R-R10): every
// command in flight is cancelled and every visit in progress closed.
func (d *decider) abort() {
	d.cancelCommands(func(*CommandState) bool { return true }, "the execution was "+strings.ToLower(d.s.Status))
	d.closeVisits("the execution was " + strings.ToLower(d.s.Status))
}

// closeVisits writes step.exit CANCELLED for every visit still in progress. It runs
// once per execution, at its end, so walking the steps is fine here.
func (d *decider) closeVisits(reason string) {
	if d.s.Running == 0 {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(d.s.Steps)) {
		if st := d.s.Steps[name]; st.Visit != nil {
			d.emit(Event{Type: eventtype.StepExit, Step: name, Status: lifecycle.ExecutionCancelled,
				Context: map[string]any{"visit": int64(st.Visit.N), "error": reason}})
		}
	}
}

// ---- joins, skips, completion ----

// stepEnded queues what a step's end may unblock (R-J5): its successors, the
// waiting steps whose ancestor set contains it, and itself when arcs wait in its
// ledger (a self-loop, or arcs that arrived while it ran, R-J7).
func (d *decider) stepEnded(step *playbook.Step) {
	i := step.Index
	for _, t := range d.g.Succ[i] {
		d.push(t)
	}
	for _, w := range d.s.Waiting {
		if wi := d.stepIndex(w); d.g.Anc[wi].Has(i) {
			d.push(wi)
		}
	}
	if st := d.s.Steps[step.Name]; st != nil && len(st.Ledger) > 0 {
		d.push(i)
	}
}

func (d *decider) push(i int) {
	if !d.queued.Has(i) {
		d.queued.Set(i)
		heap.Push(&d.work, rankItem{i, d.g.Rank[i]})
	}
}

// settle runs the worklist, then the deadlock breaker, then the end-of-run checks.
func (d *decider) settle() {
	for {
		switch d.s.Status {
		case lifecycle.ExecutionRunning:
			d.drain()
			if d.s.Status != lifecycle.ExecutionRunning {
				continue
			}
			if d.s.Running > 0 {
				return
			}
			if d.s.Queued > 0 {
				d.breakDeadlock()
				continue
			}
			// dsl.md §4.10: nothing running, nothing waiting, nothing failed. Orphaned
			// commands of visits that ended early are cancelled.
			d.cancelCommands(func(*CommandState) bool { return true }, "the execution completed")
			d.emit(Event{Type: eventtype.PlaybookCompleted, Status: lifecycle.ExecutionCompleted,
				Context: map[string]any{"result": d.s.Ctx}})
			return
		case lifecycle.ExecutionFailing:
			for _, c := range d.s.Commands {
				if c.Status == CmdClaimed || c.Status == CmdRunning {
					return // R-R9: wait for them; leases bound the wait
				}
			}
			d.cancelCommands(func(*CommandState) bool { return true }, "the execution failed")
			d.closeVisits("the execution failed")
			failed := make([]any, len(d.s.FailedSteps))
			for i, f := range d.s.FailedSteps {
				failed[i] = f
			}
			d.emit(Event{Type: eventtype.PlaybookFailed, Status: lifecycle.ExecutionFailed,
				Context: map[string]any{"error": d.s.Error, "failed_steps": failed}})
			return
		default:
			return
		}
	}
}

// drain re-checks queued steps in depth-first preorder (R-J3, R-J4).
func (d *decider) drain() {
	start := d.pb.Start().Index
	for d.work.Len() > 0 && d.s.Status == lifecycle.ExecutionRunning {
		i := heap.Pop(&d.work).(rankItem).step
		d.queued[i/64] &^= 1 << (i % 64)
		d.out.Work.StepsExamined++
		step := d.pb.Steps[i]
		if !d.g.Reachable[i] {
			continue // R-W4: never dispatched nor skipped
		}
		st := d.s.Steps[step.Name]
		if st != nil && st.Visit != nil {
			continue // visits never overlap (R-J7): re-checked when this one ends
		}
		switch {
		case st != nil && len(st.Ledger) > 0:
			if d.blocked(i) {
				d.wait(step.Name)
				continue
			}
			d.unwait(step.Name)
			d.dispatch(step, st)
		case (st == nil || st.Status == StepPending) && i != start && d.predsFinished(i):
			if d.blocked(i) {
				d.wait(step.Name)
				continue
			}
			d.unwait(step.Name)
			d.emit(Event{Type: eventtype.StepSkipped, Step: step.Name, Status: "SKIPPED",
				Context: map[string]any{"reason": "no incoming arc can fire"}})
			d.stepEnded(step)
		default:
			d.unwait(step.Name)
		}
	}
}

// dispatch starts a visit from the ledger; arc set values merge in firing order,
// later wins (R-J2).
func (d *decider) dispatch(step *playbook.Step, st *StepState) {
	var w *pathWriter
	for _, f := range st.Ledger {
		for _, k := range slices.Sorted(maps.Keys(f.Set)) {
			if w == nil {
				w = newPathWriter(nil, len(f.Set))
			}
			w.set(k, f.Set[k])
		}
	}
	var arcSet map[string]any
	if w != nil {
		arcSet = w.out
	}
	d.enter(step, arcSet, true)
}

// blocked reports whether an active step is in anc(i) (R-J3): one with a visit in
// progress (commands or retries pending) or arcs waiting in its ledger.
func (d *decider) blocked(i int) bool {
	a := d.g.Anc[i]
	for w, word := range a {
		for word != 0 {
			b := w*64 + trailingZeros(word)
			word &= word - 1
			if st := d.s.Steps[d.pb.Steps[b].Name]; st != nil && (st.Visit != nil || len(st.Ledger) > 0) {
				return true
			}
		}
	}
	return false
}

// predsFinished reports whether every forward predecessor finished or was skipped
// (R-J4); back-edge predecessors do not count (dsl.md §4.8).
func (d *decider) predsFinished(i int) bool {
	for _, p := range d.g.FwdPreds[i] {
		d.out.Work.ArcsExamined++
		st := d.s.Steps[d.pb.Steps[p].Name]
		if st == nil || st.Visit != nil || len(st.Ledger) > 0 {
			return false
		}
		switch st.Status {
		case StepCompleted, StepFailed, StepSkipped, StepCancelled:
		default:
			return false
		}
	}
	return true
}

// breakDeadlock dispatches the waiting step first in depth-first preorder when
// waiting steps block each other and nothing else is active (R-J6). Only a step
// that is deadlocked qualifies: every active step in its anc has it in its own
// anc, so they wait for each other. A step that merely waits for a deadlocked
// ancestor (one fed from inside a cycle) keeps waiting: dispatching it would
// break R-J3 and run it before the cycle ends (R-J7). As anc is transitive, such
// a step exists whenever ledgers wait and nothing runs; the fallback to any
// waiting step only guards against hanging.
func (d *decider) breakDeadlock() {
	best, fallback := -1, -1
	for _, w := range d.s.Waiting {
		i := d.stepIndex(w)
		st := d.s.Steps[w]
		if st == nil || len(st.Ledger) == 0 {
			continue
		}
		if fallback < 0 || d.g.Rank[i] < d.g.Rank[fallback] {
			fallback = i
		}
		if (best < 0 || d.g.Rank[i] < d.g.Rank[best]) && d.deadlocked(i) {
			best = i
		}
	}
	if best < 0 {
		best = fallback
	}
	if best < 0 {
		// Queued arcs on a step nobody re-checked cannot happen; fail loudly rather
		// than hang the execution.
		d.failStep(d.pb.Start(), "internal: arcs are queued but no step can be dispatched")
		return
	}
	step := d.pb.Steps[best]
	d.unwait(step.Name)
	d.dispatch(step, d.s.Steps[step.Name])
}

// deadlocked reports whether every active step in anc(i) has i in its own anc
// (R-J6): they block each other, and nothing else blocks i.
func (d *decider) deadlocked(i int) bool {
	for w, word := range d.g.Anc[i] {
		for word != 0 {
			b := w*64 + trailingZeros(word)
			word &= word - 1
			if st := d.s.Steps[d.pb.Steps[b].Name]; st != nil && (st.Visit != nil || len(st.Ledger) > 0) && !d.g.Anc[b].Has(i) {
				return false
			}
		}
	}
	return true
}

func (d *decider) wait(name string) {
	i, found := slices.BinarySearch(d.s.Waiting, name)
	if !found {
		d.s.Waiting = slices.Insert(d.s.Waiting, i, name)
	}
}

func (d *decider) unwait(name string) {
	if i, found := slices.BinarySearch(d.s.Waiting, name); found {
		d.s.Waiting = slices.Delete(d.s.Waiting, i, i+1)
	}
}

// ---- stored values ----

func (d *decider) write(key ResultKey, v any) {
	d.gen++
	d.local[key] = v
	d.out.Writes = append(d.out.Writes, ResultWrite{Key: key, Value: v})
}

// resultData is a successful command's data; a result the worker stored by
// reference is read through the caller, only now that a decision needs it.
func (d *decider) resultData(oc cmdOutcome) any {
	if oc.ref == "" {
		return oc.data
	}
	return d.load(RefKey(oc.ref))
}

// load is loadAll of one key, with no slice to allocate.
func (d *decider) load(key ResultKey) any {
	if v, ok := d.local[key]; ok {
		return v
	}
	if v, ok := d.in.Results[key]; ok {
		return v
	}
	d.miss([]ResultKey{key})
	return nil
}

// loadAll returns stored values, asking the caller for every missing one at once.
// Inside a gather block a missing value reads as nil and the block goes on
// (what it builds is thrown away when the block ends); outside one the
// decision stops here, asking for everything found missing so far.
func (d *decider) loadAll(keys []ResultKey) []any {
	out := make([]any, len(keys))
	found := true
	for i, k := range keys {
		if v, ok := d.local[k]; ok {
			out[i] = v
		} else if v, ok := d.in.Results[k]; ok {
			out[i] = v
		} else {
			found = false
		}
	}
	if !found {
		d.miss(keys)
	}
	return out
}

// miss records the keys of a load that are missing, each once, and stops the
// decision outside a gather block. Outside a block nothing was missing before
// this load and its keys differ, so only a block's keys are checked.
func (d *decider) miss(keys []ResultKey) {
	for _, k := range keys {
		if _, ok := d.local[k]; ok {
			continue
		}
		if _, ok := d.in.Results[k]; ok {
			continue
		}
		if d.gathering > 0 {
			if d.missed[k] {
				continue
			}
			if d.missed == nil {
				d.missed = map[ResultKey]bool{}
			}
			d.missed[k] = true
		}
		d.missing = append(d.missing, k)
	}
	if d.gathering == 0 {
		panic(d.missing)
	}
}

// gather opens a block that collects the stored values it finds missing instead
// of stopping at the first: the names one template reads, a set block's
// entries, a command's input and config. Each of these is rendered whatever
// the values are, so nothing in the block is steered by the nil a missing
// value reads as, and every key collected is one the decision needs. Blocks
// that choose a path (when, next) stay outside: there the decision stops at
// the first missing value, and the caller's rounds (Rounds) go on. The block
// must end with flush.
func (d *decider) gather() { d.gathering++ }

// flush ends a gather block; the outermost one stops the decision, asking for
// every value found missing, before anything built from them is used.
func (d *decider) flush() {
	d.gathering--
	if d.gathering == 0 && d.missing != nil {
		panic(d.missing)
	}
}

// short says a gather block found a value missing: what it renders is thrown
// away, so a render error is not acted on, and the block goes on to collect
// the rest.
func (d *decider) short() bool { return d.missing != nil }

// ---- worklist ----

type rankItem struct{ step, rank int }

type rankHeap []rankItem

func (h rankHeap) Len() int           { return len(h) }
func (h rankHeap) Less(i, j int) bool { return h[i].rank < h[j].rank }
func (h rankHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rankHeap) Push(x any)        { *h = append(*h, x.(rankItem)) }
func (h *rankHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
