package controlplane_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
)

// TestStatusFromTheCommittedSnapshot: the status a process answers is the
// same whether it committed the execution's last step (its cache holds the
// snapshot, so the state column is not read) or another process did (it
// reads and decodes the state), before, during and after the run. Then the
// stored state is changed behind both: the process that committed the seq
// still answers from the snapshot it committed, which is what it wrote.
func TestStatusFromTheCommittedSnapshot(t *testing.T) {
	s := newStack(t)
	other, err := controlplane.New(controlplane.Config{Store: s.st, ServerURL: "http://test", Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.register(t, threeSteps)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", Payload: map[string]any{"n": int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	id := st.ExecutionID
	same := func(when string) *controlplane.StatusView {
		t.Helper()
		mine, err := s.svc.Status(s.ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		theirs, err := other.Status(s.ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !reflect.DeepEqual(mine, theirs) {
			t.Fatalf("%s: status from the cache %+v, from the state column %+v", when, mine, theirs)
		}
		return mine
	}
	same("started")
	p := s.pending(t, id)
	s.work(t, p[0], "w1", echoInput(p[0]))
	if v := same("one step done"); v.CompletedSteps != 1 || v.Status != "RUNNING" {
		t.Fatalf("after one step: %+v", v)
	}

	sh, _ := s.st.ShardFor(id)
	if _, err := sh.Pool().Exec(s.ctx, `UPDATE execution SET state = convert_to(jsonb_set(convert_from(state, 'UTF8')::jsonb,
		'{steps}', '{}')::text, 'UTF8') WHERE execution_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	mine, err := s.svc.Status(s.ctx, id)
	if err != nil || mine.CompletedSteps != 1 {
		t.Fatalf("the committing process: %+v %v, want its own snapshot (1 step completed)", mine, err)
	}
	theirs, err := other.Status(s.ctx, id)
	if err != nil || theirs.CompletedSteps != 0 {
		t.Fatalf("another process: %+v %v, want the stored state read (no step)", theirs, err)
	}

	s.drive(t, id, echoInput)
	if v := same("ended"); v.Status != "COMPLETED" || v.CompletedSteps != 3 {
		t.Fatalf("ended: %+v", v)
	}
}
