package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/noetl-go/noetl/shared/dev/bench"
)

// TestBenchSmoke runs the real `noetl bench` binary on a tiny shape: it
// starts its own durable Postgres and `noetl serve`, runs two chains of three
// steps with the project's worker, and reports every figure. Only that the
// figures exist and the work happened is asserted; timings are printed.
func TestBenchSmoke(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "noetl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "bench", "--shape", "2x3", "--json")
	cmd.Env = append(cmd.Environ(), "NOETL_API_TOKEN=", "NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_TOKEN=", "NOETL_INTERNAL_API_TOKEN=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("noetl bench: %v\n%s", err, out)
	}
	var rs []bench.Result
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 1 {
		t.Fatalf("results %v: %s", err, out)
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
