// Package engine runs playbooks: the per-execution snapshot, Apply (fold one
// event into it) and the orchestrator, Engine.Handle, that decides what runs
// next: the events to append, the commands to issue (their payloads and
// sizes), the values to keep outside the snapshot. What a playbook is, and
// reading one from YAML, are shared/playbook's; the engine imports no YAML.
//
// It is pure: no I/O, no clocks, no randomness. Time, ids and any large stored
// values come in through the event and the Inputs (Temporal's split between a pure
// history state machine and its persistence is the model). A decision that
// finds stored values missing returns NeedResultsError naming them; the caller
// loads them and decides again, following Rounds.
//
// The live path calls Handle once per event:
//
//	apply(trigger) → decide → for each emitted event: apply(event)
//
// so the snapshot always equals Apply folded over the event log, which is what
// replay verifies. Cost per event is independent of how long the execution already
// is: Apply touches one step and one command, and Decide re-checks only the
// successors of steps whose state changed and the waiting steps whose ancestor set
// contains them (R-J5), using the reachability shared/playbook computed once per
// playbook (R-J1).
package engine
