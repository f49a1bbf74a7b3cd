// Package corpus runs NoETL's offline playbook corpus end to end (`noetl
// corpus`, make corpus): the entries of offline.json (List), a throwaway stack
// with its workers, a database for the playbooks' credential aliases and an
// HTTP fixture standing in for NoETL's test API (Start, Fixture), each
// playbook run and judged by its check (Run, checks.go), and the summary
// (Report). Development only: no function binary links it.
package corpus
