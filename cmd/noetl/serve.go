package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/wire"
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
	resultStore string
	pprof       string
}

func runServe(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var f serveFlags
	fs.StringVar(&f.listen, "listen", envOr("NOETL_LISTEN", "127.0.0.1:8082"), "address to listen on ($NOETL_LISTEN)")
	fs.StringVar(&f.databaseURL, "database-url", os.Getenv(config.EnvDatabaseURL),
		"cluster database URL ($"+config.EnvDatabaseURL+"); empty: start a throwaway Postgres")
	fs.StringVar(&f.shardURLs, "shard-urls", os.Getenv(config.EnvShardURLs),
		"comma-separated shard database URLs ($"+config.EnvShardURLs+"); empty: the cluster database is the only shard")
	fs.StringVar(&f.natsURL, "nats-url", os.Getenv(config.EnvNATSURL),
		"NATS URL ($"+config.EnvNATSURL+"); empty: start an embedded NATS JetStream")
	fs.IntVar(&f.shards, "shards", 2, "shard databases of the throwaway Postgres")
	fs.BoolVar(&f.migrate, "migrate", false, "apply migrations to the given databases (the throwaway one is always migrated)")
	fs.StringVar(&f.resultStore, "result-store", os.Getenv("NOETL_RESULT_STORE"),
		"where results too large to post inline are kept, file:///dir or s3://bucket/prefix ($NOETL_RESULT_STORE): workers with\nthis store write there, workers without one hand them to the server; empty: a temporary directory with the throwaway\nPostgres, else <data dir>/noetl/results ($XDG_DATA_HOME or ~/.local/share)")
	fs.StringVar(&f.pprof, "pprof", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060; empty: off")
	fs.DurationVar(&f.drainEvery, "drain-every", time.Minute,
		"invoke the outbox function's scheduled run this often, standing in for EventBridge (0: never)")
	if code, ok := parseFlags(fs, args, "serve [flags]",
		"Serves every function's routes on one port through the same Lambda handlers AWS runs\n"+
			"(API Gateway events in, API Gateway responses out), plus /metrics. Without a database\n"+
			"URL it starts a throwaway Postgres (cluster + shards), without a NATS URL an embedded\n"+
			"NATS; Ctrl-C stops and removes them. Tokens come from NOETL_API_TOKEN,\n"+
			"NOETL_WORKER_TOKEN and NOETL_INTERNAL_API_TOKEN (or NOETL_INTERNAL_TOKEN); with none the server runs open."); !ok {
		return code
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
	level := new(slog.LevelVar) // NOETL_LOG_LEVEL, once the stack has read it
	logger := slog.New(redact.LogHandler(api.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})), envSecrets(os.Environ())))
	if f.databaseURL == "" {
		fmt.Fprintf(stderr, "noetl serve: no database URL; starting a throwaway Postgres with %d shards\n", f.shards)
	}
	if f.natsURL == "" {
		fmt.Fprintln(stderr, "noetl serve: no NATS URL; starting an embedded NATS JetStream")
	}
	stopPprof, err := startPprof(f.pprof, stderr, "noetl serve")
	if err != nil {
		return err
	}
	defer stopPprof()
	s, err := devserver.Start(ctx, devserver.Options{Listen: f.listen, DatabaseURL: f.databaseURL, ShardURLs: f.shardURLs,
		Shards: f.shards, Migrate: f.migrate, NATSURL: f.natsURL, ResultStore: f.resultStore, DrainEvery: f.drainEvery, Logger: logger, LogLevel: level})
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Postgres != nil {
		fmt.Fprintf(stdout, "noetl serve: throwaway Postgres cluster database %s\n", s.ClusterDSN)
	}
	if f.natsURL == "" {
		fmt.Fprintf(stdout, "noetl serve: embedded NATS at %s (workers: noetl worker --nats %s)\n", s.NATSURL, s.NATSURL)
	}
	if bus := s.Config.CommandBus; bus.Mode.Bus() {
		fmt.Fprintf(stdout, "noetl serve: commands announced to %s\n", bus.Describe())
	}
	fmt.Fprintf(stdout, "noetl serve: large results by reference in %s (workers without --result-store hand them to the server, up to %d MiB each; on this machine: noetl worker --result-store %s)\n",
		s.Results.URL(), wire.MaxStagedResultBytes>>20, s.Results.URL())
	fmt.Fprintf(stdout, "noetl serve: credentials sealed with %s\n", s.KeyRing.Describe())
	warnOpen(s, stderr, logger, "noetl serve")
	fmt.Fprintf(stdout, "noetl serve: listening on %s\n", s.URL)
	fmt.Fprintf(stdout, "noetl serve: dashboard at %s/\n", s.URL)
	select {
	case err := <-s.Served():
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "noetl serve: stopping")
	return s.Close()
}

// warnOpen says loudly that the API runs without tokens, or lets tokenless
// workers in from some networks.
func warnOpen(s *devserver.Server, stderr io.Writer, logger *slog.Logger, who string) {
	if nets := s.Config.TokenlessWorkers; len(nets) > 0 && !s.Open() {
		fmt.Fprintf(stderr, "%s: worker routes answer requests without a token from %v (%s): NoETL's Python worker sends none\n",
			who, nets, config.EnvTokenlessWorkers)
		logger.Warn("tokenless workers allowed", "networks", nets)
	}
	if !s.Open() {
		return
	}
	fmt.Fprintln(stderr, strings.Repeat("!", 78))
	fmt.Fprintf(stderr, "!! %s is RUNNING OPEN: no token configured, every route is unauthenticated.\n", who)
	fmt.Fprintln(stderr, "!! Set NOETL_API_TOKEN, NOETL_WORKER_TOKEN and NOETL_INTERNAL_API_TOKEN to require tokens.")
	if slices.Contains(s.Config.CORSOrigins, "*") {
		fmt.Fprintf(stderr, "!! %s=* on an open stack: EVERY web page you open can drive it. List origins instead.\n", config.EnvCORSOrigins)
	}
	fmt.Fprintln(stderr, strings.Repeat("!", 78))
	logger.Warn("RUNNING OPEN: no API token configured")
}
