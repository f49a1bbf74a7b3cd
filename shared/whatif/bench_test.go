package whatif_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/whatif"
)

// chain is a playbook of k http steps in a row, each reading the previous
// one's result; fixed adds v2's fix (the last step's error is handled).
func chain(tb testing.TB, k int, fixed bool) *playbook.Playbook {
	tb.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: chain, path: bench/chain}\nworkload: {n: 1}\nworkflow:\n")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: http, method: GET, url: \"http://svc/s%d?n={{ workload.n }}&prev={{ %s }}\"}\n",
			stepName(i), i, prevRef(i))
		if i == k && fixed {
			b.WriteString("    spec: {on_error: continue}\n")
		}
		if i < k {
			fmt.Fprintf(&b, "    next: s%d\n", i+1)
		}
	}
	pb, diags := parser.Parse([]byte(b.String()))
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return pb
}

func stepName(i int) string {
	if i == 1 {
		return "start"
	}
	return fmt.Sprintf("s%d", i)
}

func prevRef(i int) string {
	if i == 1 {
		return "0"
	}
	return stepName(i-1) + ".data.v"
}

// BenchmarkWhatIf: a what-if over 1,000 recorded executions of a 10-step
// playbook (one in four failed at its last step; v2 handles that error),
// in memory: the engine's work per execution, without the database reads
// (BenchmarkWhatIfStack in e2e measures those, and the peak heap). Reports
// executions per second.
func BenchmarkWhatIf(b *testing.B) {
	const n, k = 1000, 10
	v1, v2 := chain(b, k, false), chain(b, k, true)
	recs := make([]whatif.Record, n)
	for i := range recs {
		s := enginetest.New(v1, int64(1024*(i+1)))
		fail := i%4 == 0
		s.Default = func(c *enginetest.Cmd) enginetest.Reply {
			if fail && c.Step == fmt.Sprintf("s%d", k) {
				return enginetest.Reply{Status: "error", Error: "HTTP 500", Data: map[string]any{"status_code": int64(500)}}
			}
			return enginetest.Reply{Data: map[string]any{"status_code": int64(200), "data": map[string]any{"v": int64(i)}}}
		}
		if err := s.Start(map[string]any{"n": int64(i)}); err != nil {
			b.Fatal(err)
		}
		if err := s.RunToEnd(100); err != nil {
			b.Fatal(err)
		}
		recs[i] = whatif.Record{ExecutionID: s.Run.ExecutionID, Path: v1.Metadata.Path, Version: 1, Status: s.Status(), Events: s.Log}
	}
	r := runner()
	v := whatif.Version{PB: v2, CatalogID: 2, Version: 2}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		complete := 0
		for _, rec := range recs {
			e, err := r.Execution(context.Background(), v, rec)
			if err != nil {
				b.Fatal(err)
			}
			if e.Outcome == "would_complete" {
				complete++
			}
		}
		if complete != n/4 {
			b.Fatalf("%d would complete, want %d", complete, n/4)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "executions/s")
	// CPU time is what the machine's load does not change.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n*b.N), "cpu-µs/execution")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
