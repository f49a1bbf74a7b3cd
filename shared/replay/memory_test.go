package replay

import (
	"runtime"
	"strconv"
	"testing"
)

// syntheticRow is event i of a long, payload-free run in our event shapes:
// steps entered and exited, one command each, every id distinct.
func syntheticRow(i int64) Row {
	step := "step" + strconv.FormatInt(i%50, 10)
	cid := "77:" + step + ":" + strconv.FormatInt(i, 10)
	r := Row{Seq: i, EventID: 1_000_000 + i, NodeName: step}
	switch i % 4 {
	case 0:
		r.EventType, r.Status = "step.enter", "ENTERED"
		r.Context = map[string]any{"visit": i}
	case 1:
		r.EventType, r.Status, r.CommandID = "command.issued", "PENDING", cid
		r.Meta = map[string]any{"command_id": cid, "step": step, "attempt": int64(1)}
	case 2:
		r.EventType, r.Status, r.CommandID = "command.completed", "COMPLETED", cid
		r.Meta = map[string]any{"command_id": cid, "attempt": int64(1)}
	default:
		r.EventType, r.Status = "step.exit", "COMPLETED"
	}
	return r
}

// retainedHeap folds n synthetic rows and returns the heap the live Folder
// holds afterwards: HeapAlloc after GC, minus the same before the fold.
func retainedHeap(t *testing.T, p Projection, n int64) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := NewFolder(Options{Projection: p, Limit: int(n)})
	for i := int64(1); i <= n; i++ {
		if err := f.Add(syntheticRow(i)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if f.count != n {
		t.Fatalf("folded %d of %d", f.count, n)
	}
	runtime.KeepAlive(f)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func TestExecutionProjectionMemoryDoesNotGrowWithLog(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement folds 220k rows")
	}
	// Bound: 1 MiB for 90k extra events. Anything the fold kept per event
	// (an id, a string header, a map entry) would cost ≥ 12 B × 90k ≈ 1 MiB,
	// so a per-event leak fails; meanwhile GC and runtime bookkeeping noise
	// between two measurements stays in the tens of KiB, far below it.
	const bound = 1 << 20
	small := retainedHeap(t, ProjectionExecution, 10_000)
	large := retainedHeap(t, ProjectionExecution, 100_000)
	t.Logf("retained heap: 10k rows %d B, 100k rows %d B, growth %d B", small, large, large-small)
	if large-small >= bound {
		t.Fatalf("projection=execution retained %d B more for 100k rows than for 10k (bound %d B)", large-small, bound)
	}

	// The measurement must be able to see growth: the command projection
	// keeps one entry per command, 22.5k more commands here.
	cs := retainedHeap(t, ProjectionCommand, 10_000)
	cl := retainedHeap(t, ProjectionCommand, 100_000)
	t.Logf("projection=command: 10k rows %d B, 100k rows %d B", cs, cl)
	if cl-cs < bound {
		t.Fatalf("projection=command grew only %d B: the measurement cannot detect growth", cl-cs)
	}
}

func TestExecutionFoldDoesNotAllocatePerEvent(t *testing.T) {
	f := NewFolder(Options{Projection: ProjectionExecution, Limit: 1 << 30})
	rows := make([]Row, 8)
	for i := range rows {
		rows[i] = syntheticRow(int64(i + 1))
	}
	seq := int64(0)
	allocs := testing.AllocsPerRun(10_000, func() {
		seq++
		r := rows[seq%8]
		r.Seq = seq
		if err := f.Add(r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Add with projection=execution allocates %.2f times per event, want 0", allocs)
	}
}

// BenchmarkFoldExecution folds 100,000 rows with projection=execution per
// iteration; allocs/op is per 100k-row fold (the rows are built beforehand).
func BenchmarkFoldExecution(b *testing.B) {
	const n = 100_000
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = syntheticRow(int64(i + 1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f := NewFolder(Options{Projection: ProjectionExecution})
		for _, r := range rows {
			if err := f.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.State(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/row")
}

// BenchmarkFoldAll is the same stream with every projection, for comparison.
func BenchmarkFoldAll(b *testing.B) {
	const n = 100_000
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = syntheticRow(int64(i + 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		f := NewFolder(Options{})
		for _, r := range rows {
			if err := f.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.State(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/row")
}
