package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

const header = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: tests/t}
`

// parse parses a playbook written as a header plus body and fails on errors.
func parse(t testing.TB, body string) *playbook.Playbook {
	t.Helper()
	pb, diags := parser.Parse([]byte(header + body))
	if diags.HasErrors() {
		t.Fatalf("parse errors:\n%v", diags)
	}
	return pb
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
