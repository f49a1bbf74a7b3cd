package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/commandbus"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/tools/duckdb"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// demoPath is the example `noetl dev` runs.
const demoPath = "examples/demo"

func runDev(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	listen := fs.String("listen", envOr("NOETL_LISTEN", "127.0.0.1:8082"), "address to listen on (env NOETL_LISTEN)")
	databaseURL := fs.String("database-url", os.Getenv("NOETL_DATABASE_URL"), "cluster database URL (env NOETL_DATABASE_URL); empty: a throwaway Postgres with 2 shards")
	shardURLs := fs.String("shard-urls", os.Getenv("NOETL_SHARD_URLS"), "comma-separated shard URLs (env NOETL_SHARD_URLS)")
	natsURL := fs.String("nats-url", os.Getenv("NOETL_NATS_URL"), "NATS URL (env NOETL_NATS_URL); empty: an embedded NATS JetStream")
	workers := fs.Int("workers", 2, "in-process workers")
	concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "commands each worker runs at once")
	examples := fs.String("examples", "examples", "directory of playbooks to register at start")
	demo := fs.Bool("demo", true, "run "+demoPath+" and print its result")
	exit := fs.Bool("exit", false, "stop after the demo (exit 0 when it COMPLETED, 1 otherwise)")
	drainEvery := fs.Duration("drain-every", devserver.DefaultDrainEvery, "scheduled outbox run interval (the EventBridge stand-in)")
	python := fs.String("python", envOr("NOETL_PYTHON", "python3"), "python interpreter (env NOETL_PYTHON)")
	resultStore := fs.String("result-store", os.Getenv("NOETL_RESULT_STORE"), "where workers store results too large to post inline, file:///dir or s3://bucket/prefix (env NOETL_RESULT_STORE); empty: a temporary directory, or with --database-url <data dir>/noetl/results")
	inlineLimit := fs.Int("inline-limit", worker.DefaultInlineLimit, "largest result (bytes of JSON) workers post inline; larger ones go to the result store")
	verbose := fs.Bool("v", false, "print the stack's JSON logs")
	pprofAddr := fs.String("pprof", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060; empty: off")
	toolUser := toolUserFlag(fs)
	dataDir := dataDirFlag(fs)
	allowLinkLocal := allowLinkLocalFlag(fs)
	if code, ok := flagsOnly(fs, args, "dev [flags]", "Runs the whole stack in one process: a throwaway Postgres (cluster + 2 shards) unless a\n"+
		"database URL is given, an embedded NATS unless a NATS URL is given, the API on "+"127.0.0.1:8082 serving\n"+
		"every function's routes, in-process workers and the scheduled drain. It registers the examples,\n"+
		"runs the demo and prints its result; Ctrl-C stops everything and removes what it started.", stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopPprof, err := startPprof(*pprofAddr, stderr, "noetl dev")
	if err != nil {
		fmt.Fprintf(stderr, "noetl dev: %v\n", err)
		return exitFail
	}
	defer stopPprof()
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	level := new(slog.LevelVar) // NOETL_LOG_LEVEL, once the stack has read it
	secrets := envSecrets(os.Environ())
	logger := slog.New(redact.LogHandler(api.LogHandler(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level})), secrets))
	d := dev{out: stdout, errw: stderr, logger: logger, secrets: secrets}
	code, err := d.run(ctx, devserver.Options{Listen: *listen, DatabaseURL: *databaseURL, ShardURLs: *shardURLs,
		NATSURL: *natsURL, ResultStore: *resultStore, DrainEvery: *drainEvery, Logger: logger, LogLevel: level, Out: stdout},
		devRun{workers: *workers, concurrency: *concurrency, inlineLimit: *inlineLimit, examples: *examples, demo: *demo, exit: *exit, python: *python,
			toolUser: *toolUser, dataDir: *dataDir, allowLinkLocal: *allowLinkLocal})
	if err != nil {
		fmt.Fprintf(stderr, "noetl dev: %v\n", err)
		return exitFail
	}
	return code
}

type devRun struct {
	workers, concurrency int
	inlineLimit          int
	examples             string
	demo, exit           bool
	python               string
	toolUser             string
	dataDir              string
	allowLinkLocal       bool
}

type dev struct {
	out, errw io.Writer
	logger    *slog.Logger
	// secrets are masked in the logs of the server and the workers alike.
	secrets *redact.Secrets
}

func (d dev) run(ctx context.Context, o devserver.Options, r devRun) (int, error) {
	fmt.Fprintln(d.out, "noetl dev: starting the stack")
	s, err := devserver.Start(ctx, o)
	if err != nil {
		return exitFail, err
	}
	defer func() {
		fmt.Fprintln(d.out, "noetl dev: stopping; removing what it started")
		if err := s.Close(); err != nil {
			fmt.Fprintf(d.errw, "noetl dev: %v\n", err)
		}
	}()
	warnOpen(s, d.errw, d.logger, "noetl dev")
	if s.Postgres != nil {
		// Its DSNs carry the cluster's password: masked like the environment's.
		d.secrets.Add(urlPasswords(s.ClusterDSN)...)
		fmt.Fprintf(d.out, "noetl dev: throwaway Postgres, cluster database %s\n", s.ClusterDSN)
	}
	fmt.Fprintf(d.out, "noetl dev: NATS at %s\n", s.NATSURL)
	if bus := s.Config.CommandBus; bus.Mode.Bus() {
		fmt.Fprintf(d.out, "noetl dev: commands announced to %s\n", bus.Describe())
		if !bus.Mode.NATS() && r.workers > 0 {
			fmt.Fprintf(d.errw, "noetl dev: %s=%s: the %d workers of this stack listen on NATS and will get no command; use %s=shadow to feed both\n",
				commandbus.EnvMode, bus.Mode, r.workers, commandbus.EnvMode)
		}
	}
	if s.Results != nil {
		fmt.Fprintf(d.out, "noetl dev: results over %d bytes go to %s\n", r.inlineLimit, s.Results.URL())
	}

	// The examples' postgres steps use the alias noetl_dev: this stack's own
	// database. Aliases from the environment work as for `noetl worker`.
	env, err := tools.CredentialsFromEnv(nil)
	if err != nil {
		return exitFail, err
	}
	creds := tools.Chain{tools.CredentialMap{"noetl_dev": {Kind: "postgres", DSN: s.ClusterDSN}}, env}
	workerToken, apiToken := os.Getenv("NOETL_WORKER_TOKEN"), os.Getenv("NOETL_API_TOKEN")
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() { stopWorkers(); wg.Wait() }()
	engine := duckdb.New() // one per process: a DuckDB file opens once
	for i := range r.workers {
		w, err := worker.Standard{Server: s.URL, Token: workerToken, APIToken: apiToken,
			JS: s.JS, Pool: notify.PoolShared, ID: fmt.Sprintf("dev-worker-%d", i+1), Concurrency: r.concurrency,
			Python: r.python, Credentials: creds, Results: s.Results, InlineLimit: r.inlineLimit, Logger: d.logger,
			ToolUser: r.toolUser, Secrets: d.secrets, DuckDB: engine, DataDir: r.dataDir,
			AllowLinkLocal: r.allowLinkLocal}.Build(ctx)
		if err != nil {
			return exitFail, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(wctx) }()
	}
	// The stack and the workers have read every secret: the workers' tools
	// run in this process's children, as with noetl worker.
	if err := worker.Protect(); err != nil {
		return exitFail, err
	}
	fmt.Fprintf(d.out, "noetl dev: API on %s with %d workers (pool %s)\n", s.URL, r.workers, notify.PoolShared)

	cl := client.New(s.URL, apiToken)
	if err := d.registerExamples(ctx, cl, r.examples); err != nil {
		return exitFail, err
	}
	code := exitOK
	if r.demo {
		code = d.runDemo(ctx, cl, s.URL)
	}
	d.printURLs(s.URL)
	if r.exit {
		return code, nil
	}
	fmt.Fprintln(d.out, "noetl dev: running; press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case err := <-s.Served():
		return exitFail, fmt.Errorf("server: %w", err)
	}
	return exitOK, nil
}

func (d dev) registerExamples(ctx context.Context, cl *client.Client, dir string) error {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		fmt.Fprintf(d.out, "noetl dev: no playbooks in %s to register\n", dir)
		return nil
	}
	for _, f := range files {
		r, err := registerFile(ctx, cl, f)
		if err != nil {
			return fmt.Errorf("register %s: %w", f, err)
		}
		fmt.Fprintf(d.out, "noetl dev: registered %s as %s version %d\n", f, r.Path, r.Version)
	}
	return nil
}

func (d dev) runDemo(ctx context.Context, cl *client.Client, url string) int {
	id, err := cl.Execute(ctx, wire.ExecuteRequest{Path: demoPath, Payload: map[string]any{"server_url": url}})
	if err != nil {
		fmt.Fprintf(d.errw, "noetl dev: start the demo: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(d.out, "noetl dev: demo execution %d started (watch it: noetl watch %d)\n", id, id)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	view, err := cl.WaitSummary(wctx, id, 200*time.Millisecond)
	if err != nil {
		fmt.Fprintf(d.errw, "noetl dev: the demo did not finish: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(d.out, "noetl dev: demo execution %d %s\n", id, view.Status)
	if view.Error != "" {
		fmt.Fprintf(d.out, "noetl dev: error: %s\n", view.Error)
	}
	fmt.Fprintf(d.out, "noetl dev: demo result:\n%s\n", indent(client.MarshalIndent(view.Result), "  "))
	if view.Status != "COMPLETED" {
		return exitFail
	}
	return exitOK
}

func (d dev) printURLs(url string) {
	fmt.Fprintf(d.out, `
  dashboard    %[1]s/           (executions, step graphs, time travel, catalog, workers)
  API          %[1]s            (every route of every Lambda function)
  health       %[1]s/api/health
  metrics      %[1]s/metrics
  executions   %[1]s/api/executions
  workers      %[1]s/api/worker/pools   (the worker registry: ours and NoETL's)
  openapi      %[1]s/api/openapi.json   (every route, its request and answer)

  try:  go run ./cmd/noetl exec examples/branches.yaml --wait
        go run ./cmd/noetl watch <execution id>
        go run ./cmd/noetl workers
`, url)
}
