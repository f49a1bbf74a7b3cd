// Package playbook is what a NoETL noetl.io/v2 playbook is once read: the
// model (Playbook, Step, Tool, Loop, Next, Retry, …) with its defaults, the
// graph analysis joins need (computed once, R-J1), the outline the dashboard
// draws, the diagnostics a reading reports, the expansion limits, the names a
// playbook may write (R-T7, R-T9) and the workload an execution starts with.
//
// Reading one from YAML is shared/playbook/parser's job; running one is
// shared/engine's. This package imports no YAML, so the engine, which runs on
// the model, links no YAML reader.
package playbook
