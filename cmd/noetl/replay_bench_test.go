package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// writeLog writes a synthetic execution log of n events shaped like ours (a
// cycle of one step: enter, command events, exit), as a JSON array of parity
// rows.
func writeLog(tb testing.TB, path string, n int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	types := []string{"step.enter", "command.issued", "command.claimed", "command.started", "call.done", "command.completed", "ctx.updated", "step.exit"}
	fmt.Fprint(w, "[")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		if i > 0 {
			fmt.Fprint(w, ",\n")
		}
		typ := types[i%len(types)]
		if i == 0 {
			typ = "playbook.started"
		}
		visit := i/len(types) + 1
		cmd := fmt.Sprintf("1:tick:%d", 1000+visit)
		fmt.Fprintf(w, `{"event_id": %d, "seq": %d, "event_type": %q, "node_name": "tick", "status": "OK", "command_id": %q, `+
			`"worker_id": "w1", "meta": {"command_id": %q, "visit": %d, "attempt": 1}, "context": {"visit": %d}, `+
			`"result": null, "created_at": %q}`,
			1000000+i, i+1, typ, cmd, cmd, visit, visit, t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
	}
	fmt.Fprint(w, "]\n")
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
}

// BenchmarkReplayStreaming replays logs of 10,000 and 100,000 events with
// projection=execution in a subprocess (the real binary) and reports wall time
// and peak RSS: the fold streams, so the peak must not grow with the log.
func BenchmarkReplayStreaming(b *testing.B) {
	dir := b.TempDir()
	bin := builtBinary(b)
	for _, n := range []int{10000, 100000} {
		log := filepath.Join(dir, fmt.Sprintf("log-%d.json", n))
		writeLog(b, log, n)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			var peakKB int64
			for b.Loop() {
				cmd := exec.Command(bin, "replay", "--events", log, "--projection", "execution", "--limit", fmt.Sprint(n))
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("replay: %v\n%s", err, out)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				peakKB = max(peakKB, ru.Maxrss) // kilobytes on Linux
			}
			b.ReportMetric(float64(peakKB), "peak-RSS-KB")
		})
	}
}
