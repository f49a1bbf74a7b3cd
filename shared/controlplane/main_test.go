package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

func TestMain(m *testing.M) { devstacktest.Main(m, startExample) }

// stack is a service over a fresh cluster + 2 shards and an embedded NATS.
type stack struct {
	pg   *devstack.Postgres
	nats *devstack.NATS
	svc  *controlplane.Service
	st   *store.Store
	js   jetstream.JetStream
	nc   *nats.Conn
	ctx  context.Context
	cfg  controlplane.Config // svc's: another process's service is controlplane.New(cfg)
}

func newStack(t testing.TB, opts ...func(*controlplane.Config)) *stack {
	t.Helper()
	cs := cptest.New(t, 2)
	c := controlplane.Config{Store: cs.Store, ServerURL: "http://test", Lease: 2 * time.Second, Publisher: cs.Publisher}
	for _, o := range opts {
		o(&c)
	}
	svc, err := controlplane.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{pg: cs.PG, nats: cs.NATS, svc: svc, st: cs.Store, js: cs.JS, nc: cs.Conn, ctx: cs.Ctx, cfg: c}
}

func (s *stack) register(t *testing.T, yaml string) store.CatalogEntry {
	t.Helper()
	r, err := s.svc.Register(s.ctx, yaml)
	if err != nil {
		t.Fatal(err)
	}
	return r.Entry
}

// startClaimed starts an execution of entry and claims its first command
// for w1, started.
func (s *stack) startClaimed(t *testing.T, entry store.CatalogEntry) (int64, *controlplane.CommandBody) {
	t.Helper()
	x, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, x.ExecutionID)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	return x.ExecutionID, body
}

// notifications counts the outbox rows of every shard: the commands
// announced.
func (s *stack) notifications(t *testing.T) int {
	t.Helper()
	total := 0
	for i := range s.st.NumShards() {
		var n int
		if err := s.st.Shard(i).Pool().QueryRow(s.ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// pending lists the PENDING commands of an execution.
func (s *stack) pending(t *testing.T, execID int64) []store.Command {
	t.Helper()
	sh, _ := s.st.ShardFor(execID)
	cmds, err := storetest.ActiveCommands(s.ctx, sh.Pool(), execID)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Command
	for _, c := range cmds {
		if c.Status == store.CommandPending {
			out = append(out, c)
		}
	}
	return out
}

// work claims a command and reports a result the way a worker does.
func (s *stack) work(t *testing.T, c store.Command, worker string, data any) {
	t.Helper()
	body, err := s.svc.Claim(s.ctx, c.IssuedEventID, worker, false)
	if err != nil {
		t.Fatalf("claim %s: %v", c.CommandID, err)
	}
	s.report(t, body, worker, data)
}

func (s *stack) report(t *testing.T, body *controlplane.CommandBody, worker string, data any) {
	t.Helper()
	for _, err := range s.post(body, worker, data) {
		if err != nil {
			t.Fatalf("report %s: %v", body.CommandID, err)
		}
	}
}

// post sends started, call.done and completed; it returns each post's error.
func (s *stack) post(body *controlplane.CommandBody, worker string, data any) []error {
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	base := fmt.Sprintf("%s-%d", body.CommandID, body.Attempt)
	var errs []error
	for i, ev := range []controlplane.EventInput{
		{Type: "command.started", Status: "RUNNING"},
		{Type: "call.done", Status: "COMPLETED", Payload: map[string]any{"result": map[string]any{"status": "success", "data": data}}},
		{Type: "command.completed", Status: "success"},
	} {
		ev.ExecutionID, ev.Step, ev.WorkerID, ev.Meta = body.ExecutionID, body.Step, worker, meta
		ev.ClientEventID = base + "-" + strconv.Itoa(i)
		_, err := s.svc.Ingest(s.ctx, ev)
		errs = append(errs, err)
	}
	return errs
}

// drive runs every pending command to completion until none is left.
func (s *stack) drive(t *testing.T, execID int64, data func(store.Command) any) {
	t.Helper()
	for range 1000 {
		p := s.pending(t, execID)
		if len(p) == 0 {
			return
		}
		for _, c := range p {
			s.work(t, c, "w1", data(c))
		}
	}
	t.Fatal("execution did not settle")
}

func (s *stack) execution(t *testing.T, id int64) *controlplane.ExecutionView {
	t.Helper()
	v, err := s.svc.Execution(s.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s *stack) eventTypes(t *testing.T, id int64) []string {
	t.Helper()
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.EventType)
	}
	return out
}

func isKind(err, kind error) bool { return errors.Is(err, kind) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
