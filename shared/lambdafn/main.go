package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
)

// Main runs a Lambda function: it loads the configuration from the
// environment (Secrets Manager and SSM when ARNs are given), opens the store
// and NATS, and serves invocations until the runtime stops the process. A
// start that cannot succeed exits non-zero with the reason logged, which
// Lambda reports as an init error.
func Main(function string, env Env) {
	start := time.Now()
	config.ApplyGCDefaults(os.Getenv)
	// Until the configuration names a level, report at the default one.
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	startFn := func(ctx context.Context) (*Handler, func(), error) { return FromEnv(ctx, function, os.Getenv, env) }
	h, closeFn, err := startFn(context.Background())
	switch {
	case store.Transient(err):
		// Lambda starts instances during an outage too: this one answers
		// 503 with Retry-After until its start succeeds.
		logger.Warn("cold start: the database is unreachable; answering 503 with Retry-After and starting again at each invocation",
			"function", function, "error", err.Error())
		w := NewWaiting(startFn)
		defer w.Close()
		lambda.Start(w.Handle)
		return
	case err != nil:
		logger.Error("cold start failed", "function", function, "error", err.Error())
		os.Exit(1)
	}
	defer closeFn()
	logger.Info("cold start", "function", function, "init_ms", time.Since(start).Milliseconds())
	lambda.Start(h.Handle)
}

// Waiting is a function whose cold start could not reach the database: each
// invocation starts it again (no backoff: an instance serves one invocation
// at a time, and the failed dial is the answer's cost), and until a start
// succeeds an API Gateway event is answered 503 with Retry-After and other
// invocations fail, saying why. Then it serves as the started handler.
type Waiting struct {
	start func(context.Context) (*Handler, func(), error)
	mu    sync.Mutex
	h     *Handler
	close func()
}

// NewWaiting returns a function waiting for start to succeed.
func NewWaiting(start func(context.Context) (*Handler, func(), error)) *Waiting {
	return &Waiting{start: start}
}

// Handle is the Lambda handler.
func (w *Waiting) Handle(ctx context.Context, event json.RawMessage) (any, error) {
	w.mu.Lock()
	if w.h == nil {
		h, closeFn, err := w.start(ctx)
		if err != nil {
			w.mu.Unlock()
			var ev invocation
			if json.Unmarshal(event, &ev) == nil && ev.RequestContext.HTTP.Method != "" {
				return FromResponse(api.UnavailableResponse()), nil
			}
			return nil, fmt.Errorf("the function has not started: %w", err)
		}
		w.h, w.close = h, closeFn
	}
	h := w.h
	w.mu.Unlock()
	return h.Handle(ctx, event)
}

// Close closes what the started handler opened.
func (w *Waiting) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close != nil {
		w.close()
	}
}

// Env is what FromEnv takes besides the environment.
type Env struct {
	// Logger; nil logs JSON to stderr at NOETL_LOG_LEVEL.
	Logger *slog.Logger
	// Metrics receives EMF lines (default os.Stdout).
	Metrics io.Writer
	// OpenResults opens the result store NOETL_RESULT_STORE names
	// (OpenResultStore). Only the ingest function reads results posted
	// by reference, so only its main passes it: the S3 client it links would
	// take every other bootstrap near the 25 MB limit.
	OpenResults func(ctx context.Context, cfg *config.Config) (resultstore.Store, error)
	// OpenKeychain makes the keychain the credential routes serve (with the
	// KMS key NOETL_KEYCHAIN_KMS_KEY_ID names). Only the keychain function
	// serves credentials, so only its main passes it, and only its bootstrap
	// links the keychain and a KMS client.
	OpenKeychain func(ctx context.Context, cfg *config.Config) (NewKeychain, error)
	// OpenSchedules makes what keeps the scheduler entries of the
	// schedules in step (awssched.New when NOETL_SCHEDULER_GROUP is set).
	// Only the schedules function's main passes it, so only that bootstrap
	// links the EventBridge Scheduler client.
	OpenSchedules func(ctx context.Context, cfg *config.Config) (controlplane.ScheduleSync, error)
	// Dashboard is the web dashboard's files (dashboard.Files). Only the
	// status function's main passes it, so only that bootstrap links them.
	Dashboard api.Dashboard
}

// openPart opens a part only some functions have: open is nil in the other
// functions' mains, where a part configured all the same (configured) is
// warned about as ignored rather than failing the cold start.
func openPart[T any](ctx context.Context, cfg *config.Config, logger *slog.Logger,
	open func(context.Context, *config.Config) (T, error), configured bool, ignored string) (T, error) {
	if open == nil {
		if configured {
			logger.Warn(ignored)
		}
		var none T
		return none, nil
	}
	return open(ctx, cfg)
}

// FromEnv builds a function's handler from getenv (os.Getenv in Lambda):
// config.Load, migrations only when NOETL_MIGRATE_ON_START, the store with the
// configured (tiny) pools, NATS when NOETL_NATS_URL is set — the stream is not
// created here (R-A7; the publisher creates it only after a publish finds no
// stream), for a function given Env.OpenResults (ingest), the result
// store when NOETL_RESULT_STORE is set (no request is made; a store that
// cannot be opened fails the cold start), and for one given Env.OpenKeychain
// (keychain) the keychain. It refuses to
// run without any token unless NOETL_ALLOW_OPEN.
// The returned func closes the store and NATS.
func FromEnv(ctx context.Context, function string, getenv func(string) string, env Env) (*Handler, func(), error) {
	cfg, err := config.Load(ctx, getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration: %w", err)
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.New(api.LogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))
	}
	logger = logger.With("function", function, "stage", cfg.Stage)
	if cfg.Open() {
		if !cfg.AllowOpen {
			return nil, nil, fmt.Errorf("no API token is configured: set %s (or %s/%s/%s), or %s=true to run without authentication (never in production)",
				config.EnvAPITokensSecretARN, config.EnvAPIToken, config.EnvWorkerToken, config.EnvInternalToken, config.EnvAllowOpen)
		}
		logger.Warn("RUNNING OPEN: no API token is configured and NOETL_ALLOW_OPEN is set; every route is unauthenticated")
	}
	logger.Info("configuration", "config", cfg)

	// Before the database: a bad store fails the cold start at once.
	results, err := openPart(ctx, cfg, logger, env.OpenResults, cfg.ResultStore != "",
		config.EnvResultStore+" is ignored: only the ingest function reads results posted by reference")
	if err != nil {
		return nil, nil, err
	}
	newKeychain, err := openPart(ctx, cfg, logger, env.OpenKeychain, cfg.KeychainKMSKeyID != "",
		config.EnvKeychainKMSKeyID+" is ignored: only the keychain function seals and opens credentials")
	if err != nil {
		return nil, nil, err
	}

	scfg := store.Config{ClusterDSN: cfg.ClusterDSN, ShardDSNs: cfg.ShardDSNs, MaxConns: int(cfg.DBMaxConns), Logger: logger}
	if cfg.InLambda {
		// RDS Proxy pins connections that hold named prepared statements.
		scfg.ExecMode = pgx.QueryExecModeExec
	}
	if cfg.MigrateOnStart {
		if err := store.Migrate(ctx, scfg); err != nil {
			return nil, nil, fmt.Errorf("migrate on start: %w", err)
		}
	}
	st, err := store.Open(ctx, scfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open the store: %w", err)
	}
	closers := []func(){st.Close}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}

	var (
		pub       controlplane.Publisher
		natsCheck api.Checker
	)
	if cfg.NATS.Enabled() {
		nc, err := ConnectNATS(cfg.NATS, "noetl-"+function)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("jetstream: %w", err)
		}
		pub = PublisherOf(notify.NewPublisher(js, notify.StreamOptions{}))
		natsCheck = NATSChecker(nc)
	}

	deps := Deps{Store: st, Publisher: pub, NATS: natsCheck, Config: cfg, Logger: logger, Results: results, Keychain: newKeychain, Dashboard: env.Dashboard}
	if deps.Schedules, err = openPart(ctx, cfg, logger, env.OpenSchedules, cfg.Scheduler.Enabled(),
		config.EnvSchedulerGroup+" is ignored: only the schedules function keeps scheduler entries"); err != nil {
		closeAll()
		return nil, nil, err
	}
	build := deps.Build
	h, err := New(function, build, Options{ServerURL: cfg.ServerURL, Stage: cfg.Stage, Metrics: env.Metrics, Logger: logger})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return h, closeAll, nil
}

// Deps are what a function's API is built over.
type Deps struct {
	Store     *store.Store
	Publisher controlplane.Publisher // nil: notifications disabled
	NATS      api.Checker            // nil: NATS reported "disabled"
	Config    *config.Config
	Logger    *slog.Logger
	Recorder  api.Recorder // nil: none (the local server passes its metrics)
	// Results reads results workers stored by reference; nil: none accepted.
	Results resultstore.Store
	// Observer hears orchestration durations (the local server's metrics).
	Observer controlplane.Observer
	// WorkerTTL is the worker registry's expiry; 0: its default (tests
	// shorten it).
	WorkerTTL time.Duration
	// Keychain makes the keychain the credential routes serve; nil: none.
	Keychain NewKeychain
	// Schedules keeps the scheduler entries of the schedules in step; nil:
	// none.
	Schedules controlplane.ScheduleSync
	// Dashboard serves the web dashboard; nil: not this function's.
	Dashboard api.Dashboard
	// Hosts is the Host headers the API answers; nil: any (API Gateway owns
	// the host). The local server sets it.
	Hosts *api.HostRule
}

// Build makes a service and its API for serverURL (no I/O).
func (d Deps) Build(serverURL string) (*api.API, error) {
	svc, err := controlplane.New(controlplane.Config{Store: d.Store, Publisher: d.Publisher, ServerURL: serverURL,
		Lease: d.Config.Lease, Results: d.Results, Observer: d.Observer, Schedules: d.Schedules, WorkerTTL: d.WorkerTTL,
		Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	var kc api.Keychain
	if d.Keychain != nil {
		kc = d.Keychain(d.Store, svc, d.Logger)
	}
	return api.New(svc, api.Options{Tokens: d.Config.Tokens, TokenlessWorkers: d.Config.TokenlessWorkers, MaxBodyBytes: d.Config.MaxBodyBytes,
		CORSOrigins: d.Config.CORSOrigins, Version: Version(), NATS: d.NATS, Recorder: d.Recorder, Logger: d.Logger, Dashboard: d.Dashboard,
		Keychain: kc, Hosts: d.Hosts}), nil
}

// NewKeychain makes the keychain over a function's store and service
// (credentials.New with its key ring): a constructor, so that only the
// binaries that pass one link the keychain.
type NewKeychain func(st *store.Store, svc *controlplane.Service, log *slog.Logger) api.Keychain

// ConnectNATS connects with the configured authentication. A server that is
// down at cold start does not fail the function: the connection keeps trying
// and, meanwhile, notifications stay in the outbox for the drain (NATS is a
// doorbell). Publishes fail fast while disconnected instead of buffering.
func ConnectNATS(c config.NATS, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectBufSize(-1), nats.Timeout(2 * time.Second)}
	switch {
	case len(c.Creds) > 0:
		opts = append(opts, nats.UserCredentialBytes(c.Creds))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

// PublisherOf adapts notify's JetStream publisher to the service.
func PublisherOf(p *notify.Publisher) controlplane.Publisher {
	return controlplane.PublisherFunc(func(ctx context.Context, subject, msgID string, data []byte) error {
		_, err := p.Publish(ctx, subject, msgID, data)
		return err
	})
}

// NATSChecker reports a NATS connection's health.
func NATSChecker(nc *nats.Conn) api.Checker {
	return func(context.Context) error {
		if nc.IsConnected() {
			return nil
		}
		return errors.New("not connected (" + nc.Status().String() + ")")
	}
}

// Version is the module version the binary was built from, or "dev".
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// OpenResultStore opens the store of results posted by reference that
// cfg.ResultStore (NOETL_RESULT_STORE) names, or returns nil when none is
// configured. An s3:// store uses the SDK configuration shared/config uses
// for Secrets Manager and SSM (the role's credentials, AWS_REGION,
// AWS_ENDPOINT_URL). Opening makes no request, so it adds nothing measurable
// to a cold start; a file:// store's directory is created. Only the ingest
// function's main refers to it, so only that bootstrap links the S3 client.
func OpenResultStore(ctx context.Context, cfg *config.Config) (resultstore.Store, error) {
	if cfg.ResultStore == "" {
		return nil, nil
	}
	var opt resultstore.Options
	if strings.HasPrefix(cfg.ResultStore, "s3:") {
		awsCfg, err := cfg.AWSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvResultStore, err)
		}
		opt.AWS = &awsCfg
	}
	st, err := resultstore.Open(ctx, cfg.ResultStore, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvResultStore, err)
	}
	return st, nil
}
