// Package replay is the pure replay fold (../shared/spec/replay.md, rulings
// R-X1..R-X4): an execution's events go in one at a time in seq order, and the
// deterministic projections with their checksums come out. No I/O: the API
// streams rows from the event table into a Folder.
//
// Typical use:
//
//	q, err := replay.ParseQuery(r.URL.Query())          // *ParamError → 400
//	f := replay.NewFolder(replay.Options{Projection: q.Projection,
//		ExecutionID: id, Cutoff: q.Cutoff, Limit: q.Limit})
//	for each row in seq order (at most Limit+1 rows) {
//		if err := f.Add(row); replay.IsStop(err) { break } else if err != nil { … }
//	}
//	st, err := f.State()                                 // st.MarshalJSON() is canonical
//
// Projections (R-X2, NoETL's fold; the parity data set pins the details):
// execution {status, last_node_name, payload_refs}, stages, frames, commands,
// business_objects, loops, plus ours: steps (a StepProjector plug-in) and our
// engine's loops keyed "<step>#<visit>" (R-X3). Only the selected projection
// is folded and emitted, so memory is O(projection size), never O(log).
//
// Rules inferred where the spec's words were open:
//   - execution.status is UNKNOWN only before the first event; any event moves
//     it to RUNNING; playbook/workflow/execution .completed/.failed/.cancelled
//     (and the legacy playbook_* spellings) set the terminal status, which
//     only another terminal event changes.
//   - execution.last_node_name is the node of the last step.enter, step.exit
//     or command.completed with a node name (the data set: "fanout", not the
//     null of playbook.completed nor the node of loop or object events).
//   - execution.payload_refs entries also carry "summary" (R-X2's words; the
//     data set has none there, and R-X1 allows extra keys).
//   - frames: any event naming the frame with a non-empty status sets it
//     (the data set's frame ends "success" from command.completed).
//   - commands: only command.* events change a command's status; others just
//     record ids and last_event_id.
//   - our loops: done/failed count iterations by their latest outcome, so a
//     failed iteration that is retried and completes counts once, as done.
//   - command.issued sets "status or PENDING" as R-X2 words it (the data set's
//     ISSUED is overwritten by the completion, so it does not pin this).
//   - payload summaries keep a zero row_count (NoETL's `or` chains drop it).
//
// Protocol details for the API: every cutoff cuts a prefix of the seq-ordered
// log (Add returns ErrCutoffReached at the first row beyond it); feed at most
// Limit+1 rows so the fold can tell a truncated log (ErrLimitReached,
// truncated=true, last_seq) from one that ends exactly at the limit; diff_from
// takes "event_id:<n>", "position:<n>", "time:<RFC 3339>" or a bare event id,
// and one pass can serve it (State at diff_from, keep adding, State again,
// Diff). Unselected projections are neither folded nor emitted.
package replay
