// Package cptest builds a real control-plane stack for tests: a throwaway
// Postgres with a cluster and shard databases and an embedded NATS JetStream
// (devstacktest), migrated, with the stream created and a publisher over it.
// No mocks. Test binaries that use it call devstacktest.Main from TestMain.
package cptest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// ThreeSteps is a linear playbook of three noop steps; the first sets a ctx
// value from the workload, the second reads it.
const ThreeSteps = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: three, path: tests/three}
workload: {n: 1}
workflow:
  - step: start
    tool: {kind: noop, input: {n: "{{ n }}"}}
    set: {ctx.first: "{{ output.n }}"}
    next: middle
  - step: middle
    tool: {kind: noop, input: {m: "{{ ctx.first + 1 }}"}}
    next: end
  - step: end
    tool: {kind: noop}
`

// Stack is the infrastructure under a Service.
type Stack struct {
	Ctx   context.Context
	PG    *devstack.Postgres
	NATS  *devstack.NATS
	Store *store.Store
	Conn  *nats.Conn
	JS    jetstream.JetStream
	// Publisher publishes to the stack's JetStream.
	Publisher controlplane.Publisher
}

// New starts a stack with shards shard databases; everything stops when t ends.
func New(t testing.TB, shards int) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	s, stop, err := Start(ctx, devstacktest.Postgres(t, shards), devstacktest.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// Start builds a stack over pg and n (migrated, the stream created) for a
// caller without a *testing.T: a package's examples, prepared in TestMain
// (devstacktest.Setup). stop closes what Start opened, not pg or n.
func Start(ctx context.Context, pg *devstack.Postgres, n *devstack.NATS) (s *Stack, stop func(), err error) {
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs, MaxConns: 16}
	if err := store.Migrate(ctx, cfg); err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// No reconnect buffer: a publish while NATS is down fails instead of being
	// replayed later, as outage tests need.
	nc, err := nats.Connect(n.URL(), nats.ReconnectBufSize(-1))
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	stop = func() { nc.Close(); st.Close() }
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = notify.EnsureStream(ctx, js, notify.StreamOptions{})
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	pub := notify.NewPublisher(js, notify.StreamOptions{})
	return &Stack{Ctx: ctx, PG: pg, NATS: n, Store: st, Conn: nc, JS: js,
		Publisher: controlplane.PublisherFunc(func(ctx context.Context, subject, msgID string, data []byte) error {
			_, err := pub.Publish(ctx, subject, msgID, data)
			return err
		})}, stop, nil
}
