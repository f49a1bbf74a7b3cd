// Package devserver assembles the whole control plane in one process: the
// databases (a throwaway Postgres with shards unless URLs are given), NATS (an
// embedded JetStream unless a URL is given), the store and service, every
// function's Lambda handler behind the local gateway, a ticker standing in
// for the EventBridge schedule, and a loop standing in for the schedules'
// EventBridge Scheduler entries. `noetl serve`, `noetl dev` and the end-to-end
// tests build the stack through it, so all three run the same code as Lambda.
package devserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/commandbus"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/credentials"
	"github.com/noetl-go/noetl/shared/dashboard"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/localgw"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
)

// DefaultDrainEvery is how often noetl dev (and noetl corpus, which runs the
// product's defaults) runs the outbox's scheduled invocation.
const DefaultDrainEvery = 2 * time.Second

// Options configures Start. The zero value starts everything throwaway on a free
// port.
type Options struct {
	// Listen is the address to serve on; default 127.0.0.1:0 (a free port).
	Listen string
	// DatabaseURL and ShardURLs name existing databases; empty: a throwaway
	// Postgres with Shards shard databases (default 2), migrated.
	DatabaseURL string
	ShardURLs   string
	Shards      int
	// PostgresSettings are server settings of the throwaway Postgres (name →
	// value, as postgres -c), e.g. synchronous_commit=on for a test that
	// holds a COMMIT.
	PostgresSettings map[string]string
	// Migrate applies migrations to given databases (throwaway ones always are).
	Migrate bool
	// NATSURL names an existing NATS; empty: an embedded JetStream, stream created.
	NATSURL string
	// ResultStore is where workers store results too large to post inline
	// (file:///dir or s3://bucket/prefix, worker.md §1), and where workers
	// without a store of their own stage them through the API. Empty: a
	// temporary directory when the database is throwaway too (both go when
	// the stack stops), else resultstore.DefaultDir (the user's data
	// directory), which must outlive the stack as the database does.
	ResultStore string
	// KeyFile is the keychain's key file, created (mode 0600) when missing.
	// Empty: NOETL_KEYCHAIN_KEY_FILE; else, with NOETL_KEYCHAIN_KMS_KEY_ID
	// set, that KMS key instead; else a file in a temporary directory when the
	// database is throwaway too (both go when the stack stops), else
	// keychain.DefaultKeyFile (the user's configuration directory), which
	// must outlive the stack as the database does.
	KeyFile string
	// DrainEvery runs the outbox function's scheduled invocation this often (the
	// EventBridge stand-in); 0 never. noetl dev's default is DefaultDrainEvery.
	DrainEvery time.Duration
	// ScheduleEvery bounds how long the schedules' firing loop (the
	// EventBridge Scheduler stand-in) sleeps: it wakes at the next fire time
	// or after this, whichever comes first, to see schedules other servers
	// created. 0: 1 s; negative: no loop.
	ScheduleEvery time.Duration
	// Getenv supplies the rest of the configuration (tokens, lease, …); default
	// os.Getenv.
	Getenv func(string) string
	Logger *slog.Logger
	// LogLevel, when set, is set to NOETL_LOG_LEVEL once the configuration is
	// loaded: the level of Logger's handler, created before that.
	LogLevel *slog.LevelVar
	// DBCounter counts what the stack sends to Postgres (served at /metrics);
	// default a new one.
	DBCounter *store.Counter
	// Out receives the human messages (what started, where); default io.Discard.
	Out io.Writer
	// Timeouts bound slow clients of the HTTP server (see Timeouts).
	Timeouts Timeouts
	// WorkerTTL is the worker registry's expiry; 0: its default (tests
	// shorten it).
	WorkerTTL time.Duration
}

// Server is a running stack.
type Server struct {
	// URL is where the API listens, e.g. http://127.0.0.1:8082.
	URL        string
	NATSURL    string
	ClusterDSN string
	ShardDSNs  []string
	Config     *config.Config
	Store      *store.Store
	NATS       *nats.Conn
	JS         jetstream.JetStream
	API        *api.API
	// Postgres is the throwaway server, nil when DatabaseURL was given.
	Postgres *devstack.Postgres
	// EmbeddedNATS is the embedded NATS server, nil when NATSURL was given
	// (tests stop and restart it).
	EmbeddedNATS *devstack.NATS
	// Results is the stack's result store (see Options.ResultStore).
	Results resultstore.Store
	// KeyRing seals the keychain's credentials: a key file, or a KMS key.
	KeyRing keychain.KeyRing
	// DBCounter counts the round trips, statements and commits the stack
	// sends to Postgres.
	DBCounter *store.Counter

	srv       *http.Server
	outbox    *lambdafn.Handler
	schedules *lambdafn.Handler
	closers   []func()
	stopTick  context.CancelFunc
	served    chan error
}

// Start brings the stack up; Close takes it down and removes what it started.
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	// s, not the named result: every failure returns nil, and what was
	// started must still be stopped.
	s := &Server{DBCounter: o.DBCounter}
	if s.DBCounter == nil {
		s.DBCounter = &store.Counter{}
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	overrides := map[string]string{config.EnvDatabaseURL: o.DatabaseURL, config.EnvShardURLs: o.ShardURLs,
		config.EnvNATSURL: o.NATSURL, config.EnvLambdaFunctionName: ""}

	if o.DatabaseURL == "" {
		fmt.Fprintf(o.Out, "starting a throwaway Postgres with %d shard databases\n", o.Shards)
		pg, err := devstack.StartPostgres(context.WithoutCancel(ctx), devstack.PostgresOptions{Shards: o.Shards, Logger: o.Logger,
			ExtraSettings: o.PostgresSettings})
		if err != nil {
			return nil, fmt.Errorf("start Postgres: %w", err)
		}
		s.Postgres = pg
		s.closers = append(s.closers, func() { _ = pg.Stop() })
		if err := store.Migrate(ctx, store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}); err != nil {
			return nil, fmt.Errorf("migrate the throwaway Postgres: %w", err)
		}
		overrides[config.EnvDatabaseURL] = pg.ClusterDSN
		overrides[config.EnvShardURLs] = strings.Join(pg.ShardDSNs, ",")
	}
	if o.NATSURL == "" {
		n, err := devstack.StartNATS(context.WithoutCancel(ctx), devstack.NATSOptions{Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("start NATS: %w", err)
		}
		s.closers = append(s.closers, n.Shutdown)
		s.EmbeddedNATS = n
		overrides[config.EnvNATSURL] = n.URL()
	}

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	s.closers = append(s.closers, func() { ln.Close() })
	s.URL = "http://" + ln.Addr().String()
	if o.Getenv(config.EnvServerURL) == "" {
		overrides[config.EnvServerURL] = s.URL
	}
	cfg, err := config.Load(ctx, func(k string) string {
		if v, ok := overrides[k]; ok {
			return v
		}
		return o.Getenv(k)
	})
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	s.Config, s.ClusterDSN, s.ShardDSNs, s.NATSURL = cfg, cfg.ClusterDSN, cfg.ShardDSNs, cfg.NATS.URL
	if o.LogLevel != nil {
		o.LogLevel.Set(cfg.LogLevel)
	}

	scfg := store.Config{ClusterDSN: cfg.ClusterDSN, ShardDSNs: cfg.ShardDSNs, MaxConns: max(int(cfg.DBMaxConns), 10),
		Tracer: s.DBCounter, Logger: o.Logger}
	if o.Migrate && o.DatabaseURL != "" {
		if err := store.Migrate(ctx, scfg); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	if s.Store, err = store.Open(ctx, scfg); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	s.closers = append(s.closers, s.Store.Close)

	if s.NATS, err = lambdafn.ConnectNATS(cfg.NATS, "noetl-local"); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.NATS.Close)
	if s.JS, err = jetstream.New(s.NATS); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if o.NATSURL == "" {
		// Our own embedded server: create the stream (R-A7).
		if _, err := notify.EnsureStream(ctx, s.JS, notify.StreamOptions{}); err != nil {
			return nil, fmt.Errorf("create the NATS stream: %w", err)
		}
	}

	if err := s.openResults(ctx, o); err != nil {
		return nil, err
	}
	if err := s.openKeyRing(ctx, o, cfg); err != nil {
		return nil, err
	}
	// Notifications go to NATS, to NoETL's command bus, or both
	// (NOETL_COMMAND_BUS): one publisher, so an outbox row is published only
	// once every channel took it.
	pub := commandbus.New(cfg.CommandBus, lambdafn.PublisherOf(notify.NewPublisher(s.JS, notify.StreamOptions{})),
		commandbus.Options{Logger: o.Logger})
	s.closers = append(s.closers, pub.Close)
	deps := lambdafn.Deps{Store: s.Store, Publisher: pub,
		NATS: lambdafn.NATSChecker(s.NATS), Config: cfg, Results: s.Results, Logger: o.Logger, WorkerTTL: o.WorkerTTL,
		Keychain: func(st *store.Store, _ *controlplane.Service, log *slog.Logger) api.Keychain {
			return credentials.New(st, s.KeyRing, log)
		},
		Dashboard: dashboard.Files{}, Hosts: HostRule(ln.Addr().String(), cfg.AllowedHosts, cfg.ServerURL)}
	metrics := localgw.NewMetrics(serverStats{s}, cfg.Tokens)
	deps.Recorder, deps.Observer = metrics, metrics
	if s.API, err = deps.Build(cfg.ServerURL); err != nil {
		return nil, err
	}
	// One service for every function: locally they share a process anyway.
	build := func(string) (*api.API, error) { return s.API, nil }
	handlers := map[string]any{}
	for _, fn := range api.Functions() {
		h, err := lambdafn.New(fn, build, lambdafn.Options{ServerURL: cfg.ServerURL, Stage: cfg.Stage, Metrics: io.Discard, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		handlers[fn] = h.Handle
		switch fn {
		case api.FnOutbox:
			s.outbox = h
		case api.FnSchedules:
			s.schedules = h
		}
	}
	gw, err := localgw.New(handlers, localgw.Options{Metrics: metrics, CORS: api.NewCORS(cfg.CORSOrigins), Admit: s.API.Admit,
		Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	srv := o.Timeouts.server(gw)
	s.srv = srv
	s.served = make(chan error, 1)
	// srv, not s.srv: Close may clear s.srv before this goroutine runs.
	go func() { s.served <- srv.Serve(ln) }()

	tickCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopTick = stop
	if o.DrainEvery > 0 {
		go s.drainLoop(tickCtx, o.DrainEvery, o.Logger)
	}
	if o.ScheduleEvery == 0 {
		o.ScheduleEvery = time.Second
	}
	if o.ScheduleEvery > 0 {
		go s.scheduleLoop(tickCtx, o.ScheduleEvery, o.Logger)
	}
	return s, nil
}

// HostRule is the Host rule of a local listener (docs/security.md, "The HTTP
// surface"): its listen address, loopback names, allowed (NOETL_ALLOWED_HOSTS)
// and serverURL's host (NOETL_SERVER_URL). The API's server and the pprof
// listener share it.
func HostRule(listen string, allowed []string, serverURL string) *api.HostRule {
	names := slices.Clone(allowed)
	if u, err := url.Parse(serverURL); err == nil && u.Hostname() != "" {
		names = append(names, u.Hostname())
	}
	return api.NewHostRule(listen, names...)
}

// serverStats reads the service at scrape time (it is built after the
// metrics it records into).
type serverStats struct{ s *Server }

func (st serverStats) OutboxStats(ctx context.Context) (controlplane.OutboxStats, error) {
	return st.s.API.Service().OutboxStats(ctx)
}

func (st serverStats) CommandCounts(ctx context.Context) (map[string]int64, error) {
	return st.s.API.Service().CommandCounts(ctx)
}

func (st serverStats) DBWork() store.CounterSnapshot { return st.s.DBCounter.Snapshot() }

// openResults opens the result store (see Options.ResultStore).
func (s *Server) openResults(ctx context.Context, o Options) error {
	raw := o.ResultStore
	if raw == "" && o.DatabaseURL != "" {
		var err error
		if raw, err = resultstore.DefaultDir(); err != nil {
			return err
		}
	}
	if raw == "" {
		dir, err := os.MkdirTemp("", "noetl-results-")
		if err != nil {
			return fmt.Errorf("result store: %w", err)
		}
		s.closers = append(s.closers, func() { os.RemoveAll(dir) })
		raw = (&url.URL{Scheme: "file", Path: dir}).String()
	}
	rs, err := resultstore.Open(ctx, raw, resultstore.Options{})
	if err != nil {
		return err
	}
	s.Results = rs
	return nil
}

// openKeyRing opens the keychain's key ring (see Options.KeyFile).
func (s *Server) openKeyRing(ctx context.Context, o Options, cfg *config.Config) error {
	path := o.KeyFile
	if path == "" {
		path = cfg.KeychainKeyFile
	}
	if path == "" && cfg.KeychainKMSKeyID != "" {
		awsCfg, err := cfg.AWSConfig(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", config.EnvKeychainKMSKeyID, err)
		}
		ring, err := kmsring.New(awsCfg, cfg.KeychainKMSKeyID)
		if err != nil {
			return err
		}
		s.KeyRing = ring
		return nil
	}
	if path == "" && o.DatabaseURL == "" {
		dir, err := os.MkdirTemp("", "noetl-keychain-")
		if err != nil {
			return fmt.Errorf("keychain: %w", err)
		}
		s.closers = append(s.closers, func() { os.RemoveAll(dir) })
		path = filepath.Join(dir, "keychain.json")
	}
	if path == "" {
		var err error
		if path, err = keychain.DefaultKeyFile(); err != nil {
			return err
		}
	}
	ring, err := keychain.OpenFile(path, true)
	if err != nil {
		return err
	}
	s.KeyRing = ring
	fmt.Fprintf(o.Out, "keychain key file %s\n", path)
	return nil
}

// Open reports whether the API runs without tokens.
func (s *Server) Open() bool { return s.API.Open() }

// Served returns a channel that yields the HTTP server's error if it stops.
func (s *Server) Served() <-chan error { return s.served }

// Drain invokes the outbox function's scheduled run once, through its Lambda
// handler, as EventBridge would.
func (s *Server) Drain(ctx context.Context) error {
	_, err := lambda.NewHandler(s.outbox.Handle).Invoke(ctx, []byte(`{"maxBatch": 500}`))
	return err
}

// drainLoop runs the schedule (see loopLog for what it logs).
func (s *Server) drainLoop(ctx context.Context, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	l := loopLog{log: logger, what: "scheduled outbox run"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := s.Drain(ctx)
			if ctx.Err() != nil {
				return
			}
			l.outcome(ctx, err)
		}
	}
}

// loopLog is what a loop standing in for a schedule logs: a run that fails
// is said once, with the error, and the first that succeeds again says how
// many failed. A database outage is two lines, not one per tick.
type loopLog struct {
	log    *slog.Logger
	what   string
	failed int
	since  time.Time
}

func (l *loopLog) outcome(ctx context.Context, err error) {
	switch {
	case err != nil && l.failed == 0:
		level := slog.LevelError
		if store.Transient(err) {
			level = slog.LevelWarn
		}
		l.log.Log(ctx, level, l.what+" failed; retrying at every tick, quietly until one succeeds", "error", err.Error())
		l.since = time.Now()
		l.failed++
	case err != nil:
		l.failed++
	case l.failed > 0:
		l.log.Info(l.what+" succeeds again", "failed_runs", l.failed, "failing_for", time.Since(l.since).Round(time.Millisecond).String())
		l.failed = 0
	}
}

// FireSchedules invokes the schedules function's firing once, through its
// Lambda handler, as an EventBridge Scheduler entry would.
func (s *Server) FireSchedules(ctx context.Context) (*controlplane.FireReport, error) {
	out, err := lambda.NewHandler(s.schedules.Handle).Invoke(ctx, []byte(`{"fire_schedules": true}`))
	if err != nil {
		return nil, err
	}
	var r controlplane.FireReport
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("the schedules function answered %s: %w", out, err)
	}
	return &r, nil
}

// scheduleLoop fires the schedules at their fire times: it sleeps until the
// next one the firing reports, never longer than every.
func (s *Server) scheduleLoop(ctx context.Context, every time.Duration, logger *slog.Logger) {
	l := loopLog{log: logger, what: "firing the schedules"}
	for {
		wait := every
		r, err := s.FireSchedules(ctx)
		if ctx.Err() == nil {
			l.outcome(ctx, err)
		}
		switch {
		case err != nil:
		case r != nil && !r.NextFireAt.IsZero():
			// A fire time already past (more due than one firing takes, or a
			// schedule that failed) is retried soon, not in a tight loop.
			wait = min(wait, max(time.Until(r.NextFireAt), 50*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Close stops the HTTP server, the ticker and every part Start started, in
// reverse order. It is safe to call more than once.
func (s *Server) Close() error {
	var errs []error
	if s.stopTick != nil {
		s.stopTick()
		s.stopTick = nil
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
		cancel()
		s.srv = nil
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
	return errors.Join(errs...)
}
