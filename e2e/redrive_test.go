package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// ordersV1 parses each order line's amount as a whole number: lines with
// cents ("2.50") fail it. v2 is the fix (ordersV2).
const ordersV1 = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: redrive_orders, path: e2e/redrive_orders}
workload: {lines: ["1"]}
workflow:
  - step: start
    tool: {kind: python, input: {lines: "{{ lines }}"}, code: "result = {'count': len(lines)}"}
    next: parse
  - step: parse
    loop: {in: "{{ lines }}", iterator: line, spec: {mode: sequential}}
    tool: {kind: python, input: {line: "{{ line }}"}, code: "result = {'cents': int(line) * 100}"}
    set: {ctx.cents: "{{ output | map(attribute='cents') | sum }}"}
    next: total
  - step: total
    tool: {kind: python, input: {cents: "{{ ctx.cents }}", count: "{{ start.count }}"}, code: "result = {'cents': cents, 'lines': count}"}
`

var ordersV2 = strings.Replace(ordersV1, "int(line) * 100", "int(round(float(line) * 100))", 1)

// TestRedriveFixForward is issue 31's redrive: v1 of a playbook fails on some
// inputs; the failed executions, redriven in bulk under v2 (the fix), each
// complete with the steps that completed before run exactly once in all (a
// loop keeps the iterations it completed), and replay verify is consistent on
// every one. A running or completed execution is refused 409 naming its
// status, a second redrive of one is refused, never run twice; a version
// without a completed step is 409 naming the step; a bad version is 422
// naming the field.
func TestRedriveFixForward(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := shared.cl
	shared.startWorkers(t, "redrive", 2)
	path := registerYAML(t, ordersV1)
	inputs := [][]any{{"1", "2"}, {"1", "2.50", "3"}, {"4"}, {"0.25"}, {"5", "6", "7.75"}, {"8", "9"}}
	var failed []int64
	for _, lines := range inputs {
		id, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "redrive", Payload: wire.Object{"lines": lines}})
		decimal := strings.Contains(fmt.Sprint(lines), ".")
		switch {
		case decimal && view.Status == "FAILED":
			failed = append(failed, id)
		case !decimal && view.Status == "COMPLETED":
		default:
			t.Fatalf("v1 on %v: %s (%s)", lines, view.Status, view.Error)
		}
	}
	if len(failed) != 3 {
		t.Fatalf("%d failed executions, want 3", len(failed))
	}
	before := map[int64]map[string]int{}
	for _, id := range failed {
		before[id] = issuedPerStep(shared.events(t, id))
	}

	// A completed execution: 409 naming its status.
	var completed int64
	for _, lines := range inputs[:1] {
		completed, _ = shared.run(t, wire.ExecuteRequest{Path: path, Pool: "redrive", Payload: wire.Object{"lines": lines}})
	}
	wantRefused(t, "a completed execution", 409, "COMPLETED", func() error { _, err := cl.Redrive(ctx, completed, 0); return err })

	// v3 renamed start, which completed in every execution: 409 naming it.
	reg, err := cl.Register(ctx, ordersV2)
	if err != nil {
		t.Fatal(err)
	}
	v2 := reg.Version
	if _, err := cl.Register(ctx, strings.NewReplacer("step: start", "step: begin", "start.count", "begin.count").Replace(ordersV2)); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a version without a completed step", 409, `"start"`, func() error { _, err := cl.Redrive(ctx, failed[0], v2+1); return err })
	wantRefused(t, "a version not registered", 422, "version:", func() error { _, err := cl.Redrive(ctx, failed[0], v2+5); return err })
	for _, id := range failed {
		if v, err := cl.ExecutionSummary(ctx, id); err != nil || v.Status != "FAILED" {
			t.Fatalf("a refused redrive changed execution %d: %v %v", id, v, err)
		}
	}

	// The bulk redrive of the failed ones under v2, an id given twice.
	batch, err := cl.RedriveMany(ctx, append(failed, failed[0]), v2)
	if err != nil {
		t.Fatal(err)
	}
	if batch.Redriven != 3 || batch.Refused != 0 || len(batch.Executions) != 3 {
		t.Fatalf("bulk redrive: %+v, want 3 redriven, each once", batch)
	}
	// Sent again while they run (or after they completed): each refused, never run twice.
	again, err := cl.RedriveMany(ctx, failed, v2)
	if err != nil {
		t.Fatal(err)
	}
	if again.Redriven != 0 || again.Refused != 3 || again.Executions[0].Code != 409 {
		t.Fatalf("second bulk redrive: %+v, want all refused 409", again)
	}
	for _, id := range failed {
		view, err := cl.Wait(ctx, id, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if view.Status != "COMPLETED" || view.Version != v2 {
			t.Fatalf("execution %d after redrive: %s (%s) version %d, want COMPLETED under v%d", id, view.Status, view.Error, view.Version, v2)
		}
		evs := shared.events(t, id)
		after := issuedPerStep(evs)
		var lines []any
		for _, e := range evs {
			if e.EventType == "playbook.started" {
				lines, _ = e.Context["workload"].(map[string]any)["lines"].([]any)
			}
		}
		// Earlier steps exactly once in all; in the sequential loop the
		// iterations before the first decimal completed under v1 and are kept,
		// the one that failed runs again, those after it run once.
		if after["start"] != 1 || after["total"] != 1 {
			t.Errorf("execution %d: commands per step %v, want start and total once", id, after)
		}
		d := firstDecimal(lines)
		for i := range lines {
			key := fmt.Sprintf("parse[%d]", i)
			want := 1
			if i == d {
				want = 2
			}
			if after[key] != want {
				t.Errorf("execution %d (%v): %s issued %d times in all, want %d (before the redrive: %d)", id, lines, key, after[key], want, before[id][key])
			}
		}
		if count(evs, "playbook.redriven", "") != 1 {
			t.Errorf("execution %d: %d playbook.redriven events, want 1", id, count(evs, "playbook.redriven", ""))
		}
		shared.verify(t, id)
		wantRefused(t, "a redriven, completed execution", 409, "COMPLETED", func() error { _, err := cl.Redrive(ctx, id, 0); return err })
	}
	// The replay's loop projection counts the kept iteration done: the
	// resumed visit 2 of parse is 3 of 3, one of them kept.
	doc, err := cl.Replay(ctx, failed[0], map[string][]string{"projection": {"loop"}})
	if err != nil {
		t.Fatal(err)
	}
	var resumed map[string]any
	for _, l := range doc["loops"].(map[string]any) {
		if m := l.(map[string]any); m["step_name"] == "parse" && m["visit"] == "2" {
			resumed = m
		}
	}
	if resumed == nil || jsonx.Int(resumed["done"]) != 3 || jsonx.Int(resumed["kept"]) != 1 || jsonx.Int(resumed["total"]) != 3 || resumed["completed"] != true {
		t.Errorf("the resumed loop in the replay: %v, want visit 2 done 3 of 3, 1 kept, completed", resumed)
	}
	// What the fix computes: 1 + 2.50 + 3 = 6.50.
	v, err := cl.Execution(ctx, failed[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonx.Int(step(v, "total").Result.V.(map[string]any)["cents"]); got != 650 {
		t.Errorf("total of %d: %d cents, want 650", failed[0], got)
	}

	// A running execution is refused naming RUNNING; cancelled, it is redriven.
	idle, err := cl.Execute(ctx, wire.ExecuteRequest{Path: path, Version: wire.Version(v2), Pool: "redrive-idle", Payload: wire.Object{"lines": []any{"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a running execution", 409, "RUNNING", func() error { _, err := cl.Redrive(ctx, idle, 0); return err })
	if _, err := cl.Cancel(ctx, idle, "test"); err != nil {
		t.Fatal(err)
	}
	rd, err := cl.Redrive(ctx, idle, 0)
	if err != nil || rd.PreviousStatus != "CANCELLED" || rd.Status != "RUNNING" || rd.Version != v2 {
		t.Fatalf("redrive of a cancelled execution: %+v %v", rd, err)
	}
	wantRefused(t, "a second redrive while it runs", 409, "RUNNING", func() error { _, err := cl.Redrive(ctx, idle, 0); return err })
	shared.startWorkers(t, "redrive-idle", 1)
	view, err := cl.Wait(ctx, idle, 100*time.Millisecond)
	if err != nil || view.Status != "COMPLETED" {
		t.Fatalf("the redriven cancelled execution: %v %v", view, err)
	}
	if n := issuedPerStep(shared.events(t, idle))["start"]; n != 2 {
		t.Errorf("start of the cancelled execution issued %d times, want 2 (its first command was cancelled)", n)
	}
	shared.verify(t, idle)
}

// issuedPerStep counts command.issued per step, loop iterations as
// step[index].
func issuedPerStep(evs []wire.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		if e.EventType != "command.issued" {
			continue
		}
		key := string(e.NodeName)
		if i, ok := e.Meta["iteration_index"]; ok {
			key = fmt.Sprintf("%s[%d]", key, jsonx.Int(i))
		}
		n[key]++
	}
	return n
}

func firstDecimal(lines []any) int {
	for i, l := range lines {
		if strings.Contains(fmt.Sprint(l), ".") {
			return i
		}
	}
	return len(lines)
}

func wantRefused(t *testing.T, what string, status int, text string, call func() error) {
	t.Helper()
	err := call()
	if client.StatusOf(err) != status || !strings.Contains(fmt.Sprint(err), text) {
		t.Fatalf("redrive of %s: %v, want %d naming %s", what, err, status, text)
	}
}
