// Package whatif answers "what would this new playbook version have done on
// these recorded executions?" without running a tool or writing a row
// (issue 31). For each recorded execution the engine runs the new version
// from the recorded start; a simulated worker answers each command from the
// recorded result of the same command: the same step, visit and loop
// iteration, the same tool and rendered input, attempt by attempt, in the
// recorded order. A command with no side effect (noop, or a pipeline of
// noops) is answered as the worker would, computed here. A command with no
// such record stops the run: only a live run can tell (needs_live).
//
// The comparison then gives each step a verdict (replayed, changed,
// no_record, engine) and the execution an outcome: same (the recorded path,
// results and final status), would_complete, would_fail, or needs_live.
//
// Pure like the engine: the caller (controlplane.WhatIf) reads the records
// and the values kept outside their logs (Loader); nothing here does I/O.
package whatif
