// Package parser reads playbooks from YAML: Parse reads, validates and
// analyses one into a playbook.Playbook, reporting every problem with its YAML
// path and line (dsl.md §1: unknown keys warn, never silently dropped);
// Document and WorkloadForm are the catalog's other views of the same text.
//
// Its files follow a playbook's shape: parse.go (Parse and its diagnostics),
// nodes.go (the YAML document, mappings, scalars, values and their paths),
// playbook.go (the top level: executor, metadata, workload, workbook,
// workflow), step.go (a step, its admission rules, set and retry), tool.go
// (tools, pipelines, workbook references, tool.spec and policy rules),
// loop.go (loops and cursors), next.go (arcs), templates.go (templates and the
// names they read), expand.go (the expanded size, against playbook's limits)
// and document.go (Document and WorkloadForm, the catalog's views).
package parser
