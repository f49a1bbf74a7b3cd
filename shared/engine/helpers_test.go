package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
)

const header = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: tests/t}
`

// parse parses a playbook written as a header plus body and fails on errors.
func parse(t testing.TB, body string) *engine.Playbook {
	t.Helper()
	pb, diags := engine.Parse([]byte(header + body))
	if diags.HasErrors() {
		t.Fatalf("parse errors:\n%v", diags)
	}
	return pb
}

func diagnose(body string) engine.Diagnostics {
	_, d := engine.Parse([]byte(header + body))
	return d
}

// find returns the first diagnostic of a severity whose path and message contain
// the given parts.
func find(ds engine.Diagnostics, sev engine.Severity, path, msg string) (engine.Diagnostic, bool) {
	for _, d := range ds {
		if d.Severity == sev && strings.Contains(d.Path, path) && strings.Contains(d.Message, msg) {
			return d, true
		}
	}
	return engine.Diagnostic{}, false
}

// sim parses a playbook and returns a simulator for it.
func sim(t testing.TB, body string) *enginetest.Sim {
	t.Helper()
	return enginetest.New(parse(t, body), 4242)
}

// run starts and runs a simulation to its end, checking the log invariants every
// run must keep: contiguous seqs (R-S4) and live snapshot == fold of the log.
func run(t testing.TB, s *enginetest.Sim, payload map[string]any) {
	t.Helper()
	if err := s.Start(payload); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(100000); err != nil {
		t.Fatal(err)
	}
	invariants(t, s)
}

func invariants(t testing.TB, s *enginetest.Sim) {
	t.Helper()
	if err := s.Seqs(); err != nil {
		t.Fatal(err)
	}
	if err := enginetest.SameState(s.Snapshot(), s.Replay()); err != nil {
		t.Fatal(err)
	}
}

func conformanceDir(t testing.TB) string { return conformance.Dir(t) }

// specDir is the product spec beside the conformance data.
func specDir(t testing.TB) string { return filepath.Join(conformanceDir(t), "..", "spec") }
