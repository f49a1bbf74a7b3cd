package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// TestRenderWorkers: live workers first, then the others by name; a capacity
// the worker did not declare is "?", and only live workers count in the
// totals.
func TestRenderWorkers(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	four, one := 4, 1
	pid := int64(6098)
	items := []wire.WorkerPool{
		{Name: "a-expired", Pool: "shared", Status: "expired", Capacity: &four, InFlight: 0, Runtime: wire.Object{"type": "go"},
			Heartbeat: wire.At(now.Add(-2 * time.Minute))},
		{Name: "rust-1", Pool: "worker-rust-pool", Status: "ready", Alive: true, Runtime: wire.Object{"type": "rust"},
			Heartbeat: wire.At(now.Add(-3 * time.Second)), Hostname: "pod-7"},
		{Name: "py-1", Pool: "shared", Status: "ready", Alive: true, Capacity: &one, InFlight: 1, Runtime: wire.Object{"type": "python"},
			Heartbeat: wire.At(now.Add(-14 * time.Second)), Hostname: "unknown", PID: &pid},
	}
	var b bytes.Buffer
	renderWorkers(&b, items, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"WORKER     POOL              RUNTIME  STATE    BUSY  LAST SEEN  HOST",
		"py-1       shared            python   ready    1/1   14s ago    unknown:6098",
		"rust-1     worker-rust-pool  rust     ready    0/?   3s ago     pod-7",
		"a-expired  shared            go       expired  0/4   2m0s ago   -",
		"2 of 3 workers alive; 1 in flight on 1 declared slots",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", b.String(), strings.Join(want, "\n"))
	}
	b.Reset()
	renderWorkers(&b, nil, now)
	if b.String() != "no workers registered\n" {
		t.Errorf("no workers: %q", b.String())
	}
}
