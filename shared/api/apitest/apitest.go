// Package apitest builds a real control-plane stack for the tests of the
// transport layers: a throwaway Postgres with a cluster and 2 shard databases
// and an embedded NATS JetStream (devstacktest), migrated, with the stream
// created, a Service and an API over them. No mocks. Test binaries that use
// it call devstacktest.Main from TestMain.
package apitest

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/credentials"
	"github.com/noetl-go/noetl/shared/dashboard"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// Tokens the stack configures unless Options.Open.
const (
	APIToken      = "test-api-token"
	WorkerToken   = "test-worker-token"
	InternalToken = "test-internal-token"
	AdminToken    = "test-admin-token"
)

// Tokens are the tokens a stack configures unless Options.Open.
func Tokens() config.Tokens {
	return config.Tokens{API: []string{APIToken}, Worker: []string{WorkerToken}, Internal: []string{InternalToken}, Admin: []string{AdminToken}}
}

// Options tunes a Stack; the zero value is 2 shards, tokens, a 2 s lease.
type Options struct {
	Open         bool // no tokens
	Shards       int  // default 2
	Lease        time.Duration
	MaxBodyBytes int64
	CORSOrigins  []string
	Recorder     api.Recorder
	Observer     controlplane.Observer
	Logger       *slog.Logger
	// TokenlessWorkers: config.TokenlessWorkers.
	TokenlessWorkers []netip.Prefix
	// WorkerTTL: controlplane.Config.WorkerTTL (0: its default).
	WorkerTTL time.Duration
}

func (opts Options) withDefaults() Options {
	if opts.Shards == 0 {
		opts.Shards = 2
	}
	if opts.Lease == 0 {
		opts.Lease = 2 * time.Second
	}
	if opts.Logger == nil {
		level := slog.LevelWarn
		if os.Getenv("NOETL_TEST_LOG") != "" {
			level = slog.LevelDebug
		}
		opts.Logger = slog.New(api.LogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	}
	return opts
}

// Stack is a control plane over real databases and NATS.
type Stack struct {
	Ctx       context.Context
	PG        *devstack.Postgres
	NATS      *devstack.NATS
	Store     *store.Store
	JS        jetstream.JetStream
	Publisher controlplane.Publisher
	Tokens    config.Tokens
	// API is built with ServerURL "http://test".
	API *api.API
	// KeyRing is the keychain's key file (in the test's temp dir); Results a
	// result store directory there.
	KeyRing *keychain.FileRing
	Results resultstore.Store
	opts    Options
}

// New starts a stack for t; everything stops when t ends.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	opts = opts.withDefaults()
	cs := cptest.New(t, opts.Shards)
	s, err := over(cs, opts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Start is New for a caller without a *testing.T (a package's examples,
// prepared in TestMain: devstacktest.Setup), over pg's databases (opts.Shards
// does not apply) and n; stop closes what Start opened, not pg or n.
func Start(ctx context.Context, pg *devstack.Postgres, n *devstack.NATS, opts Options) (s *Stack, stop func(), err error) {
	opts = opts.withDefaults()
	cs, closeStack, err := cptest.Start(ctx, pg, n)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "apitest-")
	if err == nil {
		s, err = over(cs, opts, dir)
	}
	stop = func() {
		closeStack()
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}

// over is a stack over cs with its keychain's key file and result store in
// dir.
func over(cs *cptest.Stack, opts Options, dir string) (*Stack, error) {
	s := &Stack{Ctx: cs.Ctx, PG: cs.PG, NATS: cs.NATS, Store: cs.Store, JS: cs.JS, Publisher: cs.Publisher, opts: opts}
	if !opts.Open {
		s.Tokens = Tokens()
	}
	var err error
	if s.KeyRing, err = keychain.OpenFile(filepath.Join(dir, "keychain.json"), true); err != nil {
		return nil, err
	}
	if s.Results, err = resultstore.Open(s.Ctx, "file://"+filepath.Join(dir, "results"), resultstore.Options{}); err != nil {
		return nil, err
	}
	if s.API, err = s.Build("http://test"); err != nil {
		return nil, err
	}
	return s, nil
}

// Build makes a fresh service and API over the stack's store and NATS: what
// lambdafn.New takes.
func (s *Stack) Build(serverURL string) (*api.API, error) {
	svc, err := controlplane.New(controlplane.Config{Store: s.Store, Publisher: s.Publisher, ServerURL: serverURL,
		Lease: s.opts.Lease, Observer: s.opts.Observer, WorkerTTL: s.opts.WorkerTTL, Logger: s.opts.Logger, Results: s.Results})
	if err != nil {
		return nil, err
	}
	nc := s.NATS
	return api.New(svc, api.Options{Tokens: s.Tokens, TokenlessWorkers: s.opts.TokenlessWorkers, MaxBodyBytes: s.opts.MaxBodyBytes, CORSOrigins: s.opts.CORSOrigins,
		Version: "test", Recorder: s.opts.Recorder, Logger: s.opts.Logger, Keychain: credentials.New(s.Store, s.KeyRing, s.opts.Logger), Dashboard: dashboard.Files{},
		NATS: func(context.Context) error {
			if !nc.Running() {
				return errors.New("the embedded NATS server is down")
			}
			return nil
		}}), nil
}

// Counts are the row counts of every table a request can write.
type Counts struct {
	Catalog, Credential, Worker, Execution, Event, Command, Outbox, StepResult int64
}

// Counts reads the row counts over the cluster and every shard.
func (s *Stack) Counts(t testing.TB) Counts {
	t.Helper()
	c, err := CountRows(s.Ctx, s.Store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CountRows reads the row counts of every table a request can write, over
// the cluster and every shard of st. An event staged without the lock
// (store.StageEvents) counts as an event: the execution's next transaction
// moves it into the log, which writes nothing new.
func CountRows(ctx context.Context, st *store.Store) (Counts, error) {
	var c Counts
	// Not the credential read log: a refused or unknown read is logged too.
	if err := st.Cluster().QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog), (SELECT count(*) FROM credential), (SELECT count(*) FROM worker)`).Scan(&c.Catalog, &c.Credential, &c.Worker); err != nil {
		return c, err
	}
	for i := range st.NumShards() {
		var e, ev, cmd, ob, sr int64
		err := st.Shard(i).Pool().QueryRow(ctx, `SELECT
			(SELECT count(*) FROM execution), (SELECT count(*) FROM event) + (SELECT count(*) FROM staged_event), (SELECT count(*) FROM command),
			(SELECT count(*) FROM outbox), (SELECT count(*) FROM step_result)`).Scan(&e, &ev, &cmd, &ob, &sr)
		if err != nil {
			return c, err
		}
		c.Execution += e
		c.Event += ev
		c.Command += cmd
		c.Outbox += ob
		c.StepResult += sr
	}
	return c, nil
}

// Pending lists the PENDING commands of an execution.
func (s *Stack) Pending(t testing.TB, executionID int64) []store.Command {
	t.Helper()
	sh, err := s.Store.ShardFor(executionID)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := storetest.ActiveCommands(s.Ctx, sh.Pool(), executionID)
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

// ThreeSteps is a linear playbook of three noop steps; the first sets a ctx
// value from the workload, the second reads it.
const ThreeSteps = cptest.ThreeSteps

// Flaky is one step that is retried 30 s after a failure (R-L6): a claim
// before then answers 429 (R-L7).
const Flaky = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: flaky, path: tests/flaky}
workflow:
  - step: start
    retry: {max_attempts: 2, delay: 30}
    tool: {kind: noop}
`
