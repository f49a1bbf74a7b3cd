package main

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/dev/bench"
)

// TestBenchSmoke runs the real `noetl bench` binary on a tiny shape: it
// starts its own durable Postgres and `noetl serve`, runs two chains of three
// steps with the project's worker and a chain of three through each of NoETL's
// workers' protocols (the bench's NoETL-protocol client), once each (--reps 1:
// each run waits 11 s for Postgres's statistics), and reports every figure.
// Only that the figures exist and the work happened is asserted; timings are
// printed. The rounds of --reps are TestRounds'.
func TestBenchSmoke(t *testing.T) {
	bin := builtBinary(t)
	cmd := exec.Command(bin, "bench", "--shape", "2x3", "--noetl", "1x3", "--noetl-batch", "1x3", "--reps", "1", "--json")
	cmd.Env = append(cmd.Environ(), "NOETL_API_TOKEN=", "NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_TOKEN=", "NOETL_INTERNAL_API_TOKEN=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("noetl bench: %v\n%s", err, out)
	}
	var rs []bench.Result
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 3 {
		t.Fatalf("results %v: %s", err, out)
	}
	for _, r := range rs {
		if r.Rep != 1 {
			t.Errorf("%s: run %d, want 1", r.Shape, r.Rep)
		}
	}
	// NoETL's workers' protocols, each step served by its own calls: the
	// claim and three events (the Rust worker's), the claim and two batches
	// (the Python worker's).
	for i, want := range []struct {
		shape string
		http  float64
	}{{"noetl 1x3", 4}, {"noetl-batch 1x3", 3}} {
		r := rs[i+1]
		t.Logf("%+v", r)
		if r.Shape != want.shape || r.Steps != 3 || r.Completed != 1 || r.HTTPRequestsPerStep != want.http {
			t.Errorf("%s: shape %s, %d steps, %d completed, %.2f requests per step (want %.0f)", want.shape, r.Shape, r.Steps, r.Completed, r.HTTPRequestsPerStep, want.http)
		}
		if r.ServerCommitsPerStep == nil || r.RoundTripsPerStep == nil || r.EventRowsPerStep < 7 ||
			r.ServerCPUMsPerStep == nil || r.WorkerCPUMsPerStep == nil || r.PostgresCPUMsPerStep == nil {
			t.Errorf("%s: work per step missing: %+v", want.shape, r)
		}
	}
	r := rs[0]
	t.Logf("%+v", r)
	switch {
	case r.Shape != "2x3" || r.Steps != 6 || r.Completed != 2:
		t.Errorf("shape %s, %d steps, %d completed", r.Shape, r.Steps, r.Completed)
	case r.StepsPerSecond <= 0 || r.StepCycleP50Ms == nil || r.ExecutionP99Ms <= 0:
		t.Errorf("timings missing: %+v", r)
	case r.CommitsPerStep == nil || *r.CommitsPerStep <= 0 || r.HTTPRequestsPerStep <= 0 || r.EventRowsPerStep < 3:
		t.Errorf("work per step missing: %+v", r)
	case r.ServerPeakRSSMB == nil || *r.ServerPeakRSSMB <= 0:
		t.Errorf("server memory missing: %+v", r)
	}
}

// TestPrintResultsMedians: one run of each shape prints its row only; more
// print each shape's median [min..max] after the runs, as River's script does.
func TestPrintResultsMedians(t *testing.T) {
	one := []bench.Result{{Shape: "500x10", Rep: 1, StepsPerSecond: 900}}
	var b strings.Builder
	printResults(&b, one)
	if strings.Contains(b.String(), "median") {
		t.Errorf("one run printed a median:\n%s", b.String())
	}
	three := append(one, bench.Result{Shape: "500x10", Rep: 2, StepsPerSecond: 1100}, bench.Result{Shape: "500x10", Rep: 3, StepsPerSecond: 1000})
	b.Reset()
	printResults(&b, three)
	if !regexp.MustCompile(`(?m)^ *500x10 +3 +1000\.0 \[900\.0\.\.1100\.0\] +n/a`).MatchString(b.String()) {
		t.Errorf("three runs, no median row:\n%s", b.String())
	}
}
