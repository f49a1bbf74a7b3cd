package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/devstack"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/localgw"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// serveFlags are `noetl serve`'s settings; the environment supplies the
// defaults, so `NOETL_DATABASE_URL=… noetl serve` works like the flags.
type serveFlags struct {
	listen      string
	databaseURL string
	shardURLs   string
	natsURL     string
	shards      int
	migrate     bool
	drainEvery  time.Duration
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", envOr("NOETL_LISTEN", "127.0.0.1:8082"), "address to listen on ($NOETL_LISTEN)")
	fs.StringVar(&f.databaseURL, "database-url", os.Getenv(config.EnvDatabaseURL),
		"cluster database URL ($"+config.EnvDatabaseURL+"); empty: start a throwaway Postgres")
	fs.StringVar(&f.shardURLs, "shard-urls", os.Getenv(config.EnvShardURLs),
		"comma-separated shard database URLs ($"+config.EnvShardURLs+"); empty: the cluster database is the only shard")
	fs.StringVar(&f.natsURL, "nats-url", os.Getenv(config.EnvNATSURL),
		"NATS URL ($"+config.EnvNATSURL+"); empty: start an embedded NATS JetStream")
	fs.IntVar(&f.shards, "shards", 2, "shard databases of the throwaway Postgres")
	fs.BoolVar(&f.migrate, "migrate", false, "apply migrations to the given databases (the throwaway one is always migrated)")
	fs.DurationVar(&f.drainEvery, "drain-every", time.Minute,
		"invoke the outbox function's scheduled run this often, standing in for EventBridge (0: never)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: noetl serve [flags]")
		fmt.Fprintln(fs.Output(), "\nServes every function's routes on one port through the same Lambda handlers AWS runs")
		fmt.Fprintln(fs.Output(), "(API Gateway events in, API Gateway responses out), plus /metrics. Without a database")
		fmt.Fprintln(fs.Output(), "URL it starts a throwaway Postgres (cluster + shards), without a NATS URL an embedded")
		fmt.Fprintln(fs.Output(), "NATS; Ctrl-C stops and removes them. Tokens come from NOETL_API_TOKEN,")
		fmt.Fprintln(fs.Output(), "NOETL_WORKER_TOKEN and NOETL_INTERNAL_TOKEN; with none the server runs open.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "noetl serve: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, f, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "noetl serve: %v\n", err)
		return exitFail
	}
	return exitOK
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	logger := slog.New(api.LogHandler(slog.NewJSONHandler(stderr, nil)))
	overrides := map[string]string{config.EnvDatabaseURL: f.databaseURL, config.EnvShardURLs: f.shardURLs,
		config.EnvNATSURL: f.natsURL, config.EnvLambdaFunctionName: ""}

	if f.databaseURL == "" {
		fmt.Fprintf(stderr, "noetl serve: no database URL; starting a throwaway Postgres with %d shards\n", f.shards)
		pg, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Shards: f.shards, Logger: logger})
		if err != nil {
			return fmt.Errorf("start Postgres: %w", err)
		}
		defer pg.Stop() //nolint:errcheck // best effort at exit; devstack reaps leftovers
		if err := store.Migrate(ctx, store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}); err != nil {
			return fmt.Errorf("migrate the throwaway Postgres: %w", err)
		}
		overrides[config.EnvDatabaseURL] = pg.ClusterDSN
		overrides[config.EnvShardURLs] = strings.Join(pg.ShardDSNs, ",")
		fmt.Fprintf(stdout, "noetl serve: throwaway Postgres cluster database %s\n", pg.ClusterDSN)
	}
	if f.natsURL == "" {
		fmt.Fprintln(stderr, "noetl serve: no NATS URL; starting an embedded NATS JetStream")
		n, err := devstack.StartNATS(ctx, devstack.NATSOptions{Logger: logger})
		if err != nil {
			return fmt.Errorf("start NATS: %w", err)
		}
		defer n.Shutdown()
		overrides[config.EnvNATSURL] = n.URL()
		fmt.Fprintf(stdout, "noetl serve: embedded NATS at %s (workers: noetl worker --nats %s)\n", n.URL(), n.URL())
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String()
	if os.Getenv(config.EnvServerURL) == "" {
		overrides[config.EnvServerURL] = url
	}
	getenv := func(k string) string {
		if v, ok := overrides[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := config.Load(ctx, getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger = slog.New(api.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))

	scfg := store.Config{ClusterDSN: cfg.ClusterDSN, ShardDSNs: cfg.ShardDSNs, MaxConns: int(cfg.DBMaxConns)}
	if f.migrate && f.databaseURL != "" {
		if err := store.Migrate(ctx, scfg); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	st, err := store.Open(ctx, scfg)
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()

	nc, err := lambdafn.ConnectNATS(cfg.NATS, "noetl-serve")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if f.natsURL == "" {
		// Our own embedded server: create the stream like `noetl dev` (R-A7).
		if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
			return fmt.Errorf("create the NATS stream: %w", err)
		}
	}

	deps := lambdafn.Deps{Store: st, Publisher: lambdafn.PublisherOf(notify.NewPublisher(js, notify.StreamOptions{})),
		NATS: lambdafn.NATSChecker(nc), Config: cfg, Logger: logger}
	var shared *api.API
	metrics := localgw.NewMetrics(func(ctx context.Context) (controlplane.OutboxStats, error) {
		return shared.Service().OutboxStats(ctx)
	}, cfg.Tokens)
	deps.Recorder = metrics
	if shared, err = deps.Build(cfg.ServerURL); err != nil {
		return err
	}
	// One service for all functions: locally they share a process anyway.
	build := func(string) (*api.API, error) { return shared, nil }
	handlers := map[string]any{}
	var outbox *lambdafn.Handler
	for _, fn := range api.Functions() {
		h, err := lambdafn.New(fn, build, lambdafn.Options{ServerURL: cfg.ServerURL, Stage: cfg.Stage,
			Metrics: io.Discard, Logger: logger})
		if err != nil {
			return err
		}
		handlers[fn] = h.Handle
		if fn == api.FnOutbox {
			outbox = h
		}
	}
	gw, err := localgw.New(handlers, localgw.Options{Metrics: metrics, Logger: logger})
	if err != nil {
		return err
	}

	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if shared.Open() {
		fmt.Fprintln(stderr, strings.Repeat("!", 78))
		fmt.Fprintln(stderr, "!! noetl serve is RUNNING OPEN: no token configured, every route is unauthenticated.")
		fmt.Fprintln(stderr, "!! Set NOETL_API_TOKEN, NOETL_WORKER_TOKEN and NOETL_INTERNAL_TOKEN to require tokens.")
		fmt.Fprintln(stderr, strings.Repeat("!", 78))
		logger.Warn("RUNNING OPEN: no API token configured")
	}
	fmt.Fprintf(stdout, "noetl serve: listening on %s\n", url)

	if f.drainEvery > 0 {
		go drainLoop(ctx, outbox, f.drainEvery, logger)
	}
	select {
	case err := <-served:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "noetl serve: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// drainLoop invokes the outbox function the way EventBridge does, with the
// template's input, through the Lambda handler.
func drainLoop(ctx context.Context, h *lambdafn.Handler, every time.Duration, logger *slog.Logger) {
	invoke := lambda.NewHandler(h.Handle)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := invoke.Invoke(ctx, []byte(`{"maxBatch": 500}`)); err != nil && ctx.Err() == nil {
				logger.Error("scheduled outbox run failed", "error", err.Error())
			}
		}
	}
}
